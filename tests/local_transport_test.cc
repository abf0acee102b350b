// A mount reaches the segment servers of its own host over their Unix RPC
// sockets (segd --rpc_socket, mount --local_transport; DESIGN §6,
// docs/rpc.md "Transports"): real meta and segd processes, a real FUSE
// mount, synced WAL appends, and the servers' per-transport counters
// (ServerStats), read over TCP by the test's own client.
#include <fcntl.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/format/logfs.pb.h"
#include "tests/mounted_cluster.h"
#include "tests/segd_stats.h"

namespace logfs::testing {
namespace {

constexpr int kRecords = 20;
constexpr size_t kRecordBytes = 100;

// Writes kRecords records to a new WAL file `name` under wal/, each with a
// fdatasync, closes it and returns what was written (empty on failure).
std::string WriteSyncedRecords(MountedCluster& mc, const std::string& name) {
  const std::string path = mc.Path("wal/" + name);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  EXPECT_GE(fd, 0) << strerror(errno);
  if (fd < 0) return "";
  std::string written;
  for (int i = 0; i < kRecords; ++i) {
    const std::string record = Pattern(kRecordBytes, 100 + i);
    EXPECT_EQ(static_cast<ssize_t>(kRecordBytes), write(fd, record.data(), record.size()));
    EXPECT_EQ(0, fdatasync(fd)) << strerror(errno);
    written += record;
  }
  EXPECT_EQ(0, close(fd));
  return written;
}

std::string SegdDataDir(MountedCluster& mc, int i) {
  return absl::StrCat(mc.root(), "/data/segd", i);
}

TEST(LocalTransportTest, WalAppendsReachTheLocalSegdsOverTheirUnixSockets) {
  // Goal: with the defaults (segd --rpc_socket in its data dir, mount
  // --local_transport=unix) and an authenticated cluster, a WAL file's
  // synced appends go to the segment servers of this host over their
  // Unix sockets, not loopback TCP, and read back right. Method: each
  // server's per-transport request counters and append count around 20
  // write+fdatasync records; every append a server took must have come
  // over its Unix socket (meta and the test's stats client use TCP).
  MountedClusterOptions options;
  options.authenticate = true;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  // (a) The socket files: in each data dir, this user's only.
  for (int i = 0; i < c.cluster().segment_servers(); ++i) {
    struct stat st;
    const std::string socket = SegdDataDir(c, i) + "/segd-rpc.sock";
    ASSERT_EQ(0, stat(socket.c_str(), &st)) << socket;
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(0600u, st.st_mode & 07777);
  }
  MakeWalDir(c);
  SegdStats stats(c);
  const auto before = stats.All();

  // (b) Synced appends through the mount.
  const std::string written = WriteSyncedRecords(c, "log");
  ASSERT_EQ(kRecords * kRecordBytes, written.size());
  const auto after = stats.All();

  // (c) Every append a server took came over its Unix socket.
  int servers_with_appends = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const uint64_t appends = after[i].appends() - before[i].appends();
    const uint64_t unix_requests = after[i].unix_requests() - before[i].unix_requests();
    const uint64_t tcp_requests = after[i].tcp_requests() - before[i].tcp_requests();
    SCOPED_TRACE(absl::StrCat("segd ", i, ": appends ", appends, ", unix requests ", unix_requests,
                              ", tcp requests ", tcp_requests));
    if (appends == 0) continue;
    ++servers_with_appends;
    EXPECT_GE(unix_requests, appends);
    EXPECT_GE(after[i].unix_connections(), 1u);
    // Over TCP: this test's one ServerStats, and what meta may ask.
    EXPECT_LT(tcp_requests, appends);
  }
  EXPECT_GE(servers_with_appends, 2);  // the ack quorum of 3 replicas
  EXPECT_EQ(3u, MountStats(c.Path("wal/log"))["local_rpc_servers"]);

  // (d) The bytes read back, from the mount (and through a remount, from
  // the servers).
  auto read = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(written, *read);
  ASSERT_TRUE(c.Remount().ok());
  read = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(written, *read);

  // (e) The new mount's first calls to the servers were the read's (its
  // short-circuit ShortCircuitInfo): its appends still go over the Unix
  // sockets, not a TCP connection that the read opened.
  const auto before_second = stats.All();
  const std::string written2 = WriteSyncedRecords(c, "log2");
  ASSERT_EQ(kRecords * kRecordBytes, written2.size());
  const auto after_second = stats.All();
  for (size_t i = 0; i < after_second.size(); ++i) {
    const uint64_t appends = after_second[i].appends() - before_second[i].appends();
    const uint64_t unix_requests =
        after_second[i].unix_requests() - before_second[i].unix_requests();
    EXPECT_GE(unix_requests, appends) << "segd " << i << " after the remount";
  }
}

TEST(LocalTransportTest, LocalTransportTcpKeepsLocalSegdsOnLoopbackTcp) {
  // Goal: mount --local_transport=tcp turns the Unix sockets off: the same
  // appends reach the servers over TCP only. Method: as above, with the
  // flag; no server reads a request on its Unix socket.
  MountedClusterOptions options;
  options.mount_flags = {"--local_transport=tcp"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  SegdStats stats(c);
  const auto before = stats.All();
  const std::string written = WriteSyncedRecords(c, "log");
  const auto after = stats.All();
  uint64_t appends = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    appends += after[i].appends() - before[i].appends();
    EXPECT_EQ(0u, after[i].unix_requests()) << "segd " << i;
    EXPECT_EQ(0u, after[i].unix_connections()) << "segd " << i;
  }
  EXPECT_GE(appends, 2u * kRecords);
  EXPECT_EQ(0u, MountStats(c.Path("wal/log"))["local_rpc_servers"]);
  auto read = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(written, *read);
}

TEST(LocalTransportTest, AnUnreachableUnixSocketFallsBackToTcp) {
  // Goal: a server that names a Unix socket the mount cannot connect to
  // (here: its file was removed after it started) is still written to,
  // over TCP, with no failed call. Method: remove every server's socket
  // file before the first write; the mount learns the paths
  // (local_rpc_servers 3), its Unix connects fail, and every append
  // arrives over TCP.
  auto mc = MountedCluster::Start(MountedClusterOptions());
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  for (int i = 0; i < c.cluster().segment_servers(); ++i) {
    ASSERT_EQ(0, unlink((SegdDataDir(c, i) + "/segd-rpc.sock").c_str()));
  }
  MakeWalDir(c);
  SegdStats stats(c);
  const auto before = stats.All();
  const std::string written = WriteSyncedRecords(c, "log");
  ASSERT_EQ(kRecords * kRecordBytes, written.size());
  const auto after = stats.All();
  uint64_t appends = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    const uint64_t server_appends = after[i].appends() - before[i].appends();
    appends += server_appends;
    EXPECT_EQ(0u, after[i].unix_connections()) << "segd " << i;
    EXPECT_GE(after[i].tcp_requests() - before[i].tcp_requests(), server_appends) << "segd " << i;
  }
  EXPECT_GE(appends, 2u * kRecords);
  EXPECT_EQ(3u, MountStats(c.Path("wal/log"))["local_rpc_servers"]);
  auto read = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(written, *read);
}

}  // namespace
}  // namespace logfs::testing
