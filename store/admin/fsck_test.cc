#include "store/admin/fsck.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace logfs::admin {
namespace {

TEST(FsckTest, ReplicasSharingARackAreMisplacedWhenThreeRacksAreLive) {
  size_t level = 0, distinct = 0;
  const std::vector<std::string> live = {"r1/a", "r1/b", "r2/c", "r3/d"};
  EXPECT_EQ("r1", NeedlesslySharedDomain({"r1/a", "r1/b", "r2/c"}, live, &level, &distinct));
  EXPECT_EQ(1u, level);
  EXPECT_EQ(3u, distinct);
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a", "r2/c", "r3/d"}, live, &level, &distinct));
}

TEST(FsckTest, WithTwoRacksOnlyDistinctHostsAreNeeded) {
  size_t level = 0, distinct = 0;
  const std::vector<std::string> live = {"r1/a", "r1/b", "r2/c", "r2/d"};
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a", "r1/b", "r2/c"}, live, &level, &distinct));
  EXPECT_EQ(2u, level);
  // Two replicas on one host while other hosts have room.
  EXPECT_EQ("r1/a", NeedlesslySharedDomain({"r1/a", "r1/a", "r2/c"}, live, &level, &distinct));
}

TEST(FsckTest, SharingThatNoLevelCanAvoidIsNotReported) {
  size_t level = 0, distinct = 0;
  // One host holds every server: the replicas must share it.
  EXPECT_EQ("", NeedlesslySharedDomain({"h", "h", "h"}, {"h", "h", "h"}, &level, &distinct));
  // A single replica shares nothing.
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a"}, {"r1/a", "r2/b"}, &level, &distinct));
}

// Goal (issue 13 review): the spread check covers open segments too: a
// segment being written is as exposed to losing a rack as a sealed one.
// Method: 4 live servers in racks r1 r1 r2 r3 (and a dead one in r3); a
// file with a sealed and an open segment both with two replicas in r1, and
// an open one spread over three racks: the first two are misplaced.
TEST(FsckTest, OpenSegmentsWhoseReplicasShareARackAreMisplacedToo) {
  proto::ListServersResponse servers;
  const char* const kDomains[] = {"r1/a", "r1/b", "r2/c", "r3/d", "r3/e"};
  for (uint64_t id = 1; id <= 5; ++id) {
    proto::ServerStatus* server = servers.add_servers();
    server->set_server_id(id);
    server->set_failure_domain(kDomains[id - 1]);
    server->set_live(id != 5);
  }
  const ServerDomains domains = ReadServerDomains(servers);
  EXPECT_EQ((std::vector<std::string>{"r1/a", "r1/b", "r2/c", "r3/d"}), domains.live_domains);
  proto::Inode file;
  file.mutable_attr()->set_ino(42);
  auto add_segment = [&](uint64_t id, bool sealed, std::vector<uint64_t> on) {
    proto::Segment* segment = file.add_segments();
    segment->set_id(id);
    segment->set_sealed(sealed);
    for (uint64_t server_id : on) segment->add_replicas()->set_server_id(server_id);
  };
  add_segment(10, true, {1, 2, 3});
  add_segment(11, false, {2, 1, 4});
  add_segment(12, false, {1, 3, 4});
  std::vector<MisplacedSegment> misplaced = MisplacedSegmentsOf(domains, file);
  ASSERT_EQ(2u, misplaced.size());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(42u, misplaced[i].ino);
    EXPECT_EQ(10u + i, misplaced[i].segment_id);
    EXPECT_EQ("r1", misplaced[i].shared_domain);
    EXPECT_EQ(1u, misplaced[i].level);
    EXPECT_EQ(3u, misplaced[i].live_domains);
  }
}

}  // namespace
}  // namespace logfs::admin
