// A WAL file reopened for append by one short-lived writer after another
// (`cmd >> log`, logrotate's create mode) continues its last segment
// instead of gaining one per writer (issue 30 item 2): before, every
// reopen made a segment, so such a file died with EFBIG after about
// 30,000 appends, its user.logfs.segments failed with E2BIG at about
// 1,600, and reads paid per segment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(ReopenAppendTest, ShortLivedWritersKeepOneSegmentAndEveryMountReadsItAll) {
  // Goal: 300 writers in turn each append a line and close: the file keeps
  // one segment, sealed, on its three servers, and reads back whole on the
  // writing mount and on another, also while it grows (the other mount
  // caches its blocks and its replicas' descriptors between reads, and
  // the appends pass a 64 KiB CRC chunk of the segment it read before);
  // fsck finds every replica in agreement.
  // Method: two mounts; lines of 300 bytes; mount 1 reads the whole file
  // after every 50 appends, its kernel caches dropped first.
  MountedClusterOptions options;
  options.mounts = 2;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  std::string expected;
  for (int i = 0; i < 300; ++i) {
    const std::string line = absl::StrCat(Pattern(290, i).substr(0, 290), " ", 1000 + i, "\n");
    expected += line.substr(0, 300);
    ASSERT_TRUE(WriteFile(c.Path("wal/log"), line.substr(0, 300), O_APPEND).ok()) << "append " << i;
    if (i % 50 == 49) {
      // The kernel on mount 1 keeps a sealed file's size for up to its
      // attribute timeout (docs/POSIX.md): dropped, so that the read asks.
      // The mount's own caches (blocks, replica descriptors) stay.
      DropKernelCaches();
      auto other = ReadFile(c.Path("wal/log", 1));
      ASSERT_TRUE(other.ok()) << other.status();
      EXPECT_TRUE(*other == expected) << "mount 1 after " << i + 1 << " appends: "
                                      << other->size() << " bytes of " << expected.size();
    }
  }
  std::vector<SegmentLine> segments = Segments(c.Path("wal/log"));
  ASSERT_EQ(1u, segments.size());
  EXPECT_EQ("sealed", segments[0].state);
  EXPECT_EQ(expected.size(), segments[0].length);
  EXPECT_EQ(3u, segments[0].replicas.size());
  auto back = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == expected);
  DropKernelCaches();
  auto cold = ReadFile(c.Path("wal/log", 1));
  ASSERT_TRUE(cold.ok()) << cold.status();
  EXPECT_TRUE(*cold == expected);
  CommandResult fsck =
      RunCommand(absl::StrCat(LogfsBinary(), " fsck --noprogress --meta=",
                              c.cluster().meta_address()));
  EXPECT_EQ(0, fsck.exit_code) << fsck.output;
  EXPECT_EQ(0u, MountStats(c.mountpoint(1))["short_circuit_failures"])
      << "a cached replica of the segment failed its CRC check after it grew";
}

TEST(ReopenAppendTest, ASegmentWithADeadReplicaIsNotContinuedButTheAppendWorks) {
  // Goal: when a server holding the last segment is gone (killed, not yet
  // declared dead by meta), the next writer cannot reopen that replica: the
  // segment is sealed back where it was on the two live ones, and the
  // append goes to a new segment on the live servers; no byte is lost.
  MountedClusterOptions options;
  options.segment_servers = 4;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  ASSERT_TRUE(WriteFile(c.Path("wal/log"), "one\n", O_APPEND).ok());
  ASSERT_TRUE(WriteFile(c.Path("wal/log"), "two\n", O_APPEND).ok());
  std::vector<SegmentLine> before = Segments(c.Path("wal/log"));
  ASSERT_EQ(1u, before.size());
  // Kill one of the segment's servers.
  int victim = -1;
  for (int i = 0; i < c.cluster().segment_servers() && victim < 0; ++i) {
    for (const std::string& r : before[0].replicas) {
      if (r == c.cluster().segd_address(i)) victim = i;
    }
  }
  ASSERT_GE(victim, 0);
  c.cluster().KillSegd(victim, SIGKILL);
  ASSERT_TRUE(WriteFile(c.Path("wal/log"), "three\n", O_APPEND).ok());
  auto back = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ("one\ntwo\nthree\n", *back);
  std::vector<SegmentLine> after = Segments(c.Path("wal/log"));
  ASSERT_EQ(2u, after.size());
  EXPECT_EQ(8u, after[0].length);
  // The dead server's replica could not take the seal back: it leaves the
  // segment (re-replication restores the count); the two others hold it.
  ASSERT_EQ(2u, after[0].replicas.size());
  for (const std::string& r : after[0].replicas) EXPECT_NE(c.cluster().segd_address(victim), r);
  for (const std::string& r : after[1].replicas) {
    EXPECT_NE(c.cluster().segd_address(victim), r) << "the new segment avoids the dead server";
  }
}

}  // namespace
}  // namespace logfs::testing
