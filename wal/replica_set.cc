#include "wal/replica_set.h"

#include <glog/logging.h>

#include <algorithm>

namespace logfs::wal {

ReplicaSet::ReplicaSet(const proto::Segment& segment, uint32_t ack_quorum)
    : ack_quorum_(ack_quorum) {
  CHECK_GE(ack_quorum, 1u);
  replicas_.reserve(static_cast<size_t>(segment.replicas_size()));
  for (const auto& r : segment.replicas())
    replicas_.push_back({r.server_id(), r.address(), 0, false});
}

void ReplicaSet::SetDurable(size_t i, uint64_t durable_length) {
  Replica& r = replicas_.at(i);
  if (r.failed) return;
  r.durable_length = std::max(r.durable_length, durable_length);
}

bool ReplicaSet::MarkFailed(size_t i) {
  Replica& r = replicas_.at(i);
  if (r.failed) return false;
  r.failed = true;
  return true;
}

size_t ReplicaSet::live_count() const {
  return static_cast<size_t>(std::count_if(replicas_.begin(), replicas_.end(),
                                           [](const Replica& r) { return !r.failed; }));
}

std::optional<uint64_t> ReplicaSet::AckedLength() const {
  // Called on every replica answer, so it allocates nothing: with a
  // handful of replicas, counting beats sorting a copy. The answer is the
  // largest durable length that at least ack_quorum live replicas reach.
  std::optional<uint64_t> acked;
  for (const Replica& candidate : replicas_) {
    if (candidate.failed) continue;
    if (acked.has_value() && candidate.durable_length <= *acked) continue;
    uint32_t reach = 0;
    for (const Replica& r : replicas_) {
      if (!r.failed && r.durable_length >= candidate.durable_length) ++reach;
    }
    if (reach >= ack_quorum_) acked = candidate.durable_length;
  }
  return acked;
}

uint64_t ReplicaSet::DurableOnAllLive(uint64_t cap) const {
  uint64_t everywhere = cap;
  for (const Replica& r : replicas_) {
    if (!r.failed) everywhere = std::min(everywhere, r.durable_length);
  }
  return everywhere;
}

std::vector<size_t> ReplicaSet::LiveIndexes() const {
  std::vector<size_t> live;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (!replicas_[i].failed) live.push_back(i);
  }
  return live;
}

std::vector<uint64_t> ReplicaSet::FailedServerIds() const {
  std::vector<uint64_t> failed;
  for (const Replica& r : replicas_) {
    if (r.failed) failed.push_back(r.server_id);
  }
  return failed;
}

std::vector<uint64_t> ReplicaSet::ServerIdsNotIn(const std::vector<size_t>& kept) const {
  std::vector<uint64_t> out;
  for (size_t i = 0; i < replicas_.size(); ++i) {
    if (std::find(kept.begin(), kept.end(), i) == kept.end()) out.push_back(replicas_[i].server_id);
  }
  return out;
}

}  // namespace logfs::wal
