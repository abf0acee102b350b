// `logfs bench wal` and `logfs bench read` run on a real mount and on a
// local directory (bench wal also through the client library, --meta) and
// print well-formed reports (their speed is measured by bench/compare.sh,
// never here).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "cache/block_trace.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

void ExpectWellFormedReport(const std::string& output) {
  EXPECT_TRUE(std::regex_search(
      output, std::regex("append\\+sync latency \\(ns\\): count=200 min=[0-9]+ mean=[0-9]+ "
                         "stddev=[0-9]+ p50=[0-9]+ p75=[0-9]+ p95=[0-9]+ p98=[0-9]+ "
                         "p99=[0-9]+ p99.9=[0-9]+ max=[0-9]+")))
      << output;
  EXPECT_TRUE(std::regex_search(output, std::regex("syncs/s=[0-9]+"))) << output;
  EXPECT_TRUE(std::regex_search(output, std::regex("time between syncs \\(ns\\): count=[0-9]+")))
      << output;
  EXPECT_TRUE(std::regex_search(
      output, std::regex("cpu: logfs processes used [0-9.]+ s; per 1000 synced appends [0-9.]+ s")))
      << output;
}

// The counters only a logfs target has: the client's group commit and the
// segment servers' appends per fdatasync.
void ExpectLogfsCounters(const std::string& output) {
  EXPECT_TRUE(std::regex_search(
      output, std::regex("client: appends=200 fsyncs=200 sync_groups=[1-9][0-9]* sync_rounds=0 "
                         "appends per sync group=[0-9.]+ fsyncs per sync group=[0-9.]+")))
      << output;
  // 3 replicas of every append reach the segment servers.
  EXPECT_TRUE(std::regex_search(
      output, std::regex("segd: appends=600 fdatasyncs=[1-9][0-9]* sync_rounds=[0-9]+ "
                         "journal_wraps=[0-9]+ appends per fdatasync=[0-9.]+")))
      << output;
}

void ExpectWellFormedReadReport(const std::string& output, const std::string& phase) {
  EXPECT_TRUE(std::regex_search(
      output, std::regex(phase + " read latency \\(ns\\): count=40 min=[0-9]+ mean=[0-9]+ "
                                 "stddev=[0-9]+ p50=[0-9]+ p75=[0-9]+ p95=[0-9]+ p98=[0-9]+ "
                                 "p99=[0-9]+ p99.9=[0-9]+ max=[0-9]+")))
      << output;
  EXPECT_TRUE(std::regex_search(
      output, std::regex(phase + ": ops=40 seconds=[0-9.]+ ops/s=[0-9]+ bytes/s=[0-9]+ "
                                 "block cache hit ratio=(n/a|[0-9.]+)")))
      << output;
}

TEST(BenchTest, WalBenchOnMountAndLocalDirectory) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_EQ(0, mkdir((*mc)->Path("wal").c_str(), 0755));
  ASSERT_EQ(0, setxattr((*mc)->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
  auto on_mount = RunCommand(LogfsBinary() + " bench wal --threads=2 --records=100 --dir=" +
                             (*mc)->Path("wal"));
  ASSERT_EQ(0, on_mount.exit_code) << on_mount.output;
  ExpectWellFormedReport(on_mount.output);
  ExpectLogfsCounters(on_mount.output);
  auto local = RunCommand(LogfsBinary() + " bench wal --threads=2 --records=100 --dir=" +
                          (*mc)->root());
  ASSERT_EQ(0, local.exit_code) << local.output;
  ExpectWellFormedReport(local.output);
  EXPECT_NE(std::string::npos, local.output.find("client: n/a")) << local.output;
  EXPECT_NE(std::string::npos, local.output.find("segd: n/a")) << local.output;
}

// An embedded mount (`logfs mount --data_dir=D MNT`, no --meta) in a temp
// dir, unmounted (its cluster stopped) by the destructor.
class EmbeddedMount {
 public:
  EmbeddedMount() {
    char tmpl[] = "/tmp/logfs-bench-embedded-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return;
    root_ = tmpl;
    if (mkdir(mountpoint().c_str(), 0755) != 0) return;
    mount_ = RunCommand(LogfsBinary() + " mount --data_dir=" + root_ + "/data " + mountpoint());
  }
  ~EmbeddedMount() {
    if (root_.empty()) return;
    if (RunCommand(LogfsBinary() + " umount " + mountpoint()).exit_code != 0) {
      RunCommand("fusermount3 -uz " + mountpoint());
    }
    RunCommand("rm -rf " + root_);
  }
  const CommandResult& mount() const { return mount_; }
  std::string mountpoint() const { return root_ + "/mnt"; }

 private:
  std::string root_;
  CommandResult mount_;
};

TEST(BenchTest, WalBenchOnAnEmbeddedMountFindsItsClusterSecret) {
  // Goal: `logfs bench wal --dir` on an embedded mount reads the segment
  // servers' counters without being given the embedded cluster's secret:
  // the mount names its secret file (user.logfs.cluster_secret_file).
  // Before, the servers refused the unauthenticated bench: "segd: n/a".
  EmbeddedMount embedded;
  ASSERT_EQ(0, embedded.mount().exit_code) << embedded.mount().output;
  const std::string wal = embedded.mountpoint() + "/wal";
  ASSERT_EQ(0, mkdir(wal.c_str(), 0755));
  ASSERT_EQ(0, setxattr(wal.c_str(), "user.logfs.kind", "wal", 3, 0));
  auto run = RunCommand(LogfsBinary() + " bench wal --threads=2 --records=100 --dir=" + wal);
  ASSERT_EQ(0, run.exit_code) << run.output;
  ExpectWellFormedReport(run.output);
  ExpectLogfsCounters(run.output);
}

TEST(BenchTest, WalBenchThroughTheClientLibrary) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  char meta[256];
  ssize_t n = getxattr((*mc)->mountpoint().c_str(), "user.logfs.meta_address", meta, sizeof(meta));
  ASSERT_GT(n, 0);
  auto library = RunCommand(LogfsBinary() + " bench wal --threads=2 --files=2 --records=100 "
                                            "--meta=" + std::string(meta, n));
  ASSERT_EQ(0, library.exit_code) << library.output;
  ExpectWellFormedReport(library.output);
  ExpectLogfsCounters(library.output);
  // It cleans up after itself: the root holds only what the test made.
  auto ls = RunCommand("ls -A " + (*mc)->mountpoint());
  EXPECT_EQ("", ls.output);
  EXPECT_EQ(1, RunCommand(LogfsBinary() + " bench wal --records=1 --meta=127.0.0.1:1").exit_code);
}

