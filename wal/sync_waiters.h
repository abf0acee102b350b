// The Syncs of a writer waiting for the acked length to reach their
// target (the file length when each was called). Waiters are callbacks,
// ordered by target; the writer takes those the acked length has passed,
// or all of them when it fails, and runs them once it has dropped its
// lock. Each waiter remembers when it started, for the fsync deadline.
//
// A value type: not thread-safe; FileWriter keeps it under its mu_.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace logfs::wal {

class SyncWaiters {
 public:
  using Callback = std::function<void(absl::Status)>;

  // Waits for the file's first `target` bytes, since `since`.
  void Add(uint64_t target, absl::Time since, Callback done);

  bool empty() const { return waiters_.empty(); }
  size_t size() const { return waiters_.size(); }

  // Removes the waiters whose target is at most `acked`; returns their
  // callbacks in target order (equal targets in the order added).
  std::vector<Callback> TakeReady(uint64_t acked);
  // Removes every waiter and appends its callback to `*out` (to fail them
  // all, or to release them all after truncate(0)).
  void TakeAll(std::vector<Callback>* out);
  // When the longest-waiting waiter started; nullopt when none waits.
  std::optional<absl::Time> OldestSince() const;

 private:
  struct Waiter {
    Callback done;
    absl::Time since;
  };
  std::multimap<uint64_t, Waiter> waiters_;  // by target
};

}  // namespace logfs::wal
