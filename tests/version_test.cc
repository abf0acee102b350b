// The version handshake (issue 34 item 1, store/format/wire_version.h):
// a mount or segment server whose wire versions meta does not share is
// refused at once with one line that says which side to upgrade, logged by
// both ends; one that shares a version is admitted. Ranges other than this
// build's are stated with --TEST_wire_versions
// (tests/mixed_version_fault_test.cc runs the real previous release
// against this one). Meta also refuses a peer newer than itself, even one
// that shares a version: servers are upgraded before their clients.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class VersionTest : public ::testing::Test {
 protected:
  void SetUp() override { Start({}); }
  void Start(const std::vector<std::string>& meta_flags) {
    cluster_.reset();
    MountedClusterOptions options;
    options.meta_flags = meta_flags;
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = std::move(*mc);
  }

  // `logfs mount` in the foreground on a new mount point, stating `wire`
  // (MIN:MAX); bounded by 30 s. A refused mount exits by itself.
  CommandResult MountStating(const std::string& wire, const std::string& name) {
    const std::string mountpoint = cluster_->root() + "/" + name;
    RunCommand("mkdir -p " + mountpoint);
    return RunCommand(absl::StrCat("timeout 30 ", LogfsBinary(), " mount -f --meta=",
                                   cluster_->cluster().meta_address(), " --TEST_wire_versions=",
                                   wire, " ", mountpoint, " 2>&1"));
  }

  std::string MetaLog() {
    auto log = ReadFile(cluster_->root() + "/data/meta/meta.log");
    return log.ok() ? *log : log.status().ToString();
  }

  std::unique_ptr<MountedCluster> cluster_;
};

TEST_F(VersionTest, AMountOfANewerUnsharedVersionIsRefusedWithOneLine) {
  CommandResult mount = MountStating("3:3", "newer");
  EXPECT_EQ(78, mount.exit_code) << "a version refusal, at once: " << mount.output;
  const std::string line = "speaks wire versions 3..3, this meta (logfs ";
  EXPECT_TRUE(absl::StrContains(mount.output, line)) << mount.output;
  EXPECT_TRUE(absl::StrContains(mount.output, ": upgrade this meta (docs/OPERATIONS.md"))
      << mount.output;
  EXPECT_TRUE(absl::StrContains(MetaLog(), "refused: logfs mount ")) << "meta logs it too";
}

TEST_F(VersionTest, ASegmentServerOfANewerUnsharedVersionIsRefused) {
  const std::string dir = cluster_->root() + "/old-segd";
  CommandResult segd = RunCommand(absl::StrCat(
      "timeout 30 ", LogfsBinary(), " segd --data_dir=", dir, " --listen=127.0.0.1:0 --meta=",
      cluster_->cluster().meta_address(), " --TEST_wire_versions=0:0 2>&1"));
  // 0:0 is a bad flag: the process says so and exits 1.
  EXPECT_EQ(1, segd.exit_code) << segd.output;
  EXPECT_TRUE(absl::StrContains(segd.output, "bad --TEST_wire_versions '0:0'")) << segd.output;

  segd = RunCommand(absl::StrCat("timeout 30 ", LogfsBinary(), " segd --data_dir=", dir,
                                 " --listen=127.0.0.1:0 --meta=", cluster_->cluster().meta_address(),
                                 " --TEST_wire_versions=5:6 2>&1"));
  EXPECT_EQ(78, segd.exit_code) << "a version refusal, not restarted by its unit: " << segd.output;
  EXPECT_TRUE(absl::StrContains(segd.output, "refused to register this server: logfs segd"))
      << segd.output;
  EXPECT_TRUE(absl::StrContains(segd.output, "speaks wire versions 5..6")) << segd.output;
  EXPECT_TRUE(absl::StrContains(MetaLog(), "refused: logfs segd ")) << "meta logs it too";
}

TEST_F(VersionTest, APeerThatSharesOneVersionIsAdmitted) {
  // A mount that speaks only version 1 (what 0.1 speaks) works with this
  // meta (1..2): `logfs mount` returns once it serves, and a file written
  // through it reads back.
  const std::string mountpoint = cluster_->root() + "/older";
  RunCommand("mkdir -p " + mountpoint);
  CommandResult mount = RunCommand(absl::StrCat("timeout 30 ", LogfsBinary(), " mount --meta=",
                                                cluster_->cluster().meta_address(),
                                                " --TEST_wire_versions=1:1 ", mountpoint, " 2>&1"));
  ASSERT_EQ(0, mount.exit_code) << mount.output;
  EXPECT_TRUE(WriteFile(mountpoint + "/f", "shared version 1").ok());
  auto data = ReadFile(cluster_->Path("f"));
  EXPECT_TRUE(data.ok()) << data.status();
  EXPECT_EQ("shared version 1", data.value_or(""));
  CommandResult umount = RunCommand(absl::StrCat(LogfsBinary(), " umount ", mountpoint, " 2>&1"));
  EXPECT_EQ(0, umount.exit_code) << umount.output;
}

TEST_F(VersionTest, AMountNewerThanMetaIsRefusedEvenWhenTheyShareAVersion) {
  // 2..3 shares 2 with meta's 1..2, but a mount is upgraded after meta.
  CommandResult mount = MountStating("2:3", "ahead");
  EXPECT_EQ(78, mount.exit_code) << "a version refusal: " << mount.output;
  EXPECT_TRUE(absl::StrContains(mount.output, ": upgrade this meta first (docs/OPERATIONS.md"))
      << mount.output;
}

TEST_F(VersionTest, AnOlderSegmentServerIsToldToUpgrade) {
  // A meta that speaks only 2 (a 0.3 build, say) meets one that speaks only 1.
  Start({"--TEST_wire_versions=2:2"});
  const std::string dir = cluster_->root() + "/old-segd";
  CommandResult segd = RunCommand(absl::StrCat(
      "timeout 30 ", LogfsBinary(), " segd --data_dir=", dir, " --listen=127.0.0.1:0 --meta=",
      cluster_->cluster().meta_address(), " --TEST_wire_versions=1:1 2>&1"));
  EXPECT_EQ(78, segd.exit_code) << segd.output;
  EXPECT_TRUE(absl::StrContains(segd.output, "speaks wire versions 1..1, this meta (logfs "))
      << segd.output;
  EXPECT_TRUE(absl::StrContains(segd.output, ": upgrade the segd (docs/OPERATIONS.md"))
      << segd.output;
}

}  // namespace
}  // namespace logfs::testing
