#include "wal/replica_lag.h"

#include <glog/logging.h>

#include <algorithm>

namespace logfs::wal {

ReplicaLagMonitor::ReplicaLagMonitor(size_t replicas, ReplicaLagOptions options)
    : options_(options), replicas_(replicas) {
  CHECK_GE(options_.slow_samples, 1);
}

void ReplicaLagMonitor::OnDurable(size_t i, uint64_t durable, absl::Time now) {
  Replica& r = replicas_.at(i);
  r.durable = std::max(r.durable, durable);
  if (!r.pending.has_value() || r.durable < *r.pending) return;
  r.pending.reset();
  Sample(i, now);
  // Still behind the quorum: the next sample starts from its last ack, if
  // that came later than the one just sampled (else from the next ack:
  // acks of one moment that one stall held up are one sample).
  if (r.durable < acked_ && acked_at_ > r.pending_since) {
    r.pending = acked_;
    r.pending_since = acked_at_;
  }
}

void ReplicaLagMonitor::OnQuorumAcked(uint64_t acked, absl::Time now, const ReplicaSet& replicas) {
  if (acked <= acked_) return;
  acked_ = acked;
  acked_at_ = now;
  for (size_t i = 0; i < replicas_.size() && i < replicas.size(); ++i) {
    Replica& r = replicas_[i];
    if (replicas[i].failed || r.pending.has_value()) continue;
    r.durable = std::max(r.durable, replicas[i].durable_length);
    if (r.durable < acked) {
      r.pending = acked;
      r.pending_since = now;
    }
  }
}

void ReplicaLagMonitor::Sample(size_t i, absl::Time now) {
  Replica& r = replicas_[i];
  r.last_lag = now - r.pending_since;
  r.worst_lag = std::max(r.worst_lag, r.last_lag);
  if (options_.slow_lag <= absl::ZeroDuration() || r.last_lag <= options_.slow_lag) return;
  // Bounded: a count past this is slow enough, and so are the others'.
  const size_t cap = 8 * static_cast<size_t>(options_.slow_samples);
  r.slow_at.push_back(now);
  if (r.slow_at.size() > cap) r.slow_at.pop_front();
  if (slow_.has_value()) return;
  const absl::Time since = now - options_.window;
  const size_t mine = SlowSince(i, since);
  if (mine < static_cast<size_t>(options_.slow_samples)) return;
  size_t others = 0;
  for (size_t j = 0; j < replicas_.size(); ++j) {
    if (j != i) others = std::max(others, SlowSince(j, since));
  }
  if (mine >= 2 * others) slow_ = i;
}

size_t ReplicaLagMonitor::SlowSince(size_t i, absl::Time since) {
  std::deque<absl::Time>& at = replicas_[i].slow_at;
  while (!at.empty() && at.front() < since) at.pop_front();
  return at.size();
}

}  // namespace logfs::wal
