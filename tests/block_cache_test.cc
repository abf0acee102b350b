// The mount's block cache through a real mount (DESIGN §5 "Block cache"):
// sealed bytes come back right from cached blocks at any offset and size,
// the counters in user.logfs.stats show hits and misses, the cache stays
// within --block_cache_bytes, and user.logfs.drop_block_cache empties it
// (root only).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <map>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr uint64_t kBlock = 64 << 10;

std::map<std::string, uint64_t> Stats(const std::string& path) {
  char buf[4096];
  ssize_t n = getxattr(path.c_str(), "user.logfs.stats", buf, sizeof(buf));
  std::map<std::string, uint64_t> out;
  if (n < 0) return out;
  for (absl::string_view field :
       absl::StrSplit(absl::string_view(buf, n), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, '=');
    uint64_t v = 0;
    if (absl::SimpleAtoi(kv.second, &v)) out[kv.first] = v;
  }
  return out;
}

void DropKernelCaches() {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(1, write(fd, "3", 1));
  close(fd);
}

// Reads all of `path` in `piece`-byte preads starting at odd offsets.
std::string ReadInPieces(const std::string& path, size_t size, size_t piece) {
  int fd = open(path.c_str(), O_RDONLY);
  EXPECT_GE(fd, 0);
  std::string out(size, '\0');
  size_t at = 0;
  while (at < size) {
    ssize_t n = pread(fd, out.data() + at, std::min(piece, size - at), at);
    EXPECT_GT(n, 0) << "at " << at;
    if (n <= 0) break;
    at += n;
  }
  close(fd);
  out.resize(at);
  return out;
}

TEST(MountBlockCacheTest, ReadsRightBytesWithinCapacity) {
  MountedClusterOptions options;
  // One block per shard (16 shards); the file below is 21 blocks, so some
  // shard must evict.
  options.mount_flags = {"--block_cache_bytes=" + std::to_string(16 * kBlock)};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("blocks.dat");
  const std::string data = Pattern(20 * kBlock + 12345, 3);
  ASSERT_TRUE(WriteFile(path, data).ok());  // closed, so sealed
  DropKernelCaches();
  auto before = Stats(path);
  // Pieces of 100000 bytes straddle block boundaries and end mid-block.
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 100000));
  auto after = Stats(path);
  EXPECT_GE(after["block_cache_misses"] - before["block_cache_misses"], 21u);
  EXPECT_EQ(21u, after["block_cache_inserts"] - before["block_cache_inserts"]);
  EXPECT_LE(after["block_cache_bytes"], 16 * kBlock);
  EXPECT_GT(after["block_cache_evictions"], 0u);
}

TEST(MountBlockCacheTest, ServesReadsAfterKernelCachesDropAndDropsOnRequest) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  // A file read twice, the kernel's cache dropped in between: the second
  // read is served by the block cache alone.
  const std::string path = (*mc)->Path("small.dat");
  const std::string data = Pattern(3 * kBlock + 7, 4);
  ASSERT_TRUE(WriteFile(path, data).ok());
  DropKernelCaches();
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 4096));
  EXPECT_EQ(4u, Stats(path)["block_cache_blocks"]);
  DropKernelCaches();
  auto before = Stats(path);
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 4096 * 3 + 1));
  auto after = Stats(path);
  EXPECT_GT(after["block_cache_hits"], before["block_cache_hits"]);
  EXPECT_EQ(after["block_cache_misses"], before["block_cache_misses"]);

  // Dropping the cache empties it; the next read misses and still returns
  // the right bytes.
  ASSERT_EQ(0, setxattr(path.c_str(), "user.logfs.drop_block_cache", "1", 1, 0));
  EXPECT_EQ(0u, Stats(path)["block_cache_blocks"]);
  DropKernelCaches();
  before = Stats(path);
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 65536));
  after = Stats(path);
  EXPECT_EQ(4u, after["block_cache_misses"] - before["block_cache_misses"]);
}

TEST(MountBlockCacheTest, OnlyRootDropsTheCache) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("open-to-all");
  ASSERT_TRUE(WriteFile(path, "x").ok());
  ASSERT_EQ(0, chmod(path.c_str(), 0666));
  // Opened here: the unprivileged child could not walk the 0700 temp dir.
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    int rc = fsetxattr(fd, "user.logfs.drop_block_cache", "1", 1, 0);
    _exit(rc == 0 ? 1 : errno == EPERM ? 0 : 10 + errno);
  }
  int status = 0;
  ASSERT_EQ(child, waitpid(child, &status, 0));
  close(fd);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(0, WEXITSTATUS(status)) << "an unprivileged drop must fail with EPERM";
}

TEST(MountBlockCacheTest, DisabledCacheStillReads) {
  MountedClusterOptions options;
  options.mount_flags = {"--block_cache_bytes=0"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("plain.dat");
  const std::string data = Pattern(2 * kBlock + 5, 5);
  ASSERT_TRUE(WriteFile(path, data).ok());
  DropKernelCaches();
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 10000));
  EXPECT_EQ(0u, Stats(path).count("block_cache_hits"));
}

TEST(MountBlockCacheTest, BadBlockSizeIsRefused) {
  auto run = RunCommand(LogfsBinary() + " mount --block_cache_block_bytes=1000 /nonexistent");
  EXPECT_NE(0, run.exit_code);
  EXPECT_NE(std::string::npos, run.output.find("block_cache_block_bytes")) << run.output;
}

}  // namespace
}  // namespace logfs::testing
