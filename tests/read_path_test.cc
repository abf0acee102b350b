// The mount's read path through a real mount (DESIGN §5).
// Block cache: sealed bytes come back right from cached blocks at any
// offset and size, the counters in user.logfs.stats show hits and misses,
// the cache stays within --block_cache_bytes, and
// user.logfs.drop_block_cache empties it (root only).
// Short-circuit reads: sealed segments are read from the local replica
// files, open ones over TCP, and --short_circuit=false reads all over TCP.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cache/block_trace.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr uint64_t kBlock = 64 << 10;

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
  auto before = MountStats(path);
  // Pieces of 100000 bytes straddle block boundaries and end mid-block.
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 100000));
  auto after = MountStats(path);
  EXPECT_GE(after["block_cache_misses"] - before["block_cache_misses"], 21u);
  EXPECT_GE(after["block_cache_inserts"] - before["block_cache_inserts"], 21u);
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
  EXPECT_EQ(4u, MountStats(path)["block_cache_blocks"]);
  DropKernelCaches();
  auto before = MountStats(path);
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 4096 * 3 + 1));
  auto after = MountStats(path);
  EXPECT_GT(after["block_cache_hits"], before["block_cache_hits"]);
  EXPECT_EQ(after["block_cache_misses"], before["block_cache_misses"]);

  // Dropping the cache empties it; the next read misses and still returns
  // the right bytes.
  ASSERT_EQ(0, setxattr(path.c_str(), "user.logfs.drop_block_cache", "1", 1, 0));
  EXPECT_EQ(0u, MountStats(path)["block_cache_blocks"]);
  DropKernelCaches();
  before = MountStats(path);
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 65536));
  after = MountStats(path);
  EXPECT_GE(after["block_cache_misses"] - before["block_cache_misses"], 4u);
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

// Regression test: a read a FUSE worker cannot finish without a segment
// server is first tried from the caches only, then handed to a waiting
// thread that reads again (DESIGN §2). Before the fix the first try had
// already looked the blocks up, so every block-cache miss of a remote
// read was counted (and traced, and an early hit promoted) twice. Method:
// a mount without short-circuit reads (every miss is remote) and with a
// block-cache trace reads a sealed 4-block file once with O_DIRECT, one
// block per read (so no kernel readahead adds or splits requests):
// exactly 4 lookups, all misses, 4 inserts, and the trace holds blocks
// 0-3 once each.
TEST(MountBlockCacheTest, ARemoteReadCountsEachBlockMissOnce) {
  MountedClusterOptions options;
  char dir[] = "/tmp/logfs-trace-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  const std::string trace_path = std::string(dir) + "/lookups.trace";
  options.mount_flags = {"--short_circuit=false", "--block_cache_trace=" + trace_path};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("remote.dat");
  const std::string data = Pattern(3 * kBlock + 7, 8);
  ASSERT_TRUE(WriteFile(path, data).ok());
  auto before = MountStats(path);
  int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
  ASSERT_GE(fd, 0) << strerror(errno);
  void* buf = nullptr;
  ASSERT_EQ(0, posix_memalign(&buf, 4096, kBlock));
  std::string back;
  for (uint64_t at = 0; at < data.size(); at += kBlock) {
    ssize_t n = pread(fd, buf, kBlock, static_cast<off_t>(at));
    ASSERT_GT(n, 0) << "at " << at << ": " << strerror(errno);
    back.append(static_cast<const char*>(buf), static_cast<size_t>(n));
  }
  free(buf);
  close(fd);
  EXPECT_EQ(data, back);
  auto after = MountStats(path);
  EXPECT_EQ(4u, after["block_cache_misses"] - before["block_cache_misses"]);
  EXPECT_EQ(0u, after["block_cache_hits"] - before["block_cache_hits"]);
  EXPECT_EQ(4u, after["block_cache_inserts"] - before["block_cache_inserts"]);
  // The trace is written out when the mount exits.
  ASSERT_TRUE((*mc)->UnmountAll().ok());
  auto trace = cache::ReadBlockTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(kBlock, trace->block_bytes);
  std::vector<uint64_t> indexes;
  for (const cache::BlockKey& key : trace->keys) indexes.push_back(key.index);
  EXPECT_EQ((std::vector<uint64_t>{0, 1, 2, 3}), indexes);
  std::system((std::string("rm -rf ") + dir).c_str());
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
  EXPECT_EQ(0u, MountStats(path).count("block_cache_hits"));
}

