// Re-replication that restores a segment's spread over failure domains
// (issue 13 item 3): a sealed segment whose replicas share a rack while a
// live rack holds none gets a copy there and then loses one replica of the
// shared rack, ending at its replication; segments that cannot be spread
// better, open segments and under-replicated segments first are the
// limits. Namespace over a real MetadataDb with a fake clock; no segment
// server is called (the tests record the copies themselves).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "store/format/failure_domain.h"
#include "store/meta/namespace/namespace_fixture.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

constexpr int64_t kDeadServerMs = 10000;

class NamespaceSpreadTest : public NamespaceFixture {
 protected:
  void Configure(NamespaceOptions* options) override {
    options->dead_server_ms = kDeadServerMs;
    options->lease_timeout_ms = 600000;
    options->default_replication = 3;
    options->wal_ack_quorum = 2;
  }

  // Registers one server in `domain`; its id.
  uint64_t Register(const std::string& domain) {
    proto::RegisterServerRequest request;
    request.set_address("10.0.2." + std::to_string(++registered_) + ":7000");
    request.set_free_bytes(1000);
    request.set_failure_domain(domain);
    auto id = ns_->RegisterServer(request);
    EXPECT_TRUE(id.ok()) << id.status();
    domains_[id.ok() ? *id : 0] = domain;
    return id.ok() ? *id : 0;
  }
  // Heartbeats; returns the replicas the server is told to delete.
  std::vector<uint64_t> Beat(uint64_t server_id, uint64_t free_bytes = 1000,
                             uint64_t capacity_bytes = 0, const std::string& disk_failure = "") {
    proto::HeartbeatRequest request;
    request.set_server_id(server_id);
    request.set_free_bytes(free_bytes);
    request.set_capacity_bytes(capacity_bytes);
    request.set_disk_failure(disk_failure);
    auto response = ns_->Heartbeat(request);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return {};
    return {response->delete_segments().begin(), response->delete_segments().end()};
  }
  // Moves time past the dead-server timeout with only `live` heartbeating.
  void KillAllBut(const std::set<uint64_t>& live) {
    Advance(kDeadServerMs + 1);
    for (uint64_t id : live) Beat(id);
  }
  // A new file with one segment of `length` bytes, sealed unless
  // `keep_open`; returns its inode number, the segment's id in *segment_id.
  uint64_t Write(const std::string& name, uint64_t length, uint64_t* segment_id,
                 bool keep_open = false) {
    proto::CreateRequest create;
    create.set_parent(kRootIno);
    create.set_name(name);
    create.set_mode(S_IFREG | 0644);
    auto attr = ns_->Create(create);
    EXPECT_TRUE(attr.ok()) << attr.status();
    if (!attr.ok()) return 0;
    proto::OpenWriteRequest open;
    open.set_ino(attr->ino());
    open.set_mount_id(1);
    EXPECT_TRUE(ns_->OpenWrite(open).ok());
    proto::SealSegmentRequest seal;
    seal.set_ino(attr->ino());
    seal.set_mount_id(1);
    auto opened = ns_->SealSegment(seal);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok()) return 0;
    *segment_id = opened->segments(0).id();
    if (!keep_open) Seal(attr->ino(), *segment_id, length);
    return attr->ino();
  }
  void Seal(uint64_t ino, uint64_t segment_id, uint64_t length) {
    proto::SealSegmentRequest seal;
    seal.set_ino(ino);
    seal.set_mount_id(1);
    seal.set_segment_id(segment_id);
    seal.set_sealed_length(length);
    seal.set_close(true);
    auto closed = ns_->SealSegment(seal);
    EXPECT_TRUE(closed.ok()) << closed.status();
  }
  std::set<uint64_t> Holders(uint64_t ino) {
    auto inode = ns_->GetInode(ino);
    EXPECT_TRUE(inode.ok()) << inode.status();
    std::set<uint64_t> ids;
    if (!inode.ok()) return ids;
    for (const auto& r : inode->segments(0).replicas()) ids.insert(r.server_id());
    return ids;
  }
  // The racks ("r0" of "r0/h1") of `ids`, one per id.
  std::multiset<std::string> Racks(const std::set<uint64_t>& ids) {
    std::multiset<std::string> racks;
    for (uint64_t id : ids) racks.insert(format::DomainPrefix(domains_[id], 1));
    return racks;
  }
  RereplicationPlan Plan(size_t max_tasks = 100, size_t max_spread_tasks = 100) {
    auto plan = ns_->PlanRereplication(0, 1000, max_tasks, max_spread_tasks);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : RereplicationPlan();
  }

  int registered_ = 0;
  std::map<uint64_t, std::string> domains_;  // by server id
};

