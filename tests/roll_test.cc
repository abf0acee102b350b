// Roll, not repair (DESIGN §4): when a replica of the open segment dies or
// stops answering, the writer seals the segment on the survivors, opens a
// new one on other servers, re-sends the un-acked tail, and the
// application sees no error. Real processes, killed and stopped by PID.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

MountedClusterOptions FourServers() {
  MountedClusterOptions options;
  options.segment_servers = 4;
  options.mount_flags = {"--replica_timeout_ms=1000", "--wal_segment_bytes=1048576"};
  return options;
}

std::string Record(int i) { return absl::StrCat("record-", i, "-", std::string(100, 'x'), "\n"); }

// Appends records 0..n-1 with an fdatasync after each; calls `fault` once
// after record `fault_at`. Returns the file's expected content.
std::string AppendSynced(int fd, int n, int fault_at, const std::function<void()>& fault) {
  std::string expected;
  for (int i = 0; i < n; ++i) {
    std::string r = Record(i);
    EXPECT_EQ(static_cast<ssize_t>(r.size()), write(fd, r.data(), r.size())) << strerror(errno);
    EXPECT_EQ(0, fdatasync(fd)) << "record " << i << ": " << strerror(errno);
    expected += r;
    if (i == fault_at) fault();
  }
  return expected;
}

TEST(RollTest, KilledReplicaRollsWalWithoutError) {
  auto mc = MountedCluster::Start(FourServers());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  // The first segment is on 3 of the 4 servers; kill one of those.
  std::string first = Xattr(c.Path("wal/log"), "user.logfs.segments");
  std::string victim;
  int victim_index = -1;
  std::string expected = AppendSynced(fd, 200, 49, [&] {
    first = Xattr(c.Path("wal/log"), "user.logfs.segments");
    for (int i = 0; i < 4 && victim_index < 0; ++i) {
      if (first.find(c.cluster().segd_address(i)) != std::string::npos) victim_index = i;
    }
    ASSERT_GE(victim_index, 0) << first;
    victim = c.cluster().segd_address(victim_index);
    c.cluster().KillSegd(victim_index, SIGKILL);
  });
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(expected, *ReadFile(c.Path("wal/log")));
  std::string segments = Xattr(c.Path("wal/log"), "user.logfs.segments");
  // The dead server holds no replica of the sealed or new segments.
  EXPECT_EQ(std::string::npos, segments.find(victim)) << segments;
  EXPECT_GE(std::count(segments.begin(), segments.end(), '\n'), 2) << segments;
  // And the data is still there after a remount (no page cache).
  ASSERT_TRUE(c.Remount().ok());
  EXPECT_EQ(expected, *ReadFile(c.Path("wal/log")));
}

