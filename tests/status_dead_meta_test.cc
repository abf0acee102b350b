// `logfs status --meta=LIST` with a dead meta replica in the list answers
// from the live ones, at once, and marks the dead one unreachable (issue 30
// item 6): a tool's call moves past a replica that does not answer, and
// the replicas are asked for their state all at once.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/cluster/etcd_cluster.h"
#include "tests/meta_ha_cluster.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(StatusDeadMetaTest, StatusAnswersFromTheLiveReplicasWithEachOneKilled) {
  // Goal: with each meta replica in turn killed (kill -9), the first of
  // the list among them, `logfs status` with the whole list exits 0 within
  // a few seconds, lists the three segment servers, and shows the killed
  // replica unreachable and one of the others active.
  // Method: three replicas on a 3-member etcd; for i = 0, 1, 2: kill
  // replica i, wait for an active among the others, time `logfs status`,
  // restart replica i. Then the same with replica 0 stopped (SIGSTOP).
  char tmpl[] = "/tmp/logfs-status-etcd-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl));
  const std::string etcd_dir = tmpl;
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } remove_etcd_dir{etcd_dir};
  cluster::EtcdClusterOptions etcd_options;
  etcd_options.dir = etcd_dir;
  auto etcd = cluster::EtcdCluster::Start(etcd_options);
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  MountedClusterOptions options;
  options.etcd_endpoints = (*etcd)->endpoints();
  options.meta_replicas = 3;
  options.meta_flags = {"--meta_lease_ttl_ms=2000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  cluster::LocalCluster& c = (*mc)->cluster();
  const std::string list = c.meta_address();
  for (int dead = 0; dead < 3; ++dead) {
    SCOPED_TRACE(absl::StrCat("replica ", dead, " (", c.meta_address(dead), ") killed"));
    c.KillMeta(dead, SIGKILL);
    ASSERT_TRUE(WaitForActiveMeta(c, absl::Seconds(20), dead).ok());
    const absl::Time start = absl::Now();
    CommandResult status = RunCommand(absl::StrCat(LogfsBinary(), " status --meta=", list));
    const absl::Duration took = absl::Now() - start;
    EXPECT_EQ(0, status.exit_code) << status.output;
    EXPECT_LT(took, absl::Seconds(5)) << status.output;
    EXPECT_NE(std::string::npos,
              status.output.find(absl::StrCat("meta ", c.meta_address(dead), ": unreachable")))
        << status.output;
    EXPECT_NE(std::string::npos, status.output.find(": active,")) << status.output;
    EXPECT_NE(std::string::npos, status.output.find("servers: 3 (3 live")) << status.output;
    ASSERT_TRUE(c.RestartMeta(dead).ok());
  }
  // A stopped replica first in the list (its connections open, answering
  // nothing) costs one --rpc_timeout_ms, not one per call.
  SCOPED_TRACE("replica 0 stopped");
  ASSERT_TRUE(StopProcess(c.meta_pid(0)));
  ASSERT_TRUE(WaitForActiveMeta(c, absl::Seconds(20), 0).ok());
  const absl::Time start = absl::Now();
  CommandResult status =
      RunCommand(absl::StrCat(LogfsBinary(), " status --rpc_timeout_ms=2000 --meta=", list));
  const absl::Duration took = absl::Now() - start;
  kill(c.meta_pid(0), SIGCONT);
  EXPECT_EQ(0, status.exit_code) << status.output;
  EXPECT_LT(took, absl::Seconds(4)) << status.output;
  EXPECT_NE(std::string::npos,
            status.output.find(absl::StrCat("meta ", c.meta_address(0), ": unreachable")))
      << status.output;
  EXPECT_NE(std::string::npos, status.output.find("servers: 3 (3 live")) << status.output;
}

}  // namespace
}  // namespace logfs::testing
