#include "wal/sync_waiters.h"

#include <algorithm>

namespace logfs::wal {

void SyncWaiters::Add(uint64_t target, absl::Time since, Callback done) {
  waiters_.emplace(target, Waiter{std::move(done), since});
}

std::vector<SyncWaiters::Callback> SyncWaiters::TakeReady(uint64_t acked) {
  std::vector<Callback> ready;
  auto end = waiters_.upper_bound(acked);
  for (auto it = waiters_.begin(); it != end; ++it) ready.push_back(std::move(it->second.done));
  waiters_.erase(waiters_.begin(), end);
  return ready;
}

void SyncWaiters::TakeAll(std::vector<Callback>* out) {
  for (auto& [target, waiter] : waiters_) out->push_back(std::move(waiter.done));
  waiters_.clear();
}

std::optional<absl::Time> SyncWaiters::OldestSince() const {
  if (waiters_.empty()) return std::nullopt;
  absl::Time oldest = absl::InfiniteFuture();
  for (const auto& [target, waiter] : waiters_) oldest = std::min(oldest, waiter.since);
  return oldest;
}

}  // namespace logfs::wal
