// The writer's sync waiters (wal/sync_waiters.h), under the writer's lock
// on every fsync: `range(0)` syncs wait at rising targets (a group of
// concurrent fsyncs) and one acked-length advance releases them all, as a
// group commit does.
#include <benchmark/benchmark.h>

#include <cstdint>

#include "absl/time/clock.h"
#include "wal/sync_waiters.h"

namespace logfs {
namespace {

void BM_SyncWaitersGroup(benchmark::State& state) {
  const int group = static_cast<int>(state.range(0));
  wal::SyncWaiters waiters;
  const absl::Time now = absl::Now();
  uint64_t target = 0;
  int released = 0;
  for (auto _ : state) {
    for (int i = 0; i < group; ++i) {
      target += 512;
      waiters.Add(target, now, [&released](absl::Status) { ++released; });
    }
    for (auto& done : waiters.TakeReady(target)) done(absl::OkStatus());
  }
  state.SetItemsProcessed(static_cast<int64_t>(released));
}
BENCHMARK(BM_SyncWaitersGroup)->Arg(1)->Arg(16)->Arg(128);

}  // namespace
}  // namespace logfs