TEST_F(NamespaceSpreadTest, SegmentSharingARackMovesToTheRackThatCameBack) {
  // Goal: the user's case. r2 was down when the segment was written, so
  // it sits on r0, r0, r1; once r2/h4 is live the segment is copied there
  // and, with the copy recorded, the r0 replica on the highest id (equal
  // free space) leaves it and its server is told to delete it.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 4096, &segment_id);
  ASSERT_EQ((std::set<uint64_t>{a, b, c}), Holders(f));
  RereplicationPlan two_racks = Plan();
  EXPECT_TRUE(two_racks.tasks.empty());  // no third rack: the spread is the widest
  EXPECT_EQ(0u, two_racks.census.misplaced_segments);
  const uint64_t d = Register("r2/h4");
  RereplicationPlan plan = Plan();
  EXPECT_EQ(1u, plan.census.misplaced_segments);  // /metrics' state="misplaced"
  ASSERT_EQ(1u, plan.tasks.size());
  const RereplicationTask& task = plan.tasks[0];
  EXPECT_TRUE(task.spread);
  EXPECT_EQ(f, task.ino);
  EXPECT_EQ(segment_id, task.segment_id);
  EXPECT_EQ(4096u, task.length);
  EXPECT_EQ(d, task.target_server_id);
  EXPECT_EQ(3u, task.source_addresses.size());
  // Before the copy is recorded nothing is dropped.
  EXPECT_EQ((std::set<uint64_t>{a, b, c}), Holders(f));
  EXPECT_TRUE(Beat(b).empty());
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{a, c, d}), Holders(f));
  EXPECT_EQ((std::multiset<std::string>{"r0", "r1", "r2"}), Racks(Holders(f)));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Beat(b));
  EXPECT_TRUE(Beat(a).empty());
  EXPECT_TRUE(Beat(d).empty());
  // fsck's rule agrees, and nothing more is planned.
  std::vector<std::string> replica_domains;
  for (uint64_t id : Holders(f)) replica_domains.push_back(domains_[id]);
  size_t level = 0;
  size_t distinct = 0;
  EXPECT_EQ("", format::NeedlesslySharedDomain(
                    replica_domains, {"r0/h1", "r0/h2", "r1/h3", "r2/h4"}, &level, &distinct));
  RereplicationPlan after = Plan();
  EXPECT_TRUE(after.tasks.empty());
  EXPECT_EQ(0u, after.census.misplaced_segments);
}

TEST_F(NamespaceSpreadTest, ReplicaOnTheFullestServerOfTheSharedRackIsDropped) {
  // Goal: the drop is deterministic: least free space first (here the
  // lower id), and a repeated commit changes nothing.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  const uint64_t d = Register("r2/h4");
  Beat(a, 500);
  RereplicationTask task = Plan().tasks.at(0);
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{b, c, d}), Holders(f));
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{b, c, d}), Holders(f));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Beat(a));
}

