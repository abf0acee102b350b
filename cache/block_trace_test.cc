// Block-cache traces: what a tracer sees, the file round trip and its
// errors, and the replays that compare policies (cache/block_trace.h).
#include "cache/block_trace.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "src/status/posix_error.h"

namespace logfs::cache {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/logfs-trace-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::system(("rm -rf " + path_).c_str()); }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

class RecordingTracer : public BlockCacheTracer {
 public:
  void OnLookup(const BlockKey& key) override { keys.push_back(key); }
  std::vector<BlockKey> keys;
};

// Goal: Lookup is what a tracer sees, hit or miss; Contains is no lookup
// (not traced, not counted, not promoted). Method: a one-block SLRU cache:
// a Contains of the cached block must not promote it (so the next insert
// still evicts it), and the counters and the tracer see Lookups only.
TEST(BlockTraceTest, TracerSeesLookupsAndContainsIsNoLookup) {
  RecordingTracer tracer;
  BlockCacheOptions options;
  options.capacity_bytes = 2 * ChunkPool::kChunkBytes;
  options.block_bytes = ChunkPool::kChunkBytes;
  options.shards = 1;
  options.tracer = &tracer;
  BlockCache cache(options);
  const std::string bytes(ChunkPool::kChunkBytes, 'x');
  EXPECT_EQ(nullptr, cache.Lookup({1, 0}));
  cache.Insert({1, 0}, bytes);
  EXPECT_TRUE(cache.Contains({1, 0}));
  EXPECT_FALSE(cache.Contains({1, 1}));
  EXPECT_NE(nullptr, cache.Lookup({1, 0}));
  ASSERT_EQ(2u, tracer.keys.size());
  EXPECT_TRUE(tracer.keys[0] == (BlockKey{1, 0}));
  EXPECT_TRUE(tracer.keys[1] == (BlockKey{1, 0}));
  EXPECT_EQ(1u, cache.stats().hits);
  EXPECT_EQ(1u, cache.stats().misses);
}

// Goal: a trace file holds every recorded lookup in order, up to its
// limit, and a file that is not a whole trace is refused with EINVAL.
// Method: write 10,000 records through a 5,000-record writer (crossing
// its 64 KiB buffer), read back; then a truncated copy and a foreign file.
TEST(BlockTraceTest, FileRoundTripLimitAndBadFiles) {
  TempDir dir;
  const std::string path = dir.File("trace");
  {
    auto writer = BlockTraceWriter::Create(path, 65536, 5000);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (uint64_t i = 0; i < 10000; ++i) (*writer)->OnLookup({i / 7 + (1ull << 40), i});
    EXPECT_EQ(5000u, (*writer)->recorded());
    EXPECT_EQ(5000u, (*writer)->dropped());
  }
  auto trace = ReadBlockTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(65536u, trace->block_bytes);
  ASSERT_EQ(5000u, trace->keys.size());
  for (uint64_t i = 0; i < 5000; ++i) {
    ASSERT_TRUE(trace->keys[i] == (BlockKey{i / 7 + (1ull << 40), i})) << i;
  }
  ASSERT_EQ(0, truncate(path.c_str(), 16 + 16 * 10 + 3));
  EXPECT_EQ(EINVAL, AttachedErrno(ReadBlockTrace(path).status()));
  std::ofstream(dir.File("other")) << "not a trace at all";
  EXPECT_EQ(EINVAL, AttachedErrno(ReadBlockTrace(dir.File("other")).status()));
  EXPECT_EQ(ENOENT, AttachedErrno(ReadBlockTrace(dir.File("missing")).status()));
  EXPECT_EQ(ENOENT,
            AttachedErrno(BlockTraceWriter::Create(dir.File("no/dir"), 65536, 1).status()));
}

// Goal: the replays rank the policies as theory says on a scan mixed with
// a hot set that fits the cache: segmented LRU keeps the hot set (scans
// only churn probation) and beats LRU, which the scans flush; OPT bounds
// both. Method: the synthetic trace at a cache of 1.4 times the hot set
// (so the hot set fits SLRU's protected 80%, while under LRU a hot block
// is evicted when the scans between two of its reads pass 700 blocks).
TEST(BlockTraceTest, ReplaysRankSegmentedLruAboveLruOnScans) {
  const std::vector<BlockKey> trace = ScanWithHotSetTrace(200000, 500, 5000, 0.5, 7);
  ASSERT_EQ(200000u, trace.size());
  const ReplayResult lru = ReplayBlockTrace(trace, EvictionPolicy::kLru, 700, 1);
  const ReplayResult slru = ReplayBlockTrace(trace, EvictionPolicy::kSegmentedLru, 700, 1);
  const ReplayResult opt = ReplayBeladyOpt(trace, 700);
  EXPECT_EQ(200000u, lru.lookups);
  // Half the lookups are scans, never hits: every policy is at most 0.5.
  EXPECT_GT(slru.hit_ratio(), lru.hit_ratio() + 0.1) << lru.hit_ratio() << " " << slru.hit_ratio();
  EXPECT_GE(opt.hits, slru.hits);
  EXPECT_LE(opt.hit_ratio(), 0.5);
  // With room for everything, every policy hits all but the first lookups.
  const std::vector<BlockKey> small = ScanWithHotSetTrace(10000, 50, 0, 0, 3);
  EXPECT_EQ(9950u, ReplayBlockTrace(small, EvictionPolicy::kLru, 64, 1).hits);
  EXPECT_EQ(9950u, ReplayBeladyOpt(small, 64).hits);
}

}  // namespace
}  // namespace logfs::cache
