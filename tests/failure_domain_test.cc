// Failure domains seen by the tools: `logfs status` shows each server's
// domain, and `logfs fsck` lists a segment whose replicas share a domain
// they need not share (HDFS fsck's "mis-replicated") without failing.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(FailureDomainTest, FsckListsReplicasThatShareARackOnceThreeRacksAreLive) {
  // Goal (issue 13 item 3): a segment placed while every server was in one
  // rack is listed once the servers say they are in three racks, and fsck
  // still exits 0 (its data is whole). Method: 4 servers in one domain
  // (the host); write and close a file (one sealed segment on 3 of them);
  // restart its first two replicas' servers in rack r1, its third in r2
  // and the fourth server in r3; fsck must name r1, status each domain.
  MountedClusterOptions options;
  options.segment_servers = 4;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  const std::string path = c.Path("f");
  ASSERT_TRUE(WriteFile(path, Pattern(4096, 7)).ok());
  std::vector<SegmentLine> segments = Segments(path);
  ASSERT_EQ(1u, segments.size()) << Xattr(path, "user.logfs.segments");
  ASSERT_EQ(3u, segments[0].replicas.size());

  std::map<std::string, int> index;  // advertised address -> segd index
  for (int i = 0; i < 4; ++i) index[c.cluster().segd_address(i)] = i;
  std::vector<std::string> domain(4, "r3/h3");
  const char* const kReplicaDomains[] = {"r1/h0", "r1/h1", "r2/h2"};
  for (int r = 0; r < 3; ++r) {
    auto it = index.find(segments[0].replicas[r]);
    ASSERT_NE(it, index.end()) << segments[0].replicas[r];
    domain[it->second] = kReplicaDomains[r];
  }
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(c.cluster().RestartSegd(i, {"--failure_domain=" + domain[i]}).ok()) << i;
  }

  const std::string meta = c.cluster().meta_address();
  CommandResult status = RunCommand(LogfsBinary() + " status --meta=" + meta + " 2>&1");
  ASSERT_EQ(0, status.exit_code) << status.output;
  for (const std::string& d : domain) EXPECT_TRUE(absl::StrContains(status.output, d)) << d;

  CommandResult fsck = RunCommand(LogfsBinary() + " fsck --meta=" + meta + " 2>&1");
  EXPECT_EQ(0, fsck.exit_code) << fsck.output;
  EXPECT_TRUE(absl::StrContains(fsck.output, absl::StrCat("segment ", segments[0].id,
                                                          ": replicas share failure domain r1 "
                                                          "though 3 live domains at level 1")))
      << fsck.output;
  EXPECT_TRUE(absl::StrContains(fsck.output, "1 misplaced")) << fsck.output;
}

}  // namespace
}  // namespace logfs::testing
