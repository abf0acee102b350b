// MountTable alone, with times given by the test: liveness, writer
// leases, pins, lapsed leases and their hand-over to recovery, unlink
// grace, and what one expiry pass returns.
#include "store/meta/namespace/mount_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace logfs::meta {
namespace {

constexpr int64_t kSec = 1000 * 1000 * 1000;
constexpr int64_t kT0 = 1700000000 * kSec;

MountTable::Options Timeouts() {
  return {.lease_timeout_ns = 60 * kSec,
          .lease_recovery_delay_ns = 5 * kSec,
          .unlinked_grace_ns = 2 * kSec};
}

TEST(MountTableTest, AMountIsLiveForOneLeaseTimeoutAfterItWasLastHeardOrUntilItDisconnects) {
  MountTable table(Timeouts());
  EXPECT_FALSE(table.Live(7, kT0));
  table.Touch(7, kT0);
  EXPECT_TRUE(table.Live(7, kT0 + 60 * kSec));
  EXPECT_FALSE(table.Live(7, kT0 + 60 * kSec + 1));
  table.Touch(7, kT0 + 61 * kSec);
  EXPECT_TRUE(table.Live(7, kT0 + 61 * kSec));
  table.Disconnect(7);
  EXPECT_FALSE(table.Live(7, kT0 + 61 * kSec));
  EXPECT_EQ(0u, table.mounts());
}

TEST(MountTableTest, OnlyALiveHolderCountsAsHoldingTheLease) {
  MountTable table(Timeouts());
  table.Touch(1, kT0);
  table.Grant(10, 1);
  EXPECT_EQ(1u, table.Holder(10));
  EXPECT_EQ(1u, table.LiveHolder(10, kT0));
  EXPECT_EQ(0u, table.LiveHolder(10, kT0 + 61 * kSec));  // silent too long
  EXPECT_EQ(1u, table.Holder(10));                       // until Expire lapses it
  EXPECT_FALSE(table.RevokeIfHeldBy(10, 2));
  EXPECT_EQ(1u, table.Holder(10));
  EXPECT_TRUE(table.RevokeIfHeldBy(10, 1));
  EXPECT_EQ(0u, table.Holder(10));
  EXPECT_EQ(0u, table.leases());
}

TEST(MountTableTest, ALeaseHeldUnderIdZeroIsStillALease) {
  // Mount ids start at 1; a request with 0 is bogus, but what it was
  // granted must still be found and revoked.
  MountTable table(Timeouts());
  table.Grant(10, 0);
  EXPECT_TRUE(table.Leased(10));
  EXPECT_TRUE(table.HeldBy(10, 0));
  EXPECT_FALSE(table.HeldBy(10, 1));
  EXPECT_FALSE(table.HeldBy(11, 0));
  EXPECT_TRUE(table.RevokeIfHeldBy(10, 0));
  EXPECT_FALSE(table.Leased(10));
}

TEST(MountTableTest, PinsCountPerMountAndGoOneByOne) {
  MountTable table(Timeouts());
  table.Pin(10, 1);
  table.Pin(10, 1);
  table.Pin(10, 2);
  EXPECT_TRUE(table.PinnedBy(10, 1));
  EXPECT_TRUE(table.Unpin(10, 1));
  EXPECT_TRUE(table.PinnedBy(10, 1));  // one of its two pins is left
  EXPECT_TRUE(table.Unpin(10, 1));
  EXPECT_FALSE(table.PinnedBy(10, 1));
  EXPECT_FALSE(table.Unpin(10, 1));  // none left: nothing dropped
  EXPECT_TRUE(table.Pinned(10));     // mount 2's
  EXPECT_TRUE(table.Unpin(10, 2));
  EXPECT_FALSE(table.Pinned(10));
}

TEST(MountTableTest, ExpiryLapsesTheLeasesAndDropsThePinsOfSilentMountsOnly) {
  MountTable table(Timeouts());
  table.Touch(1, kT0);
  table.Touch(2, kT0 + 30 * kSec);
  table.Grant(10, 1);
  table.Grant(20, 2);
  table.Pin(10, 1);
  table.Pin(11, 1);
  table.Pin(11, 2);
  table.Pin(20, 2);
  // At T0 + 61 s mount 1 is dead, mount 2 live.
  std::vector<uint64_t> orphans = table.Expire(kT0 + 61 * kSec, 100);
  EXPECT_EQ((std::vector<uint64_t>{10}), orphans);  // 11 keeps mount 2's pin
  EXPECT_EQ(0u, table.Holder(10));
  EXPECT_TRUE(table.Lapsed(10));
  EXPECT_EQ(2u, table.Holder(20));
  EXPECT_FALSE(table.Lapsed(20));
  EXPECT_TRUE(table.Pinned(11));
  EXPECT_FALSE(table.PinnedBy(11, 1));
  EXPECT_EQ(1u, table.mounts());
  EXPECT_EQ(1u, table.lapsed_leases());
}

TEST(MountTableTest, ALapsedLeaseGoesBackToItsMountByHeartbeatButNotToAnother) {
  MountTable table(Timeouts());
  table.Touch(1, kT0);
  table.Grant(10, 1);
  table.Disconnect(1);
  table.Expire(kT0 + kSec, 100);
  ASSERT_TRUE(table.Lapsed(10));
  table.Touch(2, kT0 + kSec);
  EXPECT_EQ(0u, table.Reclaim(2, {10}, kT0 + kSec));  // not mount 2's
  table.Touch(1, kT0 + 2 * kSec);
  EXPECT_EQ(1u, table.Reclaim(1, {10}, kT0 + 2 * kSec));
  EXPECT_EQ(1u, table.Holder(10));
  EXPECT_FALSE(table.Lapsed(10));
}

TEST(MountTableTest, ALeaseOfAnUnknownWriterGoesToWhicheverMountClaimsItFirst) {
  MountTable table(Timeouts());  // after a meta restart: the writer is unknown
  table.AddLapsed(10, 0, kT0);
  table.Touch(3, kT0);
  EXPECT_EQ(1u, table.Reclaim(3, {10, 11}, kT0));  // 11 lapsed from nobody
  EXPECT_EQ(3u, table.Holder(10));
  table.Touch(4, kT0);
  table.AddLapsed(10, 0, kT0);  // say it lapsed again while 3 holds it live
  EXPECT_EQ(0u, table.Reclaim(4, {10}, kT0));
  EXPECT_EQ(3u, table.Holder(10));
}

TEST(MountTableTest, DueLapsedLeasesGoToRecoveryOnceAfterTheDelay) {
  MountTable table(Timeouts());
  table.AddLapsed(10, 0, kT0);  // nobody claims it
  table.Touch(1, kT0);
  table.AddLapsed(11, 1, kT0);  // its mount is live again: it gets it back
  table.AddLapsed(12, 0, kT0);
  table.Grant(12, 1);                      // opened for write again meanwhile
  table.AddLapsed(13, 0, kT0 + 3 * kSec);  // not due yet
  EXPECT_EQ((std::vector<uint64_t>{10}), table.TakeDueLapsedLeases(kT0 + 5 * kSec));
  EXPECT_EQ(1u, table.Holder(11));
  EXPECT_FALSE(table.Lapsed(11));
  EXPECT_FALSE(table.Lapsed(12));
  EXPECT_TRUE(table.Lapsed(13));
  EXPECT_TRUE(table.TakeDueLapsedLeases(kT0 + 5 * kSec).empty());  // each once
  EXPECT_EQ((std::vector<uint64_t>{13}), table.TakeDueLapsedLeases(kT0 + 8 * kSec));
}

TEST(MountTableTest, APassedLeaseIsNotReclaimedByTheMountItLapsedFrom) {
  MountTable table(Timeouts());
  table.AddLapsed(10, 1, kT0);
  table.ForgetLapsed(10);  // OpenWrite or recovery passed it on
  table.Touch(1, kT0);
  EXPECT_EQ(0u, table.Reclaim(1, {10}, kT0));
  EXPECT_EQ(0u, table.Holder(10));
}

TEST(MountTableTest, UnlinkedFilesComeOutOfExpiryOnceTheirGraceIsOverAtMostSoManyAPass) {
  MountTable table(Timeouts());
  for (uint64_t ino = 100; ino < 105; ++ino) table.MarkUnlinked(ino, kT0);
  table.MarkUnlinked(200, kT0 + 3 * kSec);
  EXPECT_TRUE(table.InUnlinkGrace(100));
  EXPECT_TRUE(table.Expire(kT0 + kSec, 100).empty());
  EXPECT_EQ((std::vector<uint64_t>{100, 101, 102}), table.Expire(kT0 + 2 * kSec, 3));
  EXPECT_FALSE(table.InUnlinkGrace(100));
  EXPECT_EQ((std::vector<uint64_t>{103, 104}), table.Expire(kT0 + 2 * kSec, 3));
  EXPECT_TRUE(table.InUnlinkGrace(200));
}

TEST(MountTableTest, WithoutAGraceAnUnlinkedFileIsNotKept) {
  MountTable::Options options = Timeouts();
  options.unlinked_grace_ns = 0;
  MountTable table(options);
  table.MarkUnlinked(100, kT0);
  EXPECT_FALSE(table.InUnlinkGrace(100));
}

}  // namespace
}  // namespace logfs::meta
