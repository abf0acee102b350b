// ServerRegistry alone, with times given by the test: registration and
// incarnations, liveness, suspects, probes round the servers, and
// placement (space, failed disks, last resorts, domains, ties). Placement
// as the namespace uses it (segments, rolls, re-replication) is in
// namespace_placement_test.cc and namespace_spread_test.cc.
#include "store/meta/namespace/server_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "src/status/posix_error.h"

namespace logfs::meta {
namespace {

constexpr int64_t kSec = 1000 * 1000 * 1000;
constexpr int64_t kT0 = 1700000000 * kSec;
constexpr int64_t kDeadNs = 10 * kSec;
constexpr uint64_t kGiB = 1ull << 30;

proto::RegisterServerRequest Record(uint64_t id, const std::string& domain = "",
                                    uint64_t free_gib = 10, uint64_t incarnation = 0) {
  proto::RegisterServerRequest record;
  record.set_server_id(id);
  record.set_address("10.0.0." + std::to_string(id) + ":7000");
  record.set_host("host" + std::to_string(id));
  record.set_failure_domain(domain);
  record.set_capacity_bytes(100 * kGiB);
  record.set_free_bytes(free_gib * kGiB);
  record.set_incarnation(incarnation != 0 ? incarnation : 100 + id);
  return record;
}

std::set<uint64_t> AsSet(const std::vector<uint64_t>& ids) { return {ids.begin(), ids.end()}; }

TEST(ServerRegistryTest, ARegisteredServerIsLiveUntilSilentForTheDeadTime) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1), kT0);
  EXPECT_TRUE(registry.Live(1, kT0 + kDeadNs));
  EXPECT_FALSE(registry.Live(1, kT0 + kDeadNs + 1));
  proto::HeartbeatRequest beat;
  beat.set_server_id(1);
  beat.set_free_bytes(5 * kGiB);
  registry.Beat(*registry.Find(1), beat, kT0 + kDeadNs + 1);
  EXPECT_TRUE(registry.Live(1, kT0 + kDeadNs + 1));
  EXPECT_EQ(5 * kGiB, registry.At(1).free_bytes);
  EXPECT_FALSE(registry.Live(2, kT0));  // unknown
  EXPECT_EQ("10.0.0.1:7000", registry.Address(1));
  EXPECT_EQ("", registry.Address(2));
}

TEST(ServerRegistryTest, ARestoredServerIsLiveOnTrustButItsSpaceIsUnknown) {
  ServerRegistry registry(kDeadNs);
  registry.Restore(Record(1), kT0);
  EXPECT_TRUE(registry.Live(1, kT0));
  EXPECT_FALSE(registry.At(1).reported);
  EXPECT_EQ(0u, registry.At(1).free_bytes);
  // Space unknown is not "full": placement may use it.
  auto placed = registry.Place(1, {}, {}, {}, kT0);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ((std::vector<uint64_t>{1}), *placed);
}

TEST(ServerRegistryTest, ANewIncarnationStartsHealthyWithAFreshReportAndIsDialledAgain) {
  ServerRegistry registry(kDeadNs);
  ServerState& first = registry.Register(Record(1, "", 10, 111), kT0);
  first.disk_failure = "journal write failed";
  first.reports.wanted = false;
  first.probed_ns = kT0;
  registry.Register(Record(1, "", 10, 111), kT0 + kSec);  // the same process again
  EXPECT_EQ("journal write failed", registry.At(1).disk_failure);
  EXPECT_FALSE(registry.At(1).reports.wanted);
  EXPECT_EQ(0, registry.At(1).probed_ns);
  registry.Register(Record(1, "", 10, 222), kT0 + 2 * kSec);  // restarted
  EXPECT_EQ("", registry.At(1).disk_failure);
  EXPECT_TRUE(registry.At(1).reports.wanted);
  EXPECT_EQ(222u, registry.At(1).incarnation);
}

TEST(ServerRegistryTest, AnotherIncarnationOfALiveServerElsewhereConflicts) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1, "", 10, 111), kT0);
  proto::RegisterServerRequest other = Record(1, "", 10, 222);
  other.set_address("10.0.0.9:7000");
  EXPECT_EQ("10.0.0.1:7000", registry.ConflictingHolder(other, kT0));
  // The same address and host: the holder is gone (it cannot be bound twice).
  EXPECT_EQ("", registry.ConflictingHolder(Record(1, "", 10, 222), kT0));
  // The holder is dead.
  EXPECT_EQ("", registry.ConflictingHolder(other, kT0 + kDeadNs + 1));
  // An unknown id.
  EXPECT_EQ("", registry.ConflictingHolder(Record(2), kT0));
}

