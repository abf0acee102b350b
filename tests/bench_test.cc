// `logfs bench wal` runs on a real mount and on a local directory and
// prints a well-formed report (its speed is measured elsewhere, never here).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <regex>
#include <string>

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
  auto local = RunCommand(LogfsBinary() + " bench wal --threads=2 --records=100 --dir=" +
                          (*mc)->root());
  ASSERT_EQ(0, local.exit_code) << local.output;
  ExpectWellFormedReport(local.output);
}

}  // namespace
}  // namespace logfs::testing
