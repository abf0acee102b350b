// Regression test: a WAL file whose writing mount was killed. Before the
// fix, every other mount's stat said 0 bytes (meta's size counts sealed
// segments only) while read returned every synced byte, and the file stayed
// so until someone ran `logfs recover` or opened it for write. Now stat
// shows the open segment's acked length, and meta recovers and seals the
// file by itself once the lease has lapsed for --lease_recovery_delay_ms.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(DeadWriterTest, StatShowsTheSyncedBytesAndMetaRecoversTheFileByItself) {
  MountedClusterOptions options;
  options.mounts = 2;
  options.meta_flags = {"--lease_recovery_delay_ms=2000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  // (a) 200 records of 100 bytes, each fsynced, then kill -9 the writer.
  const std::string record(99, 'r');
  std::string expected;
  int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(100, write(fd, (record + "\n").data(), 100));
    ASSERT_EQ(0, fsync(fd));
    expected += record + "\n";
  }
  c.KillMount(0);
  close(fd);  // ENOTCONN: the mount is gone

  // (b) At once, before any recovery: stat on the other mount shows what a
  // read returns.
  const std::string path = c.Path("wal/log", 1);
  struct stat st;
  ASSERT_EQ(0, stat(path.c_str(), &st));
  EXPECT_EQ(20000, st.st_size);
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(expected, *data);
  EXPECT_EQ("20000", Xattr(path, "user.logfs.durable_length"));

  // (c) Nobody asks: meta seals the file once the lease has lapsed.
  std::string segments;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    segments = Xattr(path, "user.logfs.segments");
    if (!segments.empty() && !absl::StrContains(segments, " open")) break;
    absl::SleepFor(absl::Milliseconds(50));  // poll: meta's expiry pass
  }
  EXPECT_FALSE(segments.empty());
  EXPECT_FALSE(absl::StrContains(segments, " open")) << segments;
  ASSERT_EQ(0, stat(path.c_str(), &st));
  EXPECT_EQ(20000, st.st_size);
  EXPECT_EQ(expected, *ReadFile(path));
}

TEST(DeadWriterTest, AfterAMetaRestartADeadWritersFileIsRecoveredAndALiveOneWritesOn) {
  // Goal: leases live in meta's memory. After a meta restart, a file whose
  // writer died is still recovered by meta (its re-replication scan finds
  // the open segment nobody holds), while a writer that lives on claims
  // its lease back by heartbeat and is never fenced. Method: (a) mount 0
  // and mount 1 each write and fsync a WAL file; (b) kill -9 mount 1, then
  // kill -9 and restart meta; (c) poll until mount 1's file is sealed,
  // with mount 0 appending and fsyncing all along, past the lease timeout;
  // (d) both files hold every synced byte.
  MountedClusterOptions options;
  options.mounts = 2;
  options.meta_flags = {"--lease_timeout_ms=2000", "--lease_recovery_delay_ms=500",
                        "--dead_server_ms=2000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  // (a)
  int live = open(c.Path("wal/live", 0).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  int dead = open(c.Path("wal/dead", 1).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(live, 0);
  ASSERT_GE(dead, 0);
  std::string live_expected;
  auto append_live = [&](int i) {
    std::string record = "live record " + std::to_string(i) + "\n";
    ASSERT_EQ(static_cast<ssize_t>(record.size()), write(live, record.data(), record.size()));
    ASSERT_EQ(0, fdatasync(live)) << strerror(errno);
    live_expected += record;
  };
  append_live(0);
  ASSERT_EQ(5, write(dead, "dead\n", 5));
  ASSERT_EQ(0, fdatasync(dead));
  // (b)
  // Meta first, so that no meta sees mount 1's connection close.
  const pid_t mount1 = c.MountPid(1);
  ASSERT_GT(mount1, 0);
  c.cluster().KillMeta(SIGKILL);
  kill(mount1, SIGKILL);
  for (int n = 0; n < 1000 && kill(mount1, 0) == 0; ++n) usleep(5000);  // poll: it is gone
  ASSERT_TRUE(c.cluster().RestartMeta().ok());
  c.KillMount(1);  // detaches the dead mount
  close(dead);     // ENOTCONN: the mount is gone
  // (c)
  const std::string dead_path = c.Path("wal/dead", 0);
  const absl::Time start = absl::Now();
  bool sealed = false;
  int i = 1;
  while (absl::Now() < start + absl::Seconds(30) && !(sealed && absl::Now() > start + absl::Seconds(4))) {
    append_live(i++);
    std::string segments = Xattr(dead_path, "user.logfs.segments");
    sealed = !segments.empty() && !absl::StrContains(segments, " open");
    absl::SleepFor(absl::Milliseconds(50));  // poll; the writer's pace
  }
  EXPECT_TRUE(sealed) << Xattr(dead_path, "user.logfs.segments");
  append_live(i++);
  ASSERT_EQ(0, close(live));
  // (d)
  auto dead_back = ReadFile(dead_path);
  ASSERT_TRUE(dead_back.ok()) << dead_back.status();
  EXPECT_EQ("dead\n", *dead_back);
  auto live_back = ReadFile(c.Path("wal/live", 0));
  ASSERT_TRUE(live_back.ok()) << live_back.status();
  EXPECT_TRUE(live_expected == *live_back) << live_back->size() << " of " << live_expected.size();
}

}  // namespace
}  // namespace logfs::testing
