#include "store/meta/namespace/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace logfs::meta {
namespace {

std::string RackOf(const std::string& domain) { return domain.substr(0, domain.find('/')); }

TEST(PlacementTest, ThreeRacksOfTwoHostsNeverPutTwoReplicasInOneRack) {
  // Goal (issue 13): with 3 racks x 2 hosts and replication 3, every
  // segment has one replica per rack, whatever the order of preference
  // (free space, rotation) the servers come in. Method: 1000 shuffles.
  std::vector<std::string> servers = {"r1/h1", "r1/h2", "r2/h3", "r2/h4", "r3/h5", "r3/h6"};
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 1000; ++trial) {
    std::shuffle(servers.begin(), servers.end(), rng);
    std::vector<size_t> chosen = SpreadOverDomains(servers, 3);
    ASSERT_EQ(3u, chosen.size());
    std::set<std::string> racks;
    for (size_t i : chosen) racks.insert(RackOf(servers[i]));
    ASSERT_EQ(3u, racks.size()) << "trial " << trial;
    // The first choice is always the most preferred server.
    EXPECT_EQ(0u, chosen[0]);
  }
}

TEST(PlacementTest, TooFewRacksSpreadOverHostsInstead) {
  // 2 racks for 3 replicas: distinct hosts, in order of preference.
  std::vector<std::string> servers = {"r1/h1", "r1/h1", "r1/h2", "r2/h3"};
  std::vector<size_t> chosen = SpreadOverDomains(servers, 3);
  EXPECT_EQ((std::vector<size_t>{0, 2, 3}), chosen);
}

TEST(PlacementTest, NeverTwoReplicasOnOneHostWhileAnotherHostHasRoom) {
  // Host names alone (the default domain): two servers on h1, one on h2,
  // replication 2: one on each host, though h1's second server is
  // preferred over h2's.
  EXPECT_EQ((std::vector<size_t>{0, 2}), SpreadOverDomains({"h1", "h1", "h2"}, 2));
  // Only two hosts for three replicas: both hosts, then the next best.
  EXPECT_EQ((std::vector<size_t>{0, 2, 1}), SpreadOverDomains({"h1", "h1", "h2"}, 3));
  // One host (the embedded cluster): the servers in order, as before.
  EXPECT_EQ((std::vector<size_t>{0, 1, 2}), SpreadOverDomains({"h", "h", "h", "h"}, 3));
  EXPECT_EQ((std::vector<size_t>{0, 1}), SpreadOverDomains({"h", "h"}, 3));
}

TEST(PlacementTest, ReReplicationRestoresTheSpreadAwayFromKeptReplicas) {
  // Goal: a segment that lost its rack-3 replica gets its new one in rack
  // 3 again, not next to the replicas it keeps, even when a server in
  // their racks is preferred (more free space).
  std::vector<std::string> candidates = {"r1/h2", "r2/h4", "r3/h6"};
  EXPECT_EQ((std::vector<size_t>{2}), SpreadOverDomains(candidates, 1, {"r1/h1", "r2/h3"}));
  // Replicas kept in one rack (placed while only it had room): the new
  // one goes to another rack.
  EXPECT_EQ((std::vector<size_t>{1}), SpreadOverDomains({"r1/h3", "r2/h4"}, 1, {"r1/h1", "r1/h2"}));
  // No other rack: another host of the rack, not a kept host.
  EXPECT_EQ((std::vector<size_t>{1}), SpreadOverDomains({"r1/h1", "r1/h3"}, 1, {"r1/h1", "r1/h2"}));
}

TEST(PlacementTest, SpreadingOverHostsStillTakesAsManyRacksAsItCan) {
  // Goal: where too few racks make placement spread over hosts, it still
  // takes every rack there is before a second host of one rack, whatever
  // the order of preference (so that servers a writer avoids, put last,
  // never narrow the spread). 2 racks, 4 hosts, RF 3: r2's host, though
  // least preferred, is taken before r1's third.
  EXPECT_EQ((std::vector<size_t>{0, 1, 3}),
            SpreadOverDomains({"r1/h1", "r1/h2", "r1/h3", "r2/h4"}, 3));
  // Kept replicas count: beside one kept in r2, r1's server is taken
  // before r2's second.
  EXPECT_EQ((std::vector<size_t>{0, 2}),
            SpreadOverDomains({"r2/h4", "r2/h6", "r1/h1"}, 2, {"r2/h5"}));
}

TEST(PlacementTest, AServerWithoutADomainIsItsHost) {
  proto::RegisterServerRequest old_record;
  old_record.set_host("h9");
  EXPECT_EQ("h9", FailureDomainOf(old_record));
  old_record.set_failure_domain("r2/h9");
  EXPECT_EQ("r2/h9", FailureDomainOf(old_record));
}

}  // namespace
}  // namespace logfs::meta
