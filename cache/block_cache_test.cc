#include "cache/block_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/file_read.h"

namespace logfs::cache {
namespace {

constexpr uint32_t kBlock = 64 << 10;

// Block `index` of segment `segment`: bytes that name both.
std::string BlockBytes(uint64_t segment, uint64_t index, size_t size = kBlock) {
  std::string out(size, '\0');
  uint32_t x = static_cast<uint32_t>(segment * 1000003 + index * 7919 + 1);
  for (char& c : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return out;
}

std::string Gather(const Block& block, size_t offset, size_t length) {
  std::vector<iovec> iov;
  block.AppendIov(offset, length, &iov);
  std::string out;
  for (const iovec& v : iov) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
  return out;
}

BlockCacheOptions Options(uint64_t capacity_blocks, EvictionPolicy policy) {
  BlockCacheOptions o;
  o.capacity_bytes = capacity_blocks * kBlock;
  o.block_bytes = kBlock;
  o.shards = 1;  // exact capacity, for the policy tests
  o.policy = policy;
  return o;
}

TEST(BlockCacheTest, ServesInsertedBytesAcrossChunks) {
  BlockCache cache(Options(8, EvictionPolicy::kSegmentedLru));
  const std::string data = BlockBytes(7, 3);
  cache.Insert({7, 3}, data);
  BlockHandle block = cache.Lookup({7, 3});
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(data.size(), block->size());
  // A range that starts and ends inside chunks, touching four of them.
  std::vector<iovec> iov;
  block->AppendIov(10000, 40000, &iov);
  EXPECT_EQ(4u, iov.size());
  EXPECT_EQ(data.substr(10000, 40000), Gather(*block, 10000, 40000));
  EXPECT_EQ(data, Gather(*block, 0, data.size()));
  EXPECT_EQ(nullptr, cache.Lookup({7, 4}));
  EXPECT_EQ(nullptr, cache.Lookup({8, 3}));
  BlockCacheStats stats = cache.stats();
  EXPECT_EQ(1u, stats.hits);
  EXPECT_EQ(2u, stats.misses);
  EXPECT_EQ(1u, stats.blocks);
  EXPECT_EQ(uint64_t{kBlock}, stats.bytes);
}

TEST(BlockCacheTest, ShortLastBlockIsChargedByChunks) {
  BlockCache cache(Options(8, EvictionPolicy::kSegmentedLru));
  const std::string data = BlockBytes(1, 9, 20000);  // two chunks, the second partly used
  BlockHandle block = cache.Insert({1, 9}, data);
  EXPECT_EQ(20000u, block->size());
  EXPECT_EQ(2 * ChunkPool::kChunkBytes, block->charge());
  EXPECT_EQ(data, Gather(*cache.Lookup({1, 9}), 0, 20000));
}

TEST(BlockCacheTest, SecondInsertOfAKeyKeepsTheFirst) {
  BlockCache cache(Options(8, EvictionPolicy::kSegmentedLru));
  BlockHandle first = cache.Insert({1, 0}, BlockBytes(1, 0));
  BlockHandle second = cache.Insert({1, 0}, BlockBytes(1, 0));
  EXPECT_EQ(first, second);
  EXPECT_EQ(1u, cache.stats().inserts);
}

TEST(BlockCacheTest, ReplaceTakesTheLongerBlockOfAGrownSegmentOnly) {
  // Goal: a segment's last block cached short, before the segment was
  // continued and sealed longer, gives way to the longer one; a block at
  // least as long stays. Charges follow, and old handles stay valid.
  BlockCache cache(Options(8, EvictionPolicy::kSegmentedLru));
  const std::string full = BlockBytes(3, 0, 20000);  // two chunks
  BlockHandle short_block = cache.Insert({3, 0}, absl::string_view(full).substr(0, 1000));
  const uint64_t short_bytes = cache.stats().bytes;
  BlockHandle longer = cache.Replace({3, 0}, full);
  EXPECT_EQ(20000u, longer->size());
  EXPECT_EQ(full, Gather(*longer, 0, 20000));
  EXPECT_EQ(1000u, short_block->size()) << "a pinned block is never changed";
  EXPECT_EQ(1u, cache.stats().blocks);
  EXPECT_GT(cache.stats().bytes, short_bytes);
  BlockHandle again = cache.Replace({3, 0}, absl::string_view(full).substr(0, 2000));
  EXPECT_EQ(20000u, again->size()) << "a shorter view keeps the longer block";
  BlockHandle looked_up = cache.Lookup({3, 0});
  ASSERT_NE(nullptr, looked_up);
  EXPECT_EQ(20000u, looked_up->size());
}

TEST(BlockCacheTest, EvictsToCapacityAndPinnedBlocksOutliveEviction) {
  BlockCache cache(Options(4, EvictionPolicy::kSegmentedLru));
  BlockHandle pinned = cache.Insert({1, 0}, BlockBytes(1, 0));
  for (uint64_t i = 1; i < 20; ++i) cache.Insert({1, i}, BlockBytes(1, i));
  BlockCacheStats stats = cache.stats();
  EXPECT_EQ(4u, stats.blocks);
  EXPECT_EQ(4u * kBlock, stats.bytes);
  EXPECT_EQ(16u, stats.evictions);
  EXPECT_EQ(nullptr, cache.Lookup({1, 0}));
  // Evicted, but the handle still holds its bytes.
  EXPECT_EQ(BlockBytes(1, 0), Gather(*pinned, 0, kBlock));
  cache.Clear();
  EXPECT_EQ(0u, cache.stats().blocks);
  EXPECT_EQ(nullptr, cache.Lookup({1, 19}));
  // Freed chunks are reused: 20 blocks through a 4-block cache need at most
  // 4 cached + 1 pinned + 1 being inserted blocks of memory.
  EXPECT_LE(cache.stats().reserved_bytes, 6u * kBlock + ChunkPool::kSlabBytes);
}

TEST(BlockCacheTest, TooSmallCacheServesWithoutCaching) {
  BlockCacheOptions o = Options(0, EvictionPolicy::kSegmentedLru);
  o.capacity_bytes = kBlock / 2;
  BlockCache cache(o);
  BlockHandle block = cache.Insert({1, 0}, BlockBytes(1, 0));
  EXPECT_EQ(BlockBytes(1, 0), Gather(*block, 0, kBlock));
  EXPECT_EQ(nullptr, cache.Lookup({1, 0}));
}

// Replays `trace` (block indexes of one segment) and returns the hit ratio.
double HitRatio(EvictionPolicy policy, uint64_t capacity_blocks,
                const std::vector<uint64_t>& trace) {
  BlockCacheOptions o = Options(capacity_blocks, policy);
  BlockCache cache(o);
  const std::string data(ChunkPool::kChunkBytes, 'x');  // one chunk each: the charge counts
  for (uint64_t index : trace) {
    if (cache.Lookup({1, index}) == nullptr) cache.Insert({1, index}, data);
  }
  BlockCacheStats s = cache.stats();
  return static_cast<double>(s.hits) / static_cast<double>(s.hits + s.misses);
}

// The scan resistance the policy exists for, measured against LRU: a hot
// set that fits the cache, read at random, interrupted by long scans of
// blocks read once (a compaction, a backup). LRU lets every scan flush the
// hot set; SLRU keeps it in the protected segment.
TEST(BlockCacheTest, SegmentedLruResistsScansBetterThanLru) {
  // Capacity is counted in chunks here: every block is one 16 KiB chunk.
  const uint64_t capacity_chunks = 1000;
  const uint64_t capacity = capacity_chunks * ChunkPool::kChunkBytes / kBlock;  // in 64 KiB units
  std::mt19937_64 rng(1);
  std::vector<uint64_t> trace;
  uint64_t next_scan_block = 1'000'000;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 5000; ++i) trace.push_back(rng() % 600);  // hot set: 600 chunks
    for (int i = 0; i < 2000; ++i) trace.push_back(next_scan_block++);
  }
  const double lru = HitRatio(EvictionPolicy::kLru, capacity, trace);
  const double slru = HitRatio(EvictionPolicy::kSegmentedLru, capacity, trace);
  std::printf("scan-mixed trace: hit ratio LRU %.3f, SLRU %.3f\n", lru, slru);
  EXPECT_GT(slru, lru + 0.05);

