// A cluster on many hosts (issue 13 items 2 and 3), with network
// namespaces as hosts (tests/virtual_network.h, tests/multi_host_cluster.h):
// the network's own faults do what they say, and meta, five segment servers
// on three racks and two mounts, each on a host of its own, serve one
// writer's bytes to a reader on another host, with every replica address
// an advertised one and every segment's replicas in distinct racks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tests/multi_host_cluster.h"
#include "tests/virtual_network.h"

namespace logfs::testing {
namespace {

TEST(VirtualNetworkTest, FaultsCutWhatTheySayAndTeardownLeavesNothing) {
  std::string first_host;
  {
    auto made = VirtualNetwork::Create(3);
    ASSERT_TRUE(made.ok()) << made.status();
    VirtualNetwork& net = **made;
    first_host = net.Name(1);
    // Nothing in the machine's own namespace: no veth end, and so no link
    // to any of the network's namespaces.
    const std::string prefix = first_host.substr(0, first_host.size() - 2);
    EXPECT_FALSE(absl::StrContains(RunCommand("ip -o link").output, prefix));
    EXPECT_TRUE(net.Reaches(1, 2));
    EXPECT_TRUE(net.Reaches(3, 1));
    // Loopback is up in every host; the host's own address answers too.
    EXPECT_EQ(0, net.Run(2, "ip -br link show lo | grep -q UP").exit_code);
    EXPECT_TRUE(net.Reaches(2, 2));
    // A disconnected host reaches nobody and nobody reaches it.
    ASSERT_TRUE(net.Disconnect(2).ok());
    EXPECT_FALSE(net.Reaches(1, 2));
    EXPECT_FALSE(net.Reaches(2, 3));
    EXPECT_TRUE(net.Reaches(1, 3));
    ASSERT_TRUE(net.Reconnect(2).ok());
    EXPECT_TRUE(net.Reaches(1, 2));
    // A partition cuts only the pairs it names, both ways.
    ASSERT_TRUE(net.Partition(1, {2}).ok());
    EXPECT_FALSE(net.Reaches(1, 2));
    EXPECT_FALSE(net.Reaches(2, 1));
    EXPECT_TRUE(net.Reaches(1, 3));
    EXPECT_TRUE(net.Reaches(3, 2));
    ASSERT_TRUE(net.Heal(1, {2}).ok());
    EXPECT_TRUE(net.Reaches(1, 2));
    EXPECT_TRUE(net.Reaches(2, 1));
    // Left cut: the destructor cleans up anyway.
    ASSERT_TRUE(net.Partition(3, {1}).ok());
    ASSERT_TRUE(net.Disconnect(1).ok());
  }
  EXPECT_FALSE(absl::StrContains(RunCommand("ip netns list").output, first_host));
}

// The replica addresses of every segment of `path` (user.logfs.segments:
// "<id> <addr>,<addr>,... <length> sealed|open" per line).
std::vector<std::vector<std::string>> ReplicaSets(const std::string& path) {
  char buf[16384];
  ssize_t n = getxattr(path.c_str(), "user.logfs.segments", buf, sizeof(buf));
  std::vector<std::vector<std::string>> sets;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(buf, n > 0 ? n : 0), '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() == 4) sets.push_back(absl::StrSplit(fields[1], ','));
  }
  return sets;
}

TEST(MultiHostTest, WriterAndReaderOnTwoHostsWithReplicasInDistinctRacks) {
  MultiHostClusterOptions options;  // 5 segment servers on 3 racks, 2 mounts
  options.segd_flags = {"--heartbeat_interval_ms=250"};
  options.mount_flags = {"--wal_segment_bytes=65536"};
  auto started = MultiHostCluster::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  MultiHostCluster& c = **started;
  MountedCluster& m = c.mounted();
  // Mount A (host 7) writes and syncs a WAL file over several segments
  // and a block file; mount B (host 8) reads the same bytes.
  MakeWalDir(m);
  const std::string wal = Pattern(300000, 1), block = Pattern(1 << 20, 2);
  int fd = open(m.Path("wal/000001.log").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  for (size_t off = 0; off < wal.size(); off += 30000) {
    ASSERT_EQ(30000, write(fd, wal.data() + off, 30000));
    ASSERT_EQ(0, fdatasync(fd));
  }
  ASSERT_TRUE(WriteFile(m.Path("block.dat"), block).ok());
  EXPECT_EQ(wal, *ReadFile(m.Path("wal/000001.log", 1))) << "open WAL file read on host B";
  EXPECT_EQ(block, *ReadFile(m.Path("block.dat", 1)));
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(wal, *ReadFile(m.Path("wal/000001.log", 1)));
  auto stats = MountStats(m.Path("block.dat", 1));
  EXPECT_GE(stats["remote_reads"], 1u);
  EXPECT_EQ(0u, stats["short_circuit_reads"]) << "no segment server shares B's host id";
  // `logfs status` on a mount host lists every server under its advertised
  // address with its domain.
  CommandResult status = c.Logfs(c.MountHost(1), "status");
  ASSERT_EQ(0, status.exit_code) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "servers: 5 (5 live, 0 dead)")) << status.output;
  EXPECT_FALSE(absl::StrContains(status.output, "127.0.0.1")) << status.output;
  EXPECT_FALSE(absl::StrContains(status.output, "0.0.0.0")) << status.output;
  for (int i = 0; i < 5; ++i) {
    const std::string& address = c.cluster().segd_address(i);
    EXPECT_TRUE(absl::StartsWith(address, c.network().Address(c.SegdHost(i)) + ":")) << address;
    bool listed = false;
    for (absl::string_view line : absl::StrSplit(status.output, '\n')) {
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      listed |= f.size() > 3 && f[1] == address && f[2] == c.FailureDomain(i) && f[3] == "live";
    }
    EXPECT_TRUE(listed) << address << " " << c.FailureDomain(i) << " in\n" << status.output;
  }
  // Every segment's three replicas sit in three racks.
  int segments = 0;
  for (const std::string file : {"wal/000001.log", "block.dat"}) {
    for (const auto& replicas : ReplicaSets(m.Path(file, 1))) {
      ++segments;
      std::set<std::string> racks;
      for (const auto& address : replicas) {
        const int segd = c.SegdAt(address);
        ASSERT_GE(segd, 0) << "not an advertised segment server address: " << address;
        racks.insert(c.Rack(segd));
      }
      EXPECT_EQ(3u, replicas.size()) << file;
      EXPECT_EQ(replicas.size(), racks.size()) << file << ": two replicas in one rack";
    }
  }
  EXPECT_GE(segments, 5) << "the WAL file rolled at 64 KiB";
}

}  // namespace
}  // namespace logfs::testing
