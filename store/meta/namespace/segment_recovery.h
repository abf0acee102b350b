// Recovery of a segment whose writer is gone (a dead or fenced mount, or a
// forced `logfs recover`): fence its replicas at a higher epoch, take the
// recovered length from the answers, seal the replicas that have it, and
// copy the sealed segment to those that are behind. As LogDevice's
// EpochRecovery, it runs with no namespace lock and reaches the segment
// servers only through SegmentServerApi, so a unit test drives it with
// fakes (namespace_segments_test.cc).
//
// The recovered length: a replica the writer already sealed fixes it;
// else the longest durable prefix among the answers. Every acked byte is
// on ack_quorum replicas, so any R - AQ + 1 answers include one that has
// it; a corrupt replica (a chunk failed its CRC) neither decides the
// length nor counts toward those answers, since it can neither give nor
// prove the acked bytes it may hold.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "store/format/logfs.pb.h"
#include "store/meta/namespace/segd_api.h"

namespace logfs::meta {

struct RecoveryPlan {
  uint64_t segment_id = 0;
  uint64_t epoch = 0;  // the segment's epoch: the writer's
  uint32_t ack_quorum = 0;
  std::vector<proto::Replica> replicas;  // with addresses
};

struct RecoveryResult {
  uint64_t length = 0;                   // bytes, the recovered length
  std::vector<uint64_t> kept_server_ids;  // sealed at `length`, or copied to it
  uint64_t epoch = 0;  // the fence epoch the replicas were sealed at
};

// Recovers `plan`'s segment. Blocks on the segment servers' calls (fence
// and seal one replica at a time, copies in parallel). kUnavailable when
// fewer than R - AQ + 1 replicas answer without corruption, or when none
// could be sealed; a copy that fails is only logged (re-replication
// retries it). Thread-safe if `servers` is.
absl::StatusOr<RecoveryResult> RecoverSegment(SegmentServerApi& servers, const RecoveryPlan& plan);

}  // namespace logfs::meta
