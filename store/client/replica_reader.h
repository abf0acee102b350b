// Reads file bytes from segment replicas over TCP, moving to the next
// replica when one is down, short, or returns bytes that fail their
// checksum. A replica whose server answers kDataLoss (its chunk CRCs
// failed) is reported to meta. Thread-safe (stateless); blocks the caller.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/client/meta_client.h"
#include "store/client/segd_client.h"
#include "store/format/logfs.pb.h"

namespace logfs::client {

// Where ReadSegmentRange reports bad replicas: meta's ReportBadReplica for the
// file `ino`, with the client's timeout. Best effort: sent without waiting,
// errors only logged. A null `meta` reports nothing.
struct BadReplicaReporter {
  MetaClient* meta = nullptr;
  uint64_t ino = 0;
};

// Bytes [offset, offset + size) of one segment from the first of its
// replicas that has all of them with a good checksum. kUnavailable (EIO)
// when none can serve them; a replica whose server reports kDataLoss is
// reported to meta through `reporter`, which is not kept.
absl::StatusOr<std::string> ReadSegmentRange(SegdClient& segd, const proto::Segment& segment,
                                             uint64_t offset, uint64_t size, absl::Duration timeout,
                                             const BadReplicaReporter& reporter);

// The acked length of an open segment: the ack-quorum-th largest durable
// length among its replicas (DESIGN §4). Unreachable replicas count as 0.
uint64_t AckedLengthOfOpenSegment(SegdClient& segd, const proto::Segment& segment,
                                  uint32_t ack_quorum, absl::Duration timeout);

}  // namespace logfs::client
