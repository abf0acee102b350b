// The replicas of a writer's open segment and what each has made durable.
// The segment's acked length is the ack-quorum-th largest durable length
// among the live replicas (DESIGN §4): that many replicas hold every byte
// before it. A replica that fails stays in the set, marked failed, so that
// its index keeps naming it in the answers still in flight; it counts for
// nothing from then on.
//
// A value type: not thread-safe; FileWriter keeps it under its mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "store/format/logfs.pb.h"

namespace logfs::wal {

class ReplicaSet {
 public:
  struct Replica {
    uint64_t server_id = 0;
    std::string address;          // host:port of its segment server
    uint64_t durable_length = 0;  // segment-relative; never decreases
    bool failed = false;
  };

  // No segment: no replicas.
  ReplicaSet() = default;
  // The replicas of `segment`, nothing durable yet. `ack_quorum` >= 1.
  ReplicaSet(const proto::Segment& segment, uint32_t ack_quorum);

  size_t size() const { return replicas_.size(); }
  bool empty() const { return replicas_.empty(); }
  const Replica& operator[](size_t i) const { return replicas_[i]; }
  uint32_t ack_quorum() const { return ack_quorum_; }

  // Records that replica `i` has `durable_length` bytes durable; a smaller
  // value than it had (an answer overtaken by a later one) is ignored.
  // No effect on a failed replica.
  void SetDurable(size_t i, uint64_t durable_length);
  // Marks replica `i` failed; true if it was live.
  bool MarkFailed(size_t i);

  size_t live_count() const;
  // The ack-quorum-th largest durable length of the live replicas; nullopt
  // while fewer than ack_quorum replicas are live.
  std::optional<uint64_t> AckedLength() const;
  // The smallest durable length of the live replicas (what every live one
  // has), or `cap` if smaller; `cap` when none is live.
  uint64_t DurableOnAllLive(uint64_t cap) const;
  // Indexes of the live replicas, in order.
  std::vector<size_t> LiveIndexes() const;
  // Server ids of the failed replicas, in order (meta drops them at a seal).
  std::vector<uint64_t> FailedServerIds() const;
  // Server ids of the replicas whose index is not in `kept` (sorted or not).
  std::vector<uint64_t> ServerIdsNotIn(const std::vector<size_t>& kept) const;

 private:
  std::vector<Replica> replicas_;
  uint32_t ack_quorum_ = 1;
};

}  // namespace logfs::wal