TEST_F(NamespaceSpreadTest, ReplicaOnAFailedDiskOfTheSharedRackIsDroppedFirst) {
  // Goal: a replica on a server whose journal failed goes before one on
  // the server with the least free space.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  const uint64_t d = Register("r2/h4");
  Beat(a, 500);
  Beat(b, 1000, 0, "fdatasync: EIO");
  RereplicationTask task = Plan().tasks.at(0);
  ASSERT_EQ(d, task.target_server_id);
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{a, c, d}), Holders(f));
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Beat(b, 1000, 0, "fdatasync: EIO"));
}

TEST_F(NamespaceSpreadTest, NoHealthyReplicaGoesWhileAFailedDiskElsewhereHoldsOne) {
  // Goal: the floor counts healthy replicas. Two in r0, one in r1 on a
  // server whose journal failed (r1 has a healthy server too, so three
  // racks are healthy): after the copy to r2, dropping an r0
  // replica would leave two healthy ones of three wanted, so all four stay
  // (the failed disk's replica is re-replicated as any other).
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  const uint64_t d = Register("r2/h4");
  Register("r1/h5");  // r1 stays a healthy rack
  Beat(c, 1000, 0, "fdatasync: EIO");
  RereplicationPlan plan = Plan();
  ASSERT_FALSE(plan.tasks.empty());
  RereplicationTask task = plan.tasks.at(0);
  ASSERT_EQ(d, task.target_server_id);
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{a, b, c, d}), Holders(f));
}

TEST_F(NamespaceSpreadTest, NoReplicaIsDroppedWhenTheCopysServerDiedBeforeItWasRecorded) {
  // Goal: never below the replication. The target dies between the copy
  // and its commit (its rack stays live): the dead copy is not counted,
  // so the three replicas in two racks stay.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  const uint64_t d = Register("r2/h4");
  const uint64_t e = Register("r2/h5");
  RereplicationTask task = Plan().tasks.at(0);
  ASSERT_TRUE(task.target_server_id == d || task.target_server_id == e);
  KillAllBut({a, b, c, task.target_server_id == d ? e : d});
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ((std::set<uint64_t>{a, b, c}), Holders(f));
  EXPECT_TRUE(Beat(a).empty());
  EXPECT_TRUE(Beat(b).empty());
}

TEST_F(NamespaceSpreadTest, NoCopyGoesWhereTheSegmentIsStillPendingDeletion) {
  // Goal: r2's server held the segment, died, and its replica was dropped
  // and queued for deletion. Back (here: counted live by a restarted meta)
  // it gets no copy of the segment, which the deletion would remove, until
  // a heartbeat after the one that took the deletion shows it ran it.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  const uint64_t d = Register("r2/h4");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  ASSERT_EQ(1u, Holders(f).count(d));
  KillAllBut({a, b, c});
  RereplicationPlan repair = Plan();
  ASSERT_EQ(1u, repair.tasks.size());
  EXPECT_FALSE(repair.tasks[0].spread);
  ASSERT_TRUE(ns_->CommitReplica(repair.tasks[0]).ok());
  ASSERT_EQ((std::set<uint64_t>{a, b, c}), Holders(f));
  Reopen();  // every registered server live on trust, d's deletion queued
  EXPECT_TRUE(Plan().tasks.empty());
  EXPECT_EQ(std::vector<uint64_t>{segment_id}, Beat(d));
  // Handed out, and d runs it before its next heartbeat: not yet either.
  EXPECT_TRUE(Plan().tasks.empty());
  EXPECT_TRUE(Beat(d).empty());
  RereplicationPlan plan = Plan();
  ASSERT_EQ(1u, plan.tasks.size());
  EXPECT_TRUE(plan.tasks[0].spread);
  EXPECT_EQ(d, plan.tasks[0].target_server_id);
}

