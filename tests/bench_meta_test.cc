// `logfs bench meta` runs every phase on a local directory, on a real
// mount (workers as threads, as processes, in one shared directory) and
// through the client library, checks what it did, removes its run
// directory, and fails clearly. Its speed is measured by bench/compare.sh
// (row M), never here.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// Every phase's machine-readable line, with `ops` ops (readdir:
// `readdir_ops`) and a well-formed rate and latencies.
void ExpectEveryPhase(const std::string& output, int ops, int readdir_ops) {
  for (const std::string phase : {"create", "stat", "readdir", "rename", "unlink"}) {
    const int want = phase == "readdir" ? readdir_ops : ops;
    EXPECT_TRUE(std::regex_search(
        output, std::regex("\nphase=" + phase + " ops=" + std::to_string(want) +
                           " seconds=[0-9]+\\.[0-9]{6} ops_per_s=[0-9]+ p50_ns=[1-9][0-9]* "
                           "p99_ns=[1-9][0-9]*\n")))
        << phase << ":\n" << output;
    EXPECT_TRUE(std::regex_search(
        output, std::regex("\n\\| " + phase + " \\| " + std::to_string(want) + " \\| ")))
        << phase << ":\n" << output;
  }
}

// The names in `dir` that a bench meta run would have left.
std::vector<std::string> RunDirsIn(const std::string& dir) {
  std::vector<std::string> left;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return {"cannot list " + dir};
  while (const dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("bench-meta-", 0) == 0) left.push_back(e->d_name);
  }
  closedir(d);
  return left;
}

TEST(BenchMetaTest, EveryPhaseOnALocalDirectoryAndAMount) {
  // Goal: on ext4 (the test's temp dir) and on a logfs mount, with 2
  // workers x 20 files as threads, as processes and sharing a directory,
  // every phase does 40 ops (readdir in a shared directory: each worker
  // lists all 40 names, 80) and nothing is left behind.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  for (const std::string& dir : {(*mc)->root(), (*mc)->mountpoint()}) {
    for (const std::string mode : {"", " --processes", " --shared_dir --processes"}) {
      auto run = RunCommand(LogfsBinary() + " bench meta --threads=2 --files=20" + mode +
                            " --dir=" + dir);
      ASSERT_EQ(0, run.exit_code) << dir << mode << ":\n" << run.output;
      ExpectEveryPhase(run.output, 40, mode.find("shared") != std::string::npos ? 80 : 40);
      EXPECT_NE(std::string::npos,
                run.output.find(mode.find("processes") != std::string::npos ? "processes=2"
                                                                             : "threads=2"))
          << run.output;
      EXPECT_EQ(std::vector<std::string>{}, RunDirsIn(dir)) << dir << mode;
    }
  }
}

TEST(BenchMetaTest, ThroughTheClientLibrary) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  char meta[256];
  const ssize_t n =
      getxattr((*mc)->mountpoint().c_str(), "user.logfs.meta_address", meta, sizeof(meta));
  ASSERT_GT(n, 0);
  const std::string address(meta, static_cast<size_t>(n));
  auto run = RunCommand(LogfsBinary() + " bench meta --threads=2 --files=20 --meta=" + address);
  ASSERT_EQ(0, run.exit_code) << run.output;
  ExpectEveryPhase(run.output, 40, 40);
  EXPECT_NE(std::string::npos, run.output.find("meta=" + address)) << run.output;
  EXPECT_EQ("", RunCommand("ls -A " + (*mc)->mountpoint()).output);
  // Forked workers cannot share the library's connections.
  auto processes =
      RunCommand(LogfsBinary() + " bench meta --processes --files=2 --meta=" + address);
  EXPECT_EQ(1, processes.exit_code);
  EXPECT_NE(std::string::npos, processes.output.find("--processes needs --dir"))
      << processes.output;
}

TEST(BenchMetaTest, FailureSaysWhatAndItsErrnoAndExitsNonZero) {
  auto missing = RunCommand(LogfsBinary() + " bench meta --files=2 --dir=/nonexistent-logfs-dir");
  EXPECT_EQ(1, missing.exit_code);
  EXPECT_TRUE(std::regex_search(
      missing.output,
      std::regex("logfs bench meta: mkdir /nonexistent-logfs-dir/bench-meta-[0-9]+-[0-9]+: No "
                 "such file or directory \\(errno 2, ENOENT\\)")))
      << missing.output;
  auto unreachable = RunCommand(LogfsBinary() + " bench meta --files=2 --meta=127.0.0.1:1");
  EXPECT_EQ(1, unreachable.exit_code) << unreachable.output;
  auto too_many = RunCommand(LogfsBinary() + " bench meta --threads=1000 --files=1001 --dir=/tmp");
  EXPECT_EQ(1, too_many.exit_code);
  EXPECT_NE(std::string::npos, too_many.output.find("--threads times --files at most 1000000"))
      << too_many.output;
}

}  // namespace
}  // namespace logfs::testing
