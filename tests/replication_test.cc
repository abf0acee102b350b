// Replication and durability through a real mount: placement on three
// distinct segment servers, rolls at the segment limit, quorum fsync with
// one replica frozen, reads after a segment server is killed, readers of an
// open WAL file on another mount, and a full cluster restart.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "store/client/admin_client.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

MountedClusterOptions SmallSegments(int mounts = 1) {
  MountedClusterOptions options;
  options.mounts = mounts;
  options.mount_flags = {"--wal_segment_bytes=65536", "--block_segment_bytes=262144",
                         "--replica_timeout_ms=3000"};
  return options;
}

void MakeWalDir(MountedCluster& mc, const std::string& rel) {
  ASSERT_EQ(0, mkdir(mc.Path(rel).c_str(), 0755));
  ASSERT_EQ(0, setxattr(mc.Path(rel).c_str(), "user.logfs.kind", "wal", 3, 0));
}

TEST(ReplicationTest, BlockFileIsOnThreeDistinctServers) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  std::string data = Pattern(100000, 1);
  ASSERT_TRUE(WriteFile((*mc)->Path("b"), data).ok());
  auto segments = Segments((*mc)->Path("b"));
  ASSERT_EQ(1u, segments.size());
  EXPECT_EQ("sealed", segments[0].state);
  EXPECT_EQ(100000u, segments[0].length);
  std::set<std::string> distinct(segments[0].replicas.begin(), segments[0].replicas.end());
  EXPECT_EQ(3u, distinct.size());
  EXPECT_EQ("100000", Xattr((*mc)->Path("b"), "user.logfs.durable_length"));
  EXPECT_EQ("block", Xattr((*mc)->Path("b"), "user.logfs.kind"));
}

