// The length a segment's replicas have, as meta lists the segment: its
// own length, except for a snapshot's prefix of a segment that was open
// when the snapshot was taken (proto::Segment.prefix), whose replicas
// hold the whole segment. Re-replication copies, and fsck checks,
// replicas at this length; 0 for a prefix whose segment is still open
// (its writer's file owns its replicas until it seals them).
#pragma once

#include <cstdint>

#include "store/format/logfs.pb.h"

namespace logfs::format {

inline uint64_t ReplicaLength(const proto::Segment& segment) {
  return segment.prefix() ? segment.replica_length() : segment.length();
}

// A sealed segment whose replicas are sealed too: they may be copied and
// checked at ReplicaLength.
inline bool ReplicasSealed(const proto::Segment& segment) {
  return segment.sealed() && (!segment.prefix() || segment.replica_length() != 0);
}

}  // namespace logfs::format