TEST_F(NamespaceSpreadTest, SegmentThatCannotBeSpreadBetterIsLeftAlone) {
  // Goal: a third rack that is dead, or whose only server is full, gives
  // no copy (a copy to the server with room, in r0, would not widen the
  // spread); once the third rack is live with room, the segment is
  // planned there.
  const uint64_t a = Register("r0/h1");
  const uint64_t b = Register("r0/h2");
  const uint64_t c = Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 10, &segment_id);
  const uint64_t d = Register("r2/h4");
  const uint64_t e = Register("r0/h5");  // room, but in a rack the segment uses
  KillAllBut({a, b, c, e});
  EXPECT_TRUE(Plan().tasks.empty());
  Beat(d, /*free_bytes=*/1000, /*capacity_bytes=*/1ull << 30);  // live, full
  EXPECT_TRUE(Plan().tasks.empty());
  EXPECT_EQ((std::set<uint64_t>{a, b, c}), Holders(f));
  Beat(d, /*free_bytes=*/1ull << 30, /*capacity_bytes=*/1ull << 31);
  RereplicationPlan plan = Plan();
  ASSERT_EQ(1u, plan.tasks.size());
  EXPECT_EQ(d, plan.tasks[0].target_server_id);
  EXPECT_TRUE(plan.tasks[0].spread);
}

TEST_F(NamespaceSpreadTest, OpenSegmentIsLeftToItsWriter) {
  // Goal: an open segment sharing a rack is not copied (it is its
  // writer's); once sealed it is.
  Register("r0/h1");
  Register("r0/h2");
  Register("r1/h3");
  uint64_t segment_id = 0;
  const uint64_t f = Write("f", 0, &segment_id, /*keep_open=*/true);
  const uint64_t d = Register("r2/h4");
  RereplicationPlan open = Plan();
  EXPECT_TRUE(open.tasks.empty());
  // Counted as fsck lists it (MISPLACED), though only its writer moves on.
  EXPECT_EQ(1u, open.census.misplaced_segments);
  EXPECT_EQ(1u, open.census.open_segments);
  Seal(f, segment_id, 10);
  RereplicationPlan plan = Plan();
  ASSERT_EQ(1u, plan.tasks.size());
  EXPECT_EQ(segment_id, plan.tasks[0].segment_id);
  EXPECT_EQ(d, plan.tasks[0].target_server_id);
}

TEST_F(NamespaceSpreadTest, UnderReplicatedSegmentsComeFirstAndSpreadsAreBounded) {
  // Goal: priority and bounds. File m (the lower inode) shares a rack;
  // file u lost a replica. With room for one task, u's copy is planned;
  // with room for two, u's then m's spread; with no spread room, u's only.
  Register("r0/h1");
  Register("r0/h2");
  Register("r1/h3");
  uint64_t m_segment = 0;
  const uint64_t m = Write("m", 10, &m_segment);
  const uint64_t d = Register("r2/h4");
  uint64_t u_segment = 0;
  const uint64_t u = Write("u", 10, &u_segment);
  ASSERT_LT(m, u);
  ASSERT_EQ(1u, Holders(u).count(d));  // u takes every rack
  const uint64_t e = Register("r2/h5");
  std::set<uint64_t> live = {1, 2, 3, e};
  KillAllBut(live);
  RereplicationPlan one = Plan(1, 1);
  ASSERT_EQ(1u, one.tasks.size());
  EXPECT_EQ(u, one.tasks[0].ino);
  EXPECT_FALSE(one.tasks[0].spread);
  RereplicationPlan two = Plan(2, 1);
  ASSERT_EQ(2u, two.tasks.size());
  EXPECT_EQ(u, two.tasks[0].ino);
  EXPECT_EQ(m, two.tasks[1].ino);
  EXPECT_TRUE(two.tasks[1].spread);
  EXPECT_EQ(e, two.tasks[1].target_server_id);
  RereplicationPlan none = Plan(2, 0);
  ASSERT_EQ(1u, none.tasks.size());
  EXPECT_EQ(u, none.tasks[0].ino);
}

}  // namespace
}  // namespace logfs::meta
