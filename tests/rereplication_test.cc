// Re-replication through real processes (DESIGN §4 "Re-replication", §7):
// after a segment server is killed, meta marks it dead within
// --dead_server_ms and copies every sealed segment it held from a good
// replica to another server, so `logfs fsck` goes from non-zero back to 0
// and every byte still reads back; `logfs status` shows the dead server.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr absl::Duration kRepairDeadline = absl::Seconds(30);
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);


MountedClusterOptions FourServers() {
  MountedClusterOptions options;
  options.segment_servers = 4;
  options.meta_flags = {"--dead_server_ms=1000"};
  // Five heartbeats per dead_server_ms, so a live server on a busy machine
  // is never taken for dead.
  options.segd_flags = {"--heartbeat_interval_ms=200"};
  options.mount_flags = {"--block_segment_bytes=262144", "--replica_timeout_ms=3000"};
  return options;
}

CommandResult Admin(MountedCluster& mc, const std::string& subcommand) {
  return RunCommand(absl::StrCat(LogfsBinary(), " ", subcommand, " --meta=",
                                 mc.cluster().meta_address(), " --rpc_timeout_ms=2000"));
}

TEST(RereplicationTest, FsckReportsFullReplicationAgainAfterASegdDies) {
  // Goal: kill -9 of a segment server holding replicas is repaired by meta
  // alone. Method: (a) write block files of several segments each over 4
  // servers (RF 3), fsck is clean; (b) kill one server; (c) poll fsck until
  // it exits 0, having seen it fail first; (d) read every byte back through
  // a fresh mount.
  auto mc = MountedCluster::Start(FourServers());
  ASSERT_TRUE(mc.ok()) << mc.status();
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(Pattern(600000 + i * 1000, 20 + i));
    ASSERT_TRUE(WriteFile((*mc)->Path("f" + std::to_string(i)), contents.back()).ok());
  }
  CommandResult clean = Admin(**mc, "fsck");
  ASSERT_EQ(0, clean.exit_code) << clean.output;
  // (b) 4 files x 3 segments x 3 replicas over 4 servers: server 0 holds some.
  (*mc)->cluster().KillSegd(0, SIGKILL);
  // (c)
  bool saw_failure = false;
  CommandResult last;
  const absl::Time deadline = absl::Now() + kRepairDeadline;
  while (absl::Now() < deadline) {
    last = Admin(**mc, "fsck");
    if (last.exit_code == 0) break;
    ASSERT_EQ(1, last.exit_code) << last.output;
    if (!saw_failure) {
      EXPECT_NE(std::string::npos, last.output.find("UNDER-REPLICATED")) << last.output;
    }
    saw_failure = true;
    absl::SleepFor(kPollInterval);
  }
  EXPECT_TRUE(saw_failure) << "fsck never noticed the dead server";
  ASSERT_EQ(0, last.exit_code) << "not repaired in " << kRepairDeadline << ":\n" << last.output;
  EXPECT_NE(std::string::npos, last.output.find("0 problems")) << last.output;
  // (d) Bypass the kernel's page cache: read through a fresh mount.
  ASSERT_TRUE((*mc)->Remount().ok());
  for (int i = 0; i < 4; ++i) {
    auto back = ReadFile((*mc)->Path("f" + std::to_string(i)));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(contents[i], *back) << "file " << i;
  }
}

TEST(RereplicationTest, StatusListsServersWithTheDeadOne) {
  // Goal: `logfs status` shows every server and which is dead.
  auto mc = MountedCluster::Start(FourServers());
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_TRUE(WriteFile((*mc)->Path("f"), Pattern(1000, 1)).ok());
  CommandResult before = Admin(**mc, "status");
  ASSERT_EQ(0, before.exit_code) << before.output;
  EXPECT_NE(std::string::npos, before.output.find("servers: 4 (4 live, 0 dead)")) << before.output;
  EXPECT_NE(std::string::npos, before.output.find("files: 1,")) << before.output;
  (*mc)->cluster().KillSegd(2, SIGKILL);
  CommandResult after;
  const absl::Time deadline = absl::Now() + kRepairDeadline;
  while (absl::Now() < deadline) {
    after = Admin(**mc, "status");
    ASSERT_EQ(0, after.exit_code) << after.output;
    if (after.output.find("1 dead") != std::string::npos) break;
    absl::SleepFor(kPollInterval);
  }
  EXPECT_NE(std::string::npos, after.output.find("servers: 4 (3 live, 1 dead)")) << after.output;
  const std::string dead_line = (*mc)->cluster().segd_address(2);
  size_t at = after.output.find(dead_line);
  ASSERT_NE(std::string::npos, at) << after.output;
  EXPECT_NE(std::string::npos, after.output.find("dead", at)) << after.output;
}

}  // namespace
}  // namespace logfs::testing