TEST(ShortCircuitReadTest, SealedSegmentsAreReadLocallyOpenOnesOverTcp) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string sealed_path = (*mc)->Path("sealed.dat");
  const std::string sealed = Pattern(5 * kBlock + 3, 6);
  ASSERT_TRUE(WriteFile(sealed_path, sealed).ok());
  DropKernelCaches();
  auto before = MountStats(sealed_path);
  EXPECT_EQ(sealed, ReadInPieces(sealed_path, sealed.size(), 50000));
  auto after = MountStats(sealed_path);
  // Every block once (neighbouring misses may share one read).
  EXPECT_GE(after["short_circuit_reads"] - before["short_circuit_reads"], 1u);
  EXPECT_GE(after["short_circuit_bytes"] - before["short_circuit_bytes"], sealed.size());
  EXPECT_EQ(before["remote_reads"], after["remote_reads"]);
  EXPECT_EQ(1u, after["replica_cache_opens"] - before["replica_cache_opens"]);
  // Read through one mapping of the replica (the block-cache fills copy
  // from it).
  EXPECT_EQ(1u, after["replica_cache_mmaps"] - before["replica_cache_mmaps"]);
  EXPECT_EQ(0u, after["short_circuit_failures"]);

  // A WAL file still being written: its open segment grows, so it is read
  // over TCP, and the bytes are the acked ones.
  MakeWalDir(**mc);
  const std::string wal_path = (*mc)->Path("wal/open.log");
  int fd = open(wal_path.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  const std::string record = Pattern(10000, 7);
  ASSERT_EQ(static_cast<ssize_t>(record.size()), write(fd, record.data(), record.size()));
  ASSERT_EQ(0, fdatasync(fd));
  before = MountStats(wal_path);
  EXPECT_EQ(record, ReadInPieces(wal_path, record.size(), 4096));
  after = MountStats(wal_path);
  EXPECT_GT(after["remote_reads"], before["remote_reads"]);
  EXPECT_EQ(before["short_circuit_reads"], after["short_circuit_reads"]);
  close(fd);
}

TEST(ShortCircuitReadTest, TurnedOffEverythingGoesOverTcp) {
  MountedClusterOptions options;
  options.mount_flags = {"--short_circuit=false"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("tcp.dat");
  const std::string data = Pattern(3 * kBlock, 8);
  ASSERT_TRUE(WriteFile(path, data).ok());
  DropKernelCaches();
  EXPECT_EQ(data, ReadInPieces(path, data.size(), 65536));
  auto stats = MountStats(path);
  EXPECT_GE(stats["remote_reads"], 1u);
  EXPECT_EQ(0u, stats["short_circuit_reads"]);
}

TEST(ShortCircuitReadTest, ServersWithAnotherHostIdAreReadOverTcp) {
  // Goal (issue 13 item 1): a mount reads replicas from their files only
  // from servers with its own host id, not because they share a kernel
  // or an address: with --host_id set apart (as network namespaces that
  // stand in for hosts will), every read goes over TCP; with the same id
  // set on both, reads are local again.
  for (const bool same : {false, true}) {
    MountedClusterOptions options;
    options.segd_flags = {"--host_id=host-a"};
    options.mount_flags = {same ? "--host_id=host-a" : "--host_id=host-b"};
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    const std::string path = (*mc)->Path("hosts.dat");
    const std::string data = Pattern(3 * kBlock, 9);
    ASSERT_TRUE(WriteFile(path, data).ok());
    DropKernelCaches();
    EXPECT_EQ(data, ReadInPieces(path, data.size(), 65536));
    auto stats = MountStats(path);
    if (same) {
      EXPECT_GE(stats["short_circuit_reads"], 1u) << "same host id";
    } else {
      EXPECT_GE(stats["remote_reads"], 1u);
      EXPECT_EQ(0u, stats["short_circuit_reads"]) << "another host id";
    }
  }
}

TEST(MountBlockCacheTest, BadBlockSizeIsRefused) {
  auto run = RunCommand(LogfsBinary() + " mount --block_cache_block_bytes=1000 /nonexistent");
  EXPECT_NE(0, run.exit_code);
  EXPECT_NE(std::string::npos, run.output.find("block_cache_block_bytes")) << run.output;
}

}  // namespace
}  // namespace logfs::testing
