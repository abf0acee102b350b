// Regression test for issue 44: the space of a deleted file stayed taken.
// A mount that had read a sealed file short-circuit kept its replicas'
// descriptors and mappings in its replica cache after meta deleted the
// file and the segment servers unlinked the replica files, until the
// cache's eviction limits let go of them (minutes: --replica_cache_mmap_
// expiry_ms then --replica_cache_expiry_ms), so the servers' disks stayed
// full and new writes failed with ENOSPC. The replica cache now drops a
// replica whose data file has no name left at its next pass, once a
// heartbeat interval (cache/replica_cache.h DropDeleted).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr int kSegds = 3;
constexpr uint64_t kFileBytes = 16 << 20;
constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
// Well within the replica cache's age limits (60 s mapped, then 300 s),
// so only a cache that lets go of deleted replicas passes; well above the
// ~2 s the deletion takes (a segd heartbeat, then a mount heartbeat).
constexpr absl::Duration kSpaceBackWithin = absl::Seconds(30);

// Bytes in use on the file system holding `dir` (a segment server's own
// tmpfs: only its replicas and journal).
uint64_t UsedBytes(const std::string& dir) {
  struct statvfs st;
  if (statvfs(dir.c_str(), &st) != 0) return ~uint64_t{0};
  return static_cast<uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
}

// What the daemon `pid` holds of replica files: its descriptors' targets
// and mapped paths under a segments/ dir, with " (deleted)" once unlinked.
std::vector<std::string> HeldReplicaFiles(pid_t pid) {
  std::vector<std::string> held;
  const std::string proc = absl::StrCat("/proc/", pid);
  std::error_code error;
  for (const auto& fd : std::filesystem::directory_iterator(proc + "/fd", error)) {
    std::error_code link_error;
    const std::string target = std::filesystem::read_symlink(fd.path(), link_error).string();
    if (!link_error && absl::StrContains(target, "/segments/")) held.push_back("fd " + target);
  }
  std::ifstream maps(proc + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (const size_t at = line.find('/'); at != std::string::npos &&
                                          absl::StrContains(line, "/segments/")) {
      held.push_back("map " + line.substr(at));
    }
  }
  return held;
}

std::vector<std::string> HeldDeleted(pid_t pid) {
  std::vector<std::string> deleted;
  for (std::string& held : HeldReplicaFiles(pid)) {
    if (absl::EndsWith(held, " (deleted)")) deleted.push_back(std::move(held));
  }
  return deleted;
}

TEST(DeletedReplicaSpaceTest, UnlinkedFileGivesItsSpaceBackOnEveryMountThatReadIt) {
  // Goal: within seconds of a file's removal, no mount holds its replica
  // files open or mapped, and the segment servers' disks have the space
  // back. Method: three segment servers each on a tmpfs of its own (so
  // its usage is its replicas alone), two mounts; a sealed 16 MiB file
  // written through one and read short-circuit through both, then
  // unlinked; bounded polls of both daemons' /proc/PID/{fd,maps} and of
  // statvfs of every server's data dir.
  MountedClusterOptions options;
  options.mounts = 2;
  options.segment_servers = kSegds;
  options.tmpfs_segds = {0, 1, 2};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  std::vector<std::string> data_dirs;
  std::vector<uint64_t> used_before;
  for (int i = 0; i < kSegds; ++i) {
    data_dirs.push_back(absl::StrCat((*mc)->root(), "/data/segd", i));
    used_before.push_back(UsedBytes(data_dirs.back()));
  }

  // (a) A sealed block file (closed: sealed on all three replicas).
  const std::string data = Pattern(kFileBytes, 44);
  ASSERT_TRUE(WriteFile((*mc)->Path("big.sst", 0), data).ok());
  const std::vector<SegmentLine> segments = Segments((*mc)->Path("big.sst", 0));
  ASSERT_EQ(1u, segments.size());
  ASSERT_EQ("sealed", segments[0].state);
  for (int i = 0; i < kSegds; ++i) {
    EXPECT_GE(UsedBytes(data_dirs[i]), used_before[i] + kFileBytes) << data_dirs[i];
  }

  // (b) Read through both mounts: each caches a local replica, held open
  // and mapped after the read ends.
  DropKernelCaches();
  const std::string replica_file = absl::StrCat("/segments/", segments[0].id, ".seg");
  for (int m = 0; m < 2; ++m) {
    auto read = ReadFile((*mc)->Path("big.sst", m));
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_TRUE(*read == data) << "mount " << m;
    EXPECT_GE(MountStats((*mc)->Path("", m))["replica_cache_opens"], 1u) << "mount " << m;
    const std::vector<std::string> held = HeldReplicaFiles((*mc)->MountPid(m));
    ASSERT_TRUE(std::any_of(held.begin(), held.end(),
                            [&](const std::string& h) {
                              return absl::StartsWith(h, "fd ") &&
                                     absl::EndsWith(h, replica_file);
                            }))
        << "mount " << m << " holds no descriptor of " << replica_file
        << "; it holds: " << absl::StrJoin(held, ", ");
  }

  // (c) Removed through mount 0; nothing has it open.
  ASSERT_EQ(0, unlink((*mc)->Path("big.sst", 0).c_str())) << strerror(errno);

  // (d) Both daemons let go of the replica files and the space comes back.
  auto released = [&] {
    for (int m = 0; m < 2; ++m) {
      if (!HeldDeleted((*mc)->MountPid(m)).empty()) return false;
    }
    for (int i = 0; i < kSegds; ++i) {
      // Slack for the replica's state file and the server's own small files.
      if (UsedBytes(data_dirs[i]) > used_before[i] + (1 << 20)) return false;
    }
    return true;
  };
  const absl::Time deadline = absl::Now() + kSpaceBackWithin;
  while (!released() && absl::Now() < deadline) absl::SleepFor(kPollInterval);
  for (int m = 0; m < 2; ++m) {
    EXPECT_TRUE(HeldDeleted((*mc)->MountPid(m)).empty())
        << "mount " << m << " still holds, " << absl::FormatDuration(kSpaceBackWithin)
        << " after the unlink: " << absl::StrJoin(HeldDeleted((*mc)->MountPid(m)), ", ");
    EXPECT_GE(MountStats((*mc)->Path("", m))["replica_cache_deletions"], 1u) << "mount " << m;
  }
  for (int i = 0; i < kSegds; ++i) {
    EXPECT_LE(UsedBytes(data_dirs[i]), used_before[i] + (1 << 20))
        << data_dirs[i] << ": the deleted replica's space is still taken";
  }
}

}  // namespace
}  // namespace logfs::testing