TEST(RollTest, KilledReplicaOnAThreeServerClusterRollsToTheTwoLeft) {
  // Goal: with exactly 3 segment servers (the embedded default) a WAL
  // writer survives one of them dying: the next segment goes on the 2
  // left, still the ack quorum, and no fsync fails.
  MountedClusterOptions options;
  options.mount_flags = {"--replica_timeout_ms=1000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string expected =
      AppendSynced(fd, 100, 30, [&] { c.cluster().KillSegd(1, SIGKILL); });
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(expected, *ReadFile(c.Path("wal/log")));
  std::string segments = Xattr(c.Path("wal/log"), "user.logfs.segments");
  const std::string dead = c.cluster().segd_address(1);
  // "<id> <addr>,<addr>[,<addr>] <length> sealed": the last segment, made
  // after the roll, has two replicas and none on the dead server.
  std::vector<std::string> lines = absl::StrSplit(segments, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << segments;
  std::vector<std::string> last = absl::StrSplit(lines.back(), ' ');
  ASSERT_EQ(4u, last.size()) << segments;
  EXPECT_EQ(std::string::npos, last[1].find(dead)) << segments;
  EXPECT_EQ(1, std::count(last[1].begin(), last[1].end(), ',')) << segments;
  ASSERT_TRUE(c.Remount().ok());
  EXPECT_EQ(expected, *ReadFile(c.Path("wal/log")));
}

TEST(RollTest, StoppedReplicaTimesOutAndRolls) {
  // Goal: a replica that stops answering (SIGSTOP) is treated as failed
  // after --replica_timeout_ms; the block file (ack quorum 3) still closes
  // with every byte.
  auto mc = MountedCluster::Start(FourServers());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  int fd = open(c.Path("blockfile").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string expected;
  pid_t stopped = -1;
  for (int i = 0; i < 64; ++i) {
    std::string chunk(64 * 1024, static_cast<char>('a' + i % 26));
    ASSERT_EQ(static_cast<ssize_t>(chunk.size()), write(fd, chunk.data(), chunk.size()));
    expected += chunk;
    if (i == 20) {
      ASSERT_EQ(0, fsync(fd));
      std::string seg = Xattr(c.Path("blockfile"), "user.logfs.segments");
      for (int s = 0; s < 4 && stopped < 0; ++s) {
        if (seg.find(c.cluster().segd_address(s)) != std::string::npos) {
          stopped = c.cluster().segd_pid(s);
        }
      }
      ASSERT_GT(stopped, 0);
      ASSERT_TRUE(StopProcess(stopped));
    }
  }
  int rc = close(fd);
  int err = errno;
  kill(stopped, SIGCONT);
  ASSERT_EQ(0, rc) << strerror(err);
  ASSERT_TRUE(c.Remount().ok());
  auto back = ReadFile(c.Path("blockfile"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(expected == *back) << "content differs; sizes " << expected.size() << " vs "
                                 << back->size();
}

}  // namespace
}  // namespace logfs::testing

namespace logfs::testing {
namespace {

TEST(RollTest, FsyncWithoutAQuorumFailsWithEioAndPoisonsTheDescriptor) {
  // Goal: with two of three servers frozen no quorum can be formed, even by
  // rolling; fdatasync returns EIO (never 0 on hope) within its timeout,
  // and the descriptor stays failed.
  MountedClusterOptions options;
  options.mount_flags = {"--replica_timeout_ms=500", "--fsync_timeout_ms=3000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int fd = open(c.Path("wal/doomed").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(3, write(fd, "ok\n", 3));
  ASSERT_EQ(0, fdatasync(fd));
  ASSERT_TRUE(StopProcess(c.cluster().segd_pid(0)));
  ASSERT_TRUE(StopProcess(c.cluster().segd_pid(1)));
  ASSERT_EQ(4, write(fd, "lost", 4));
  int rc = fdatasync(fd);
  int err = errno;
  EXPECT_EQ(-1, rc);
  EXPECT_EQ(EIO, err);
  EXPECT_EQ(-1, write(fd, "more", 4));
  EXPECT_EQ(EIO, errno);
  EXPECT_EQ(-1, fdatasync(fd));
  // While the failed descriptor is open, the file is what fdatasync
  // acknowledged: its size, and what a read returns (before, a read past
  // the acked bytes failed with EIO until the writer was released).
  struct stat st;
  ASSERT_EQ(0, fstat(fd, &st));
  EXPECT_EQ(3, st.st_size);
  auto held = ReadFile(c.Path("wal/doomed"));
  ASSERT_TRUE(held.ok()) << held.status();
  EXPECT_EQ("ok\n", *held);
  kill(c.cluster().segd_pid(0), SIGCONT);
  kill(c.cluster().segd_pid(1), SIGCONT);
  close(fd);
  // And so it stays once the writer is gone.
  auto back = ReadFile(c.Path("wal/doomed"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ("ok\n", *back);
}

TEST(RollTest, StatOnTheWritingMountShowsOnlyDurableBytes) {
  // Goal: the size the writing mount shows is the durable length (DESIGN
  // §2): an fstat right after a write that cannot become durable yet (no
  // ack quorum: two of three servers stopped) waits for it instead of
  // counting bytes no quorum holds; once the servers are back it answers
  // with every written byte, all durable by then. Before, fstat answered
  // 11 at once while 5 bytes were durable.
  // Method: 5 bytes fdatasynced, two servers stopped by PID, 6 more
  // written; fstat on a thread, given 2 s to answer while the servers are
  // stopped; user.logfs.durable_length read right after it answers.
  MountedClusterOptions options;
  options.mount_flags = {"--replica_timeout_ms=60000", "--fsync_timeout_ms=60000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  const int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(5, write(fd, "first", 5));
  ASSERT_EQ(0, fdatasync(fd));
  ASSERT_TRUE(StopProcess(c.cluster().segd_pid(0)));
  ASSERT_TRUE(StopProcess(c.cluster().segd_pid(1)));
  ASSERT_EQ(6, write(fd, "second", 6));
  std::atomic<bool> answered{false};
  off_t size = -1;
  uint64_t durable = 0;
  std::thread stat_thread([&] {
    struct stat st;
    if (fstat(fd, &st) == 0) size = st.st_size;
    if (!absl::SimpleAtoi(Xattr(c.Path("wal/log"), "user.logfs.durable_length"), &durable)) {
      durable = 0;
    }
    answered = true;
  });
  const absl::Time give_up = absl::Now() + absl::Seconds(2);
  while (!answered && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(10));
  const bool answered_while_stopped = answered;
  kill(c.cluster().segd_pid(0), SIGCONT);
  kill(c.cluster().segd_pid(1), SIGCONT);
  stat_thread.join();
  EXPECT_EQ(11, size);
  EXPECT_GE(durable, static_cast<uint64_t>(size)) << "the size counted bytes that were not durable"
                                                  << (answered_while_stopped ? " (answered while "
                                                                               "no quorum could "
                                                                               "form)"
                                                                             : "");
  EXPECT_EQ(0, close(fd));
}

}  // namespace
}  // namespace logfs::testing
