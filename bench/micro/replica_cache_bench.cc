// The short-circuit replica cache (cache/replica_cache.h) from 1, 2, 4 and
// 8 threads against the same cache trimmed by scanning: the shape of a
// cache whose eviction map is its hash map, so that finding the oldest
// evictable replica means visiting every entry (as trimming did before
// HDFS kept its eviction maps ordered by time).
//  - Hit: every lookup finds one of 1024 cached replicas; a release puts it
//    back in the eviction map and trims, which finds nothing to do.
//  - Churn: lookups spread over 4096 replicas with 1024 kept evictable, so
//    about 3 in 4 miss, insert, and their release evicts the oldest.
// Replicas here have no descriptors and are never mapped: the benchmark
// measures the cache's bookkeeping, not open(2) or mmap(2).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/replica_cache.h"

namespace logfs {
namespace {

constexpr size_t kMaxEvictable = 1024;

// The baseline: one map, refs and the time each entry became evictable,
// and a trim that scans the map for the oldest evictable entry.
class ScanTrimCache {
 public:
  using Key = cache::ReplicaCache::Key;

  // A referenced entry, or null on a miss.
  void* Lookup(const Key& key) {
    absl::MutexLock lock(&mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    if (it->second->refs++ == 0) --evictable_;
    return it->second.get();
  }
  void* Insert(const Key& key) {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = map_.try_emplace(key, nullptr);
    if (inserted) it->second = std::make_unique<Entry>();
    if (it->second->refs++ == 0 && !inserted) --evictable_;
    return it->second.get();
  }
  void Release(void* handle) {
    auto* e = static_cast<Entry*>(handle);
    absl::MutexLock lock(&mu_);
    if (--e->refs > 0) return;
    e->evictable_since = std::chrono::steady_clock::now();
    ++evictable_;
    while (evictable_ > kMaxEvictable) {
      auto oldest = map_.end();
      for (auto it = map_.begin(); it != map_.end(); ++it) {
        if (it->second->refs == 0 &&
            (oldest == map_.end() || it->second->evictable_since < oldest->second->evictable_since)) {
          oldest = it;
        }
      }
      map_.erase(oldest);
      --evictable_;
    }
  }

 private:
  struct Entry {
    format::ReplicaFds files;
    int refs = 0;
    std::chrono::steady_clock::time_point evictable_since;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<Key, std::unique_ptr<Entry>> map_ ABSL_GUARDED_BY(mu_);
  size_t evictable_ ABSL_GUARDED_BY(mu_) = 0;
};

std::unique_ptr<cache::ReplicaCache> shared_cache;
std::unique_ptr<ScanTrimCache> shared_scan_cache;

uint64_t NextRandom(uint64_t& x) {  // xorshift64
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return x;
}


void ReplicaCacheOps(benchmark::State& state, uint64_t keys) {
  if (state.thread_index() == 0) {
    cache::ReplicaCacheOptions options;
    options.max_evictable = kMaxEvictable;
    options.mmap = false;
    shared_cache = std::make_unique<cache::ReplicaCache>(options);
    for (uint64_t k = 0; k < std::min<uint64_t>(keys, kMaxEvictable); ++k) {
      shared_cache->Insert({k, 1}, format::ReplicaFds());  // released at once: evictable
    }
  }
  uint64_t x = 0x9e3779b97f4a7c15ull * (state.thread_index() + 1);
  for (auto _ : state) {
    const cache::ReplicaCache::Key key{NextRandom(x) % keys, 1};
    cache::ReplicaCache::Ref ref = shared_cache->Lookup(key);
    if (!ref) ref = shared_cache->Insert(key, format::ReplicaFds());
    benchmark::DoNotOptimize(ref.files().length);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (state.thread_index() == 0) {
    if (shared_cache->stats().evictable > kMaxEvictable) state.SkipWithError("over the limit");
    shared_cache.reset();
  }
}

void ScanTrimOps(benchmark::State& state, uint64_t keys) {
  if (state.thread_index() == 0) {
    shared_scan_cache = std::make_unique<ScanTrimCache>();
    for (uint64_t k = 0; k < std::min<uint64_t>(keys, kMaxEvictable); ++k) {
      shared_scan_cache->Release(shared_scan_cache->Insert({k, 1}));
    }
  }
  uint64_t x = 0x9e3779b97f4a7c15ull * (state.thread_index() + 1);
  for (auto _ : state) {
    const ScanTrimCache::Key key{NextRandom(x) % keys, 1};
    void* entry = shared_scan_cache->Lookup(key);
    if (entry == nullptr) entry = shared_scan_cache->Insert(key);
    benchmark::DoNotOptimize(entry);
    shared_scan_cache->Release(entry);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (state.thread_index() == 0) shared_scan_cache.reset();
}

void BM_ReplicaCacheHit(benchmark::State& state) { ReplicaCacheOps(state, kMaxEvictable); }
BENCHMARK(BM_ReplicaCacheHit)->ThreadRange(1, 8)->UseRealTime();
void BM_ScanTrimCacheHit(benchmark::State& state) { ScanTrimOps(state, kMaxEvictable); }
BENCHMARK(BM_ScanTrimCacheHit)->ThreadRange(1, 8)->UseRealTime();
void BM_ReplicaCacheChurn(benchmark::State& state) { ReplicaCacheOps(state, 4 * kMaxEvictable); }
BENCHMARK(BM_ReplicaCacheChurn)->ThreadRange(1, 8)->UseRealTime();
void BM_ScanTrimCacheChurn(benchmark::State& state) { ScanTrimOps(state, 4 * kMaxEvictable); }
BENCHMARK(BM_ScanTrimCacheChurn)->ThreadRange(1, 8)->UseRealTime();

}  // namespace
}  // namespace logfs
