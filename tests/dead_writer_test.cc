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

#include <string>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

std::string Xattr(const std::string& path, const char* name) {
  char buf[4096];
  ssize_t n = getxattr(path.c_str(), name, buf, sizeof(buf));
  return n < 0 ? "" : std::string(buf, n);
}

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

}  // namespace
}  // namespace logfs::testing