TEST(ServerRegistryTest, ADiskFailureIsKeptUntilAHeartbeatSaysOtherwise) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1), kT0);
  registry.Register(Record(2), kT0);
  proto::HeartbeatRequest beat;
  beat.set_server_id(1);
  beat.set_free_bytes(10 * kGiB);
  beat.set_disk_failure("EIO on journal");
  registry.Beat(*registry.Find(1), beat, kT0);
  EXPECT_EQ("EIO on journal", registry.At(1).disk_failure);
  EXPECT_EQ(std::vector<std::string>{"host2"}, registry.LiveHealthyDomains(kT0));
  auto placed = registry.Place(2, {}, {}, {}, kT0);
  ASSERT_FALSE(placed.ok());
  EXPECT_TRUE(absl::IsUnavailable(placed.status())) << placed.status();
  EXPECT_NE(std::string::npos, placed.status().message().find("1 with a failed disk"));
  beat.clear_disk_failure();
  registry.Beat(*registry.Find(1), beat, kT0);
  EXPECT_EQ(2u, registry.LiveHealthyDomains(kT0).size());
}

TEST(ServerRegistryTest, FullServersMakePlacementFailWithEnospc) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1, "", 10), kT0);
  registry.Register(Record(2, "", 0), kT0);  // less than the minimum free space
  auto placed = registry.Place(2, {}, {}, {}, kT0);
  ASSERT_FALSE(placed.ok());
  EXPECT_EQ(ENOSPC, AttachedErrno(placed.status())) << placed.status();
}

TEST(ServerRegistryTest, SuspectServersAreLastResortsUntilTheirNextHeartbeat) {
  ServerRegistry registry(kDeadNs);
  for (uint64_t id = 1; id <= 4; ++id) registry.Register(Record(id, "", 10 + id), kT0);
  google::protobuf::RepeatedField<uint64_t> failing;
  failing.Add(4);  // the most free space: first choice but for this
  registry.MarkFailing(failing, kT0 + kSec);
  EXPECT_TRUE(ServerRegistry::Suspect(registry.At(4)));
  EXPECT_EQ(ServerRegistry::kLastResortRank, ServerRegistry::LastChoiceRank(registry.At(4), false));
  auto three = registry.Place(3, {}, {}, {}, kT0 + kSec);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ((std::set<uint64_t>{1, 2, 3}), AsSet(*three));
  auto four = registry.Place(4, {}, {}, {}, kT0 + kSec);  // too few others: used all the same
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(4u, four->size());
  proto::HeartbeatRequest beat;
  beat.set_server_id(4);
  beat.set_free_bytes(14 * kGiB);
  registry.Beat(*registry.Find(4), beat, kT0 + 2 * kSec);
  EXPECT_FALSE(ServerRegistry::Suspect(registry.At(4)));
  auto one = registry.Place(1, {}, {}, {}, kT0 + 2 * kSec);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((std::vector<uint64_t>{4}), *one);
}

TEST(ServerRegistryTest, PlacementSpreadsOverRacksBesideTheKeptReplicasAndExcludesAsAsked) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1, "rackA/h1", 50), kT0);
  registry.Register(Record(2, "rackA/h2", 40), kT0);
  registry.Register(Record(3, "rackB/h3", 30), kT0);
  registry.Register(Record(4, "rackC/h4", 20), kT0);
  auto three = registry.Place(3, {}, {}, {}, kT0);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ((std::set<uint64_t>{1, 3, 4}), AsSet(*three));  // one per rack, most space first
  // A copy beside replicas kept on 1 (rackA) and 3 (rackB), not on them.
  auto copy = registry.Place(1, {1, 3}, {1, 3}, {}, kT0);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ((std::vector<uint64_t>{4}), *copy);
  auto without_c = registry.Place(2, {4}, {}, {}, kT0);
  ASSERT_TRUE(without_c.ok());
  EXPECT_EQ((std::set<uint64_t>{1, 3}), AsSet(*without_c));
}

