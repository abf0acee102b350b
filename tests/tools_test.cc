// Real clients on a real mount: RocksDB's db_bench and ldb (package
// rocksdb-tools), and coreutils.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(ToolsTest, RocksDbBenchAndScanAfterRemount) {
  // Goal: RocksDB runs on logfs with its WAL in a WAL-kind directory and
  // its SSTs, MANIFEST and LOCK in block files; after unmount and remount
  // every key is there. (a) fillseq with a synced WAL, readrandom;
  // (b) remount; (c) ldb scan counts the keys.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_EQ(0, mkdir((*mc)->Path("wal").c_str(), 0755));
  ASSERT_EQ(0, setxattr((*mc)->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
  std::string db = (*mc)->Path("db");
  auto bench = RunCommand(absl::StrCat("db_bench --db=", db, " --wal_dir=", (*mc)->Path("wal"),
                                       " --benchmarks=fillseq,readrandom --num=20000 --sync=1"
                                       " --compression_type=none"));
  ASSERT_EQ(0, bench.exit_code) << bench.output;
  EXPECT_NE(std::string::npos, bench.output.find("(20000 of 20000 found)")) << bench.output;
  ASSERT_TRUE((*mc)->Remount().ok());
  auto scan = RunCommand(absl::StrCat("ldb --db=", db, " --try_load_options --hex scan"));
  ASSERT_EQ(0, scan.exit_code) << scan.output;
  std::vector<std::string> lines = absl::StrSplit(scan.output, '\n', absl::SkipEmpty());
  EXPECT_EQ(20000u, lines.size()) << scan.output.substr(0, 2000);
}

TEST(ToolsTest, CoreutilsCopyMoveRemoveAndInspect) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  std::string src = (*mc)->root() + "/big.src";
  ASSERT_EQ(0, RunCommand("head -c 104857600 /dev/urandom > " + src).exit_code);
  std::string big = (*mc)->Path("big");
  auto cp = RunCommand("cp " + src + " " + big);
  ASSERT_EQ(0, cp.exit_code) << cp.output;
  // Read it back through a fresh mount, not the page cache.
  ASSERT_TRUE((*mc)->Remount().ok());
  auto cmp = RunCommand("cmp " + src + " " + big);
  EXPECT_EQ(0, cmp.exit_code) << cmp.output;

  auto stat = RunCommand("stat -c '%s %F' " + big);
  EXPECT_EQ("104857600 regular file\n", stat.output);
  auto ls = RunCommand("ls -l " + (*mc)->mountpoint());
  EXPECT_EQ(0, ls.exit_code);
  EXPECT_NE(std::string::npos, ls.output.find("104857600")) << ls.output;
  auto du = RunCommand("du -k " + big);
  EXPECT_EQ(0, du.exit_code);
  EXPECT_EQ(102400, std::atoi(du.output.c_str())) << du.output;
  auto df = RunCommand("df -k " + (*mc)->mountpoint());
  EXPECT_EQ(0, df.exit_code) << df.output;
  EXPECT_NE(std::string::npos, df.output.find("logfs")) << df.output;

  ASSERT_EQ(0, RunCommand("mkdir " + (*mc)->Path("d")).exit_code);
  auto mv = RunCommand("mv " + big + " " + (*mc)->Path("d/moved"));
  ASSERT_EQ(0, mv.exit_code) << mv.output;
  EXPECT_EQ(0, RunCommand("cmp " + src + " " + (*mc)->Path("d/moved")).exit_code);
  auto rm = RunCommand("rm -r " + (*mc)->Path("d"));
  EXPECT_EQ(0, rm.exit_code) << rm.output;
  EXPECT_EQ("", RunCommand("ls -A " + (*mc)->mountpoint()).output);
  auto echo = RunCommand("echo hello > " + (*mc)->Path("e") + " && cat " + (*mc)->Path("e"));
  EXPECT_EQ("hello\n", echo.output);
  auto append = RunCommand("echo again >> " + (*mc)->Path("e"));
  EXPECT_NE(0, append.exit_code) << "a sealed block file must reject appends";
}

}  // namespace
}  // namespace logfs::testing