  // Without scans (pure recency), SLRU gives up little against LRU.
  std::vector<uint64_t> zipfish;
  for (int i = 0; i < 100000; ++i) {
    uint64_t r = rng() % 4000;
    zipfish.push_back(r * r / 4000);  // skewed toward low indexes
  }
  const double lru2 = HitRatio(EvictionPolicy::kLru, capacity, zipfish);
  const double slru2 = HitRatio(EvictionPolicy::kSegmentedLru, capacity, zipfish);
  std::printf("skewed trace: hit ratio LRU %.3f, SLRU %.3f\n", lru2, slru2);
  EXPECT_GT(slru2, lru2 - 0.02);
}

TEST(BlockCacheTest, ConcurrentReadersAndInsertersSeeRightBytes) {
  BlockCacheOptions o;
  o.capacity_bytes = 64 * kBlock;
  o.block_bytes = kBlock;
  BlockCache cache(o);
  std::vector<std::vector<std::string>> expected(4);
  for (uint64_t s = 0; s < 4; ++s) {
    for (uint64_t i = 0; i < 50; ++i) expected[s].push_back(BlockBytes(s, i));
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 3000; ++i) {
        const BlockKey key{rng() % 4, rng() % 50};
        BlockHandle block = cache.Lookup(key);
        const std::string& bytes = expected[key.segment_id][key.index];
        if (block == nullptr) block = cache.Insert(key, bytes);
        const size_t at = rng() % (kBlock - 100);
        if (Gather(*block, at, 100) != bytes.substr(at, 100)) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(0, wrong.load());
  EXPECT_LE(cache.stats().bytes, o.capacity_bytes);
  EXPECT_EQ(24000u, cache.stats().hits + cache.stats().misses);
}

TEST(ReadBufferTest, KeepsOrderOfBlocksAndOwnedBytes) {
  BlockCache cache(Options(8, EvictionPolicy::kSegmentedLru));
  BlockHandle block = cache.Insert({2, 0}, BlockBytes(2, 0));
  ReadBuffer buffer;
  buffer.AppendOwned("head");
  buffer.AppendBlock(block, 16380, 10);  // crosses a chunk boundary: two iovecs
  for (int i = 0; i < 100; ++i) buffer.AppendOwned(std::string(1, 'a' + i % 26));  // short strings
  buffer.AppendOwned("");
  std::string expected = "head" + BlockBytes(2, 0).substr(16380, 10);
  for (int i = 0; i < 100; ++i) expected += static_cast<char>('a' + i % 26);
  EXPECT_EQ(expected, buffer.ToString());
  EXPECT_EQ(expected.size(), buffer.size());
  EXPECT_EQ(103u, buffer.iov().size());
}

}  // namespace
}  // namespace logfs::cache