TEST(ReplicationTest, SegmentsRollAtTheirSizeLimit) {
  auto mc = MountedCluster::Start(SmallSegments());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  std::string data = Pattern(300000, 2);
  int fd = open((*mc)->Path("wal/log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  for (size_t off = 0; off < data.size(); off += 4096) {
    size_t n = std::min<size_t>(4096, data.size() - off);
    ASSERT_EQ(static_cast<ssize_t>(n), write(fd, data.data() + off, n));
  }
  ASSERT_EQ(0, close(fd));
  auto segments = Segments((*mc)->Path("wal/log"));
  ASSERT_EQ(5u, segments.size());  // 4 full 64 KiB segments and a tail
  uint64_t total = 0;
  for (const auto& s : segments) {
    EXPECT_EQ("sealed", s.state);
    EXPECT_LE(s.length, 65536u);
    total += s.length;
  }
  EXPECT_EQ(data.size(), total);
  EXPECT_EQ(data, *ReadFile((*mc)->Path("wal/log")));
}

TEST(ReplicationTest, WalFsyncNeedsOnlyTheAckQuorum) {
  // Goal: with one of three replicas frozen (SIGSTOP), fdatasync on a WAL
  // file (ack quorum 2) still returns 0 and the bytes read back.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  int fd = open((*mc)->Path("wal/q").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(4, write(fd, "abcd", 4));
  ASSERT_EQ(0, fdatasync(fd));
  pid_t frozen = (*mc)->cluster().segd_pid(0);
  ASSERT_TRUE(StopProcess(frozen));
  ASSERT_EQ(4, write(fd, "efgh", 4));
  int rc = fdatasync(fd);
  int err = errno;
  kill(frozen, SIGCONT);
  EXPECT_EQ(0, rc) << strerror(err);
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ("abcdefgh", *ReadFile((*mc)->Path("wal/q")));
}

TEST(ReplicationTest, AnAppendAloneInTheMountIsSyncedAtOnceByTheAckQuorum) {
  // Goal: a single writer's synced appends (nothing else in flight in the
  // mount) ask only the ack quorum (2 of 3) to sync at once. With the
  // servers' own sync interval at 10 minutes, every fdatasync still
  // returns 0, two servers ran a journal round per append and the third
  // none; close seals the file at its length and every byte reads back.
  MountedClusterOptions options;
  options.segd_flags = {"--sync_interval_ms=600000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  client::AdminClient admin((*mc)->cluster().meta_address(), absl::Seconds(10));
  auto rounds = [&] {
    std::vector<uint64_t> out;
    for (int i = 0; i < (*mc)->cluster().segment_servers(); ++i) {
      auto stats = admin.ServerStats((*mc)->cluster().segd_address(i));
      EXPECT_TRUE(stats.ok()) << stats.status();
      out.push_back(stats.ok() ? stats->sync_rounds() : 0);
    }
    return out;
  };
  const std::string path = (*mc)->Path("wal/alone");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const uint64_t quorum_synced = MountStats(path)["quorum_synced_appends"];
  const std::vector<uint64_t> before = rounds();
  std::string written;
  for (int i = 0; i < 10; ++i) {
    const std::string record = Pattern(100, 30 + i);
    ASSERT_EQ(100, write(fd, record.data(), record.size()));
    ASSERT_EQ(0, fdatasync(fd));
    written += record;
  }
  const std::vector<uint64_t> after = rounds();
  std::vector<uint64_t> delta;
  for (size_t i = 0; i < after.size(); ++i) delta.push_back(after[i] - before[i]);
  std::sort(delta.begin(), delta.end());
  ASSERT_EQ(3u, delta.size());
  EXPECT_EQ(0u, delta[0]) << "the third replica synced at once";
  EXPECT_GE(delta[1], 10u);
  EXPECT_EQ(quorum_synced + 10, MountStats(path)["quorum_synced_appends"]);
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(written, *ReadFile(path));
}

TEST(ReplicationTest, UnsyncedWalAppendsGoLazyAndTheNextFsyncSyncsThem) {
  // Goal: a WAL written without fsync (RocksDB with sync=false) stops
  // asking the servers for an fdatasync per append; its next fsync sends
  // one Sync round, returns 0 with every byte durable, and the writer goes
  // back to eager appends (the next write + fsync needs no round).
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  const std::string path = (*mc)->Path("wal/lazy");
  int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const std::string record = Pattern(100, 21);
  std::string written;
  auto rounds = [&] { return MountStats(path)["sync_rounds"]; };
  const uint64_t rounds_before = rounds();
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(100, write(fd, record.data(), record.size()));
    written += record;
  }
  ASSERT_EQ(0, fdatasync(fd));
  EXPECT_EQ(rounds_before + 1, rounds()) << "one Sync round for the lazy appends";
  EXPECT_EQ(std::to_string(written.size()), Xattr(path, "user.logfs.durable_length"));
  ASSERT_EQ(100, write(fd, record.data(), record.size()));
  written += record;
  ASSERT_EQ(0, fdatasync(fd));
  EXPECT_EQ(rounds_before + 1, rounds()) << "eager again: the append asked for the sync";
  EXPECT_EQ(std::to_string(written.size()), Xattr(path, "user.logfs.durable_length"));
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(written, *ReadFile(path));
}

TEST(ReplicationTest, EveryByteReadsBackAfterKillingOneSegmentServer) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(Pattern(300000 + i * 1000, 10 + i));
    ASSERT_TRUE(WriteFile((*mc)->Path("f" + std::to_string(i)), contents.back()).ok());
  }
  (*mc)->cluster().KillSegd(1, SIGKILL);
  // Bypass the kernel's page cache: read through a fresh mount.
  ASSERT_TRUE((*mc)->Remount().ok());
  for (int i = 0; i < 4; ++i) {
    auto back = ReadFile((*mc)->Path("f" + std::to_string(i)));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(contents[i], *back) << "file " << i;
  }
}

