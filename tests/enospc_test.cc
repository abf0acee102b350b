// A cluster with no space anywhere: new writes fail with ENOSPC (as on a
// full local disk), not EIO, and namespace changes such as deletes still
// work (they live in meta, and free space once the servers delete).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// Creates `path`, appends `data` and fdatasyncs; returns 0 or the errno.
int AppendAndSync(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) return errno;
  int err = 0;
  if (write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size()) ||
      fdatasync(fd) != 0) {
    err = errno;
  }
  if (close(fd) != 0 && err == 0) err = errno;
  return err;
}

// Three segment servers on tmpfs disks that FillDisk can make full, whose
// free space meta learns every 200 ms.
MountedClusterOptions FullableDisks() {
  MountedClusterOptions options;
  options.tmpfs_segds = {0, 1, 2};
  options.segd_flags = {"--heartbeat_interval_ms=200"};
  return options;
}

TEST(EnospcTest, FullClusterGivesEnospcAndDeletesStillWork) {
  auto mc = MountedCluster::Start(FullableDisks());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  ASSERT_EQ(0, AppendAndSync(c.Path("wal/before"), Pattern(100000, 1)));
  // (a) every server's disk is full.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.FillDisk(i, 0).ok());
  // (b) once meta's heartbeats say so, a new file's first write is ENOSPC.
  int err = 0;
  absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int n = 0; absl::Now() < deadline; ++n) {
    err = AppendAndSync(c.Path(absl::StrCat("wal/after", n)), "x");
    if (err == ENOSPC) break;
    usleep(100000);  // poll: servers report their space every 200 ms
  }
  EXPECT_EQ(ENOSPC, err) << strerror(err);
  // (c) deletes and other namespace changes still work, and what was
  // written before is intact.
  EXPECT_EQ(Pattern(100000, 1), *ReadFile(c.Path("wal/before")));
  EXPECT_EQ(0, rename(c.Path("wal/before").c_str(), c.Path("wal/renamed").c_str()));
  EXPECT_EQ(0, unlink(c.Path("wal/renamed").c_str())) << strerror(errno);
  EXPECT_EQ(0, mkdir(c.Path("still-works").c_str(), 0755));
}

TEST(EnospcTest, AWriterWhoseEveryReplicaFillsGetsEnospcAndKeepsWhatWasSynced) {
  // Goal: the disks of all three replicas of an open WAL segment fill up
  // together; the writer's next write or fdatasync fails with ENOSPC (not
  // EIO), and every byte synced before is still there.
  auto mc = MountedCluster::Start(FullableDisks());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  const std::string synced = Pattern(50000, 2);
  ASSERT_EQ(static_cast<ssize_t>(synced.size()), write(fd, synced.data(), synced.size()));
  ASSERT_EQ(0, fdatasync(fd));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.FillDisk(i, 0).ok());
  int err = 0;
  const std::string chunk(64 << 10, 'y');
  for (int i = 0; i < 1000 && err == 0; ++i) {
    if (write(fd, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size()) ||
        fdatasync(fd) != 0) {
      err = errno;
    }
  }
  EXPECT_EQ(ENOSPC, err) << strerror(err);
  close(fd);
  auto back = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_GE(back->size(), synced.size());
  EXPECT_TRUE(back->compare(0, synced.size(), synced) == 0);
}

}  // namespace
}  // namespace logfs::testing