TEST(ServerRegistryTest, AvoidedServersAreTakenOnlyWhenTheCountNeedsThem) {
  ServerRegistry registry(kDeadNs);
  for (uint64_t id = 1; id <= 3; ++id) registry.Register(Record(id, "", 10 * id), kT0);
  auto two = registry.Place(2, {}, {}, {3}, kT0);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ((std::set<uint64_t>{1, 2}), AsSet(*two));
  auto three = registry.Place(3, {}, {}, {3}, kT0);
  ASSERT_TRUE(three.ok());
  EXPECT_EQ((std::set<uint64_t>{1, 2, 3}), AsSet(*three));
}

TEST(ServerRegistryTest, TiesInFreeSpaceRotateByOnePerPlacement) {
  ServerRegistry registry(kDeadNs);
  for (uint64_t id = 1; id <= 3; ++id) registry.Register(Record(id, "", 10), kT0);
  std::vector<uint64_t> firsts;
  for (int i = 0; i < 3; ++i) {
    auto placed = registry.Place(1, {}, {}, {}, kT0);
    ASSERT_TRUE(placed.ok());
    firsts.push_back(placed->front());
  }
  EXPECT_EQ((std::set<uint64_t>{1, 2, 3}), AsSet(firsts));
}

TEST(ServerRegistryTest, ProbesGoRoundTheDueLiveServersFromWhereTheLastCallStopped) {
  ServerRegistry registry(kDeadNs);
  for (uint64_t id = 1; id <= 5; ++id) registry.Register(Record(id), kT0);
  registry.Find(5)->last_seen_ns = kT0 - 2 * kDeadNs;  // dead: never dialled
  auto ids = [](const std::vector<ServerRegistry::Probe>& probes) {
    std::vector<uint64_t> out;
    for (const auto& probe : probes) out.push_back(probe.server_id);
    return out;
  };
  const int64_t reprobe = 5 * kSec;  // within the dead time: all stay live
  auto first = registry.DueProbes(2, reprobe, kT0);
  EXPECT_EQ((std::vector<uint64_t>{1, 2}), ids(first));
  for (const auto& probe : first) EXPECT_TRUE(registry.RecordProbe(probe, "", kT0));
  auto second = registry.DueProbes(2, reprobe, kT0);
  EXPECT_EQ((std::vector<uint64_t>{3, 4}), ids(second));
  EXPECT_TRUE(registry.RecordProbe(second[0], "meta cannot dial", kT0));
  EXPECT_TRUE(registry.RecordProbe(second[1], "", kT0));
  EXPECT_EQ("meta cannot dial", registry.At(3).unreachable);
  // Only 3 is due (unreachable) until the others' reprobe time.
  EXPECT_EQ((std::vector<uint64_t>{3}), ids(registry.DueProbes(5, reprobe, kT0 + kSec)));
  // Every live one once the reprobe time is over, from after the cursor (3).
  EXPECT_EQ((std::vector<uint64_t>{4, 1, 2, 3}),
            ids(registry.DueProbes(5, reprobe, kT0 + reprobe)));
}

TEST(ServerRegistryTest, AProbeOfAnEarlierIncarnationIsNotRecorded) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1, "", 10, 111), kT0);
  auto probes = registry.DueProbes(1, 60 * kSec, kT0);
  ASSERT_EQ(1u, probes.size());
  registry.Register(Record(1, "", 10, 222), kT0 + kSec);
  EXPECT_FALSE(registry.RecordProbe(probes[0], "meta cannot dial", kT0 + kSec));
  EXPECT_EQ("", registry.At(1).unreachable);
  EXPECT_EQ(0, registry.At(1).probed_ns);
}

TEST(ServerRegistryTest, LiveSpaceSumsOnlyLiveServers) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1, "", 10), kT0);
  registry.Register(Record(2, "", 20), kT0 + 5 * kSec);
  ServerRegistry::LiveSpace space = registry.SumLiveSpace(kT0 + kDeadNs + kSec);
  EXPECT_EQ(1u, space.servers);
  EXPECT_EQ(20 * kGiB, space.free_bytes);
  EXPECT_EQ(100 * kGiB, space.capacity_bytes);
}

TEST(ServerRegistryTest, FillAddressesNamesEveryReplicasServer) {
  ServerRegistry registry(kDeadNs);
  registry.Register(Record(1), kT0);
  proto::Segment segment;
  segment.add_replicas()->set_server_id(1);
  segment.add_replicas()->set_server_id(9);
  registry.FillAddresses(&segment);
  EXPECT_EQ("10.0.0.1:7000", segment.replicas(0).address());
  EXPECT_EQ("", segment.replicas(1).address());
}

}  // namespace
}  // namespace logfs::meta