TEST(ReplicationTest, ReaderOnAnotherMountSeesUnsyncedAppends) {
  // Goal: `tail -f` on mount 1 shows lines that a writer on mount 0
  // appends without ever calling fsync, within a second (DESIGN §2, §4),
  // also once the writer coalesces them (issue 16: after 32 unsynced
  // writes, --wal_coalesce_us).
  auto mc = MountedCluster::Start(SmallSegments(2));
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  int fd = open((*mc)->Path("wal/tailed").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string expected = "line0\n";
  ASSERT_EQ(6, write(fd, "line0\n", 6));
  for (int i = 0; i < 40; ++i) {  // past wal::FileWriter::kLazyAfterAppends
    const std::string fill = absl::StrCat("fill", i, "\n");
    ASSERT_EQ(static_cast<ssize_t>(fill.size()), write(fd, fill.data(), fill.size()));
    expected += fill;
  }
  std::string out = (*mc)->root() + "/tail.out";
  std::string cmd = "tail -s 0.1 -n +1 -f " + (*mc)->Path("wal/tailed", 1) + " > " + out +
                    " 2>/dev/null & echo $!";
  auto started = RunCommand(cmd);
  pid_t tail_pid = std::atoi(started.output.c_str());
  ASSERT_GT(tail_pid, 0);
  absl::Duration worst;
  for (int i = 1; i <= 5; ++i) {
    std::string line = "line" + std::to_string(i) + "\n";
    ASSERT_EQ(static_cast<ssize_t>(line.size()), write(fd, line.data(), line.size()));
    expected += line;
    absl::Time written = absl::Now();
    absl::Time deadline = written + absl::Seconds(10);
    while (absl::Now() < deadline) {
      auto seen = ReadFile(out);
      if (seen.ok() && seen->find(line) != std::string::npos) break;
      usleep(10000);  // poll tail's output
    }
    worst = std::max(worst, absl::Now() - written);
  }
  kill(tail_pid, SIGTERM);
  close(fd);
  auto seen = ReadFile(out);
  EXPECT_EQ(expected, *seen);
  EXPECT_LT(worst, absl::Seconds(1)) << "slowest line took " << worst;
}

TEST(ReplicationTest, ContentSurvivesFullClusterRestart) {
  auto mc = MountedCluster::Start(SmallSegments());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  std::string block = Pattern(700000, 3);
  std::string wal = Pattern(200000, 4);
  ASSERT_TRUE(WriteFile((*mc)->Path("block"), block).ok());
  ASSERT_TRUE(WriteFile((*mc)->Path("wal/w"), wal).ok());
  ASSERT_EQ(0, mkdir((*mc)->Path("dir").c_str(), 0700));
  ASSERT_EQ(0, symlink("block", (*mc)->Path("sym").c_str()));
  ASSERT_TRUE((*mc)->RestartCluster().ok());
  EXPECT_EQ(block, *ReadFile((*mc)->Path("block")));
  EXPECT_EQ(wal, *ReadFile((*mc)->Path("wal/w")));
  EXPECT_EQ(block, *ReadFile((*mc)->Path("sym")));
  struct stat st;
  ASSERT_EQ(0, stat((*mc)->Path("dir").c_str(), &st));
  EXPECT_EQ(0700u, st.st_mode & 07777);
  EXPECT_EQ("wal", Xattr((*mc)->Path("wal"), "user.logfs.kind"));
  // A WAL file written before the restart can be appended to after it.
  ASSERT_TRUE(WriteFile((*mc)->Path("wal/w"), "more", O_APPEND).ok());
  EXPECT_EQ(wal + "more", *ReadFile((*mc)->Path("wal/w")));
}

}  // namespace
}  // namespace logfs::testing

namespace logfs::testing {
namespace {

TEST(ReplicationTest, NamespaceSurvivesMetaRestartUnderAMount) {
  // Goal: kill -9 meta while mounted, restart it on its port; the same
  // mount keeps working and sees everything (RocksDB synced writes).
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  ASSERT_EQ(0, mkdir((*mc)->Path("kept").c_str(), 0755));
  std::string data = Pattern(50000, 7);
  ASSERT_TRUE(WriteFile((*mc)->Path("kept/file"), data).ok());
  (*mc)->cluster().KillMeta(SIGKILL);
  ASSERT_TRUE((*mc)->cluster().RestartMeta().ok());
  EXPECT_EQ(data, *ReadFile((*mc)->Path("kept/file")));
  ASSERT_TRUE(WriteFile((*mc)->Path("kept/after"), "written after restart").ok());
  EXPECT_EQ("written after restart", *ReadFile((*mc)->Path("kept/after")));
}

}  // namespace
}  // namespace logfs::testing

namespace logfs::testing {
namespace {

TEST(ReplicationTest, OpenWriterKeepsWritingAcrossMetaRestart) {
  // Goal: leases live in meta's memory; after a meta restart the writer
  // whose view of the file still matches takes its lease back, and its
  // later writes, fsyncs and close succeed.
  auto mc = MountedCluster::Start(SmallSegments());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MakeWalDir(**mc, "wal");
  int fd = open((*mc)->Path("wal/live").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  std::string expected = Pattern(100000, 9);  // crosses a 64 KiB roll
  ASSERT_EQ(50000, write(fd, expected.data(), 50000));
  ASSERT_EQ(0, fdatasync(fd));
  (*mc)->cluster().KillMeta(SIGKILL);
  ASSERT_TRUE((*mc)->cluster().RestartMeta().ok());
  ASSERT_EQ(50000, write(fd, expected.data() + 50000, 50000)) << strerror(errno);
  EXPECT_EQ(0, fdatasync(fd)) << strerror(errno);
  EXPECT_EQ(0, close(fd)) << strerror(errno);
  EXPECT_EQ(expected, *ReadFile((*mc)->Path("wal/live")));
}

}  // namespace
}  // namespace logfs::testing
