// `logfs recover PATH` (as `hdfs debug recoverLease`): revokes the lease of
// a live writer on another mount, seals what its quorum acked, lets a new
// writer in, and fences the old one: its later writes never appear.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

TEST(RecoverTest, RecoverRevokesALiveWritersLeaseAndFencesIt) {
  MountedClusterOptions options;
  options.mounts = 2;
  options.mount_flags = {"--replica_timeout_ms=1000", "--fsync_timeout_ms=5000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  // (a) mount 0 writes and syncs; mount 1 cannot open for write.
  int old_fd = open(c.Path("wal/held").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(old_fd, 0);
  ASSERT_EQ(6, write(old_fd, "acked\n", 6));
  ASSERT_EQ(0, fdatasync(old_fd));
  EXPECT_EQ(-1, open(c.Path("wal/held", 1).c_str(), O_WRONLY | O_APPEND));
  EXPECT_EQ(EBUSY, errno);
  // (b) recover from mount 1's path.
  auto r = RunCommand(LogfsBinary() + " recover " + c.Path("wal/held", 1));
  ASSERT_EQ(0, r.exit_code) << r.output;
  EXPECT_NE(std::string::npos, r.output.find("recovered")) << r.output;
  // (c) a new writer on mount 1 appends after the acked bytes.
  int new_fd = open(c.Path("wal/held", 1).c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(new_fd, 0) << strerror(errno);
  ASSERT_EQ(4, write(new_fd, "new\n", 4));
  ASSERT_EQ(0, close(new_fd));
  // (d) the old writer is fenced: its write or sync fails, nothing lands.
  ssize_t n = write(old_fd, "zombie\n", 7);
  int rc = n == 7 ? fdatasync(old_fd) : -1;
  EXPECT_EQ(-1, rc);
  EXPECT_EQ(EIO, errno);
  close(old_fd);
  EXPECT_EQ("acked\nnew\n", *ReadFile(c.Path("wal/held", 1)));
}

}  // namespace
}  // namespace logfs::testing

namespace logfs::testing {
namespace {

TEST(RecoverTest, RecoverFencesAWriterThatSealedAtAFlushAndChangedNothingSince) {
  // Goal: the writer is fenced also when recovery finds nothing to seal
  // and nobody writes after it. Its segment was sealed at a flush (the
  // close of a duplicate descriptor, as a fork + exec does), so the file
  // is just as the writer left it; it must still not take its lease back
  // (found by a new user: its later writes and fsyncs succeeded, and
  // mount 1 got EBUSY).
  MountedClusterOptions options;
  options.mounts = 2;
  options.mount_flags = {"--replica_timeout_ms=1000", "--fsync_timeout_ms=5000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int old_fd = open(c.Path("wal/flushed").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(old_fd, 0);
  ASSERT_EQ(2, write(old_fd, "a\n", 2));
  ASSERT_EQ(0, fsync(old_fd));
  ASSERT_EQ(0, close(dup(old_fd)));  // a flush: the writer seals, keeping its lease
  auto r = RunCommand(LogfsBinary() + " recover " + c.Path("wal/flushed", 1));
  ASSERT_EQ(0, r.exit_code) << r.output;
  // The old writer's next write may be taken (it is buffered), but its
  // fsync fails, and nothing of it lands.
  ssize_t n = write(old_fd, "b\n", 2);
  int rc = n == 2 ? fsync(old_fd) : -1;
  EXPECT_EQ(-1, rc);
  EXPECT_EQ(EIO, errno) << strerror(errno);
  close(old_fd);
  EXPECT_EQ("a\n", *ReadFile(c.Path("wal/flushed", 1)));
  int new_fd = open(c.Path("wal/flushed", 1).c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(new_fd, 0) << strerror(errno);
  ASSERT_EQ(2, write(new_fd, "c\n", 2));
  ASSERT_EQ(0, fsync(new_fd));
  ASSERT_EQ(0, close(new_fd));
  EXPECT_EQ("a\nc\n", *ReadFile(c.Path("wal/flushed", 1)));
}

TEST(RecoverTest, KilledWritingMountsFilesAreRecoveredWithoutWaitingForTheLease) {
  // Goal: kill -9 of the writing mount closes its connection to meta, so
  // its leases lapse at once (not after --lease_timeout_ms, 60 s here):
  // another mount opens the file for write, recovering every synced byte.
  MountedClusterOptions options;
  options.mounts = 2;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int fd = open(c.Path("wal/orphaned").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(7, write(fd, "synced\n", 7));
  ASSERT_EQ(0, fdatasync(fd));
  c.KillMount(0);
  close(fd);  // ENOTCONN: the mount is gone
  int fd2 = -1;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (fd2 < 0 && absl::Now() < deadline) {
    fd2 = open(c.Path("wal/orphaned", 1).c_str(), O_WRONLY | O_APPEND);
    if (fd2 < 0) {
      ASSERT_EQ(EBUSY, errno) << strerror(errno);
      usleep(20000);  // poll: meta notices the closed connection
    }
  }
  ASSERT_GE(fd2, 0) << "still EBUSY after 10 s";
  ASSERT_EQ(6, write(fd2, "after\n", 6));
  ASSERT_EQ(0, close(fd2));
  EXPECT_EQ("synced\nafter\n", *ReadFile(c.Path("wal/orphaned", 1)));
}

}  // namespace
}  // namespace logfs::testing
