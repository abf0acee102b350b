// Version ranges and the one-line refusal (store/format/wire_version.h).
#include "store/format/wire_version.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace logfs::format {
namespace {

proto::VersionRange Range(uint32_t min, uint32_t max, const char* role, const char* release) {
  proto::VersionRange v;
  v.set_wire_min(min);
  v.set_wire_max(max);
  v.set_role(role);
  v.set_release(release);
  return v;
}

TEST(WireVersionTest, ThisBuildSpeaksItsOwnAndThePreviousMinor) {
  const proto::VersionRange own = OwnVersion("mount");
  EXPECT_EQ(kWireVersion, own.wire_max());
  EXPECT_EQ(kWireVersionMin, own.wire_min());
  EXPECT_EQ(kWireVersion - 1, own.wire_min()) << "one minor release of skew";
  EXPECT_EQ("mount", own.role());
  EXPECT_FALSE(own.release().empty());
}

TEST(WireVersionTest, APeerThatStatesNothingIsRelease01) {
  const proto::VersionRange old = PeerVersion(false, {}, "segd");
  EXPECT_EQ(1u, old.wire_min());
  EXPECT_EQ(1u, old.wire_max());
  EXPECT_EQ("segd", old.role());
  EXPECT_TRUE(CheckPeerVersion(OwnVersion("meta"), old, "h3:7101").ok());
  const proto::VersionRange stated = PeerVersion(true, Range(2, 3, "", "0.3.0"), "mount");
  EXPECT_EQ("mount", stated.role());
  EXPECT_EQ(3u, stated.wire_max());
}

TEST(WireVersionTest, OverlappingRangesShareAVersion) {
  const auto meta = Range(1, 2, "meta", "0.2.0");
  EXPECT_TRUE(CheckPeerVersion(meta, Range(2, 3, "mount", "0.3.0"), "h4").ok());
  EXPECT_TRUE(CheckPeerVersion(meta, Range(1, 1, "mount", "0.1.0"), "h4").ok());
}

TEST(WireVersionTest, ARefusalIsOneLineThatSaysWhomToUpgrade) {
  const auto meta = Range(2, 3, "meta", "0.3.0");
  absl::Status old_mount = CheckPeerVersion(meta, Range(1, 1, "mount", "0.1.0"), "h4");
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, old_mount.code());
  EXPECT_EQ(
      "logfs mount 0.1.0 at h4 speaks wire versions 1..1, this meta (logfs 0.3.0) 2..3: upgrade "
      "the mount (docs/OPERATIONS.md \"Upgrade\")",
      old_mount.message());
  absl::Status new_segd = CheckPeerVersion(Range(1, 2, "meta", "0.2.0"),
                                           Range(4, 5, "segd", "0.5.0"), "h3:7101");
  EXPECT_TRUE(absl::StrContains(new_segd.message(), ": upgrade this meta (")) << new_segd;
  EXPECT_FALSE(absl::StrContains(new_segd.message(), "\n"));
}

TEST(WireVersionTest, MetaRefusesAPeerNewerThanItselfAndTheRefusalIsRecognized) {
  const auto meta = Range(1, 2, "meta", "0.2.0");
  const auto newer_mount = Range(2, 3, "mount", "0.3.0");
  EXPECT_TRUE(CheckPeerVersion(meta, newer_mount, "h4").ok()) << "they share 2";
  absl::Status ahead = CheckPeerVersion(meta, newer_mount, "h4", /*peer_may_be_newer=*/false);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, ahead.code());
  EXPECT_TRUE(absl::StrContains(ahead.message(), ": upgrade this meta first (")) << ahead;
  EXPECT_TRUE(IsVersionRefusal(ahead));
  EXPECT_TRUE(IsVersionRefusal(absl::FailedPreconditionError(
      absl::StrCat("meta at h1 refused to register this server: ", ahead.message()))));
  EXPECT_FALSE(IsVersionRefusal(absl::FailedPreconditionError("another cluster's server")));
  EXPECT_FALSE(IsVersionRefusal(absl::UnavailableError(ahead.message())));
  EXPECT_TRUE(CheckPeerVersion(meta, Range(1, 2, "mount", "0.2.0"), "h4", false).ok());
}

TEST(WireVersionTest, TheTestOverrideChangesWhatThisProcessStates) {
  SetWireVersionsForTest(7, 9);
  EXPECT_EQ(7u, OwnVersion("segd").wire_min());
  EXPECT_EQ(9u, OwnVersion("segd").wire_max());
  SetWireVersionsForTest(0, 0);
  EXPECT_EQ(kWireVersion, OwnVersion("segd").wire_max());
}

}  // namespace
}  // namespace logfs::format
