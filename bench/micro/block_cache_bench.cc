// Block-cache hits (cache/block_cache.h) from 1, 2, 4 and 8 threads: the
// mount's cache (16 shards, segmented LRU) against one mutex-guarded LRU
// (the same class with 1 shard and plain LRU), every lookup a hit on a
// random one of 1024 cached blocks. On 2 cores the 4- and 8-thread rows
// measure contention more than parallel speed.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <string>

#include "cache/block_cache.h"

namespace logfs {
namespace {

constexpr int kBlocks = 1024;
constexpr uint32_t kBlockBytes = 16u << 10;

std::unique_ptr<cache::BlockCache> shared_cache;

void Lookups(benchmark::State& state, int shards, cache::EvictionPolicy policy) {
  if (state.thread_index() == 0) {
    cache::BlockCacheOptions options;
    options.capacity_bytes = uint64_t{2} * kBlocks * kBlockBytes;  // all fit
    options.block_bytes = kBlockBytes;
    options.shards = shards;
    options.policy = policy;
    shared_cache = std::make_unique<cache::BlockCache>(options);
    const std::string data(kBlockBytes, 'b');
    for (int i = 0; i < kBlocks; ++i) shared_cache->Insert({7, static_cast<uint64_t>(i)}, data);
  }
  uint64_t x = 0x9e3779b97f4a7c15ull * (state.thread_index() + 1);  // xorshift64
  for (auto _ : state) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    cache::BlockHandle block = shared_cache->Lookup({7, x % kBlocks});
    benchmark::DoNotOptimize(block.get());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
  if (state.thread_index() == 0) {
    if (shared_cache->stats().misses != 0) state.SkipWithError("a lookup missed");
    shared_cache.reset();
  }
}

void BM_BlockCacheLookup(benchmark::State& state) {
  Lookups(state, 16, cache::EvictionPolicy::kSegmentedLru);
}
BENCHMARK(BM_BlockCacheLookup)->ThreadRange(1, 8)->UseRealTime();

void BM_MutexLruLookup(benchmark::State& state) { Lookups(state, 1, cache::EvictionPolicy::kLru); }
BENCHMARK(BM_MutexLruLookup)->ThreadRange(1, 8)->UseRealTime();

}  // namespace
}  // namespace logfs