TEST(BenchTest, ReadBenchOnMountAndLocalDirectoryInEveryPhase) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  for (const std::string& dir : {(*mc)->mountpoint(), (*mc)->root()}) {
    auto run = RunCommand(LogfsBinary() + " bench read --threads=2 --ops=20 --files=2 "
                                          "--file_bytes=1048576 --read_bytes=4096 --cache=all "
                                          "--dir=" + dir);
    ASSERT_EQ(0, run.exit_code) << dir << ": " << run.output;
    ExpectWellFormedReadReport(run.output, "cold");
    ExpectWellFormedReadReport(run.output, "warm");
    ExpectWellFormedReadReport(run.output, "block");
    // Only the mount has a block cache. Its cold phase starts empty (4 KiB
    // reads then share 64 KiB blocks); after warming, every read that
    // reaches it hits.
    const bool mount = dir == (*mc)->mountpoint();
    EXPECT_EQ(mount, std::regex_search(run.output, std::regex("cold: .*ratio=0\\.[0-9]+")))
        << run.output;
    EXPECT_EQ(mount, std::regex_search(run.output, std::regex("\nblock: .*ratio=1\\.000")))
        << run.output;
    auto scan = RunCommand(LogfsBinary() + " bench read --ops=40 --cache=warm --file_bytes=1048576 "
                                           "--read_bytes=4096 --scan_bytes=65536 --dir=" + dir);
    ASSERT_EQ(0, scan.exit_code) << dir << ": " << scan.output;
    ExpectWellFormedReadReport(scan.output, "warm");
    EXPECT_EQ(std::string::npos, scan.output.find("cold")) << scan.output;
  }
  auto bad = RunCommand(LogfsBinary() + " bench read --read_bytes=5 --dir=/tmp");
  EXPECT_EQ(1, bad.exit_code);
  EXPECT_NE(std::string::npos, bad.output.find("--read_bytes must be a positive multiple of 8"))
      << bad.output;
}

// Goal: `bench cache-replay` replays a trace file and the synthetic
// trace and prints each policy's hit ratio; bad input is refused clearly.
// Method: a trace of 8 blocks read 10 times in a cycle fits a 16 MiB cache
// of 64 KiB blocks (16 per shard: room even if all 8 share a shard), so
// every policy hits all but the first 8 lookups.
TEST(BenchTest, CacheReplayPrintsHitRatiosAndRefusesBadInput) {
  char dir[] = "/tmp/logfs-replay-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(dir));
  const std::string trace = std::string(dir) + "/cycle.trace";
  {
    auto writer = cache::BlockTraceWriter::Create(trace, 64 << 10, 1000);
    ASSERT_TRUE(writer.ok()) << writer.status();
    for (int round = 0; round < 10; ++round) {
      for (uint64_t b = 0; b < 8; ++b) (*writer)->OnLookup({5, b});
    }
  }
  auto run = RunCommand(LogfsBinary() + " bench cache-replay --capacity_mib=16 --trace=" + trace);
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_NE(std::string::npos,
            run.output.find("| cycle.trace | 80 | 8 | 16 | 0.900 | 0.900 | 0.900 |"))
      << run.output;
  auto bad_size = RunCommand(LogfsBinary() + " bench cache-replay --capacity_mib=1x 2>&1");
  EXPECT_EQ(1, bad_size.exit_code);
  EXPECT_NE(std::string::npos, bad_size.output.find("'1x' is not a positive number of MiB"))
      << bad_size.output;
  auto missing = RunCommand(LogfsBinary() + " bench cache-replay --trace=" + std::string(dir) +
                            "/none 2>&1");
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_NE(std::string::npos, missing.output.find("No such file")) << missing.output;
  const std::string other = std::string(dir) + "/other";
  ASSERT_TRUE(WriteFile(other, "not a trace at all").ok());
  auto not_trace = RunCommand(LogfsBinary() + " bench cache-replay --trace=" + other + " 2>&1");
  EXPECT_EQ(1, not_trace.exit_code);
  EXPECT_NE(std::string::npos, not_trace.output.find("is not a block-cache trace"))
      << not_trace.output;
  std::system((std::string("rm -rf ") + dir).c_str());
}

}  // namespace
}  // namespace logfs::testing
