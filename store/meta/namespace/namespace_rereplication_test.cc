// Namespace's half of re-replication and the inspection calls, over a real
// MetadataDb with a fake clock: which segments are planned for copying
// (sealed, fewer live replicas than wanted, at least one live), where the
// copies go, and how a finished copy is recorded (the compare step against
// a file that changed meanwhile, dropping dead replicas only once enough
// live ones are listed).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/namespace_fixture.h"

namespace logfs::meta {
namespace {

constexpr int64_t kDeadServerMs = 10000;

class NamespaceRereplicationTest : public NamespaceFixture {
 protected:
  void Configure(NamespaceOptions* options) override {
    options->dead_server_ms = kDeadServerMs;
    options->lease_timeout_ms = 600000;
    options->unlinked_grace_ms = 0;
  }

  void RegisterServers(int count) {
    for (int i = 1; i <= count; ++i) {
      proto::RegisterServerRequest request;
      request.set_address("10.0.0." + std::to_string(i) + ":7000");
      request.set_free_bytes(1000);
      auto id = ns_->RegisterServer(request);
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_EQ(static_cast<uint64_t>(i), *id);
    }
  }
  // Heartbeats; returns the replicas the server is told to delete.
  std::vector<uint64_t> Beat(uint64_t server_id) {
    proto::HeartbeatRequest request;
    request.set_server_id(server_id);
    request.set_free_bytes(1000);
    auto response = ns_->Heartbeat(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return {response->delete_segments().begin(), response->delete_segments().end()};
  }
  // Moves time past --dead_server_ms with only `live` heartbeating.
  void KillAllBut(const std::set<uint64_t>& live) {
    now_ns_ += (kDeadServerMs + 1) * kMs;
    for (uint64_t id : live) Beat(id);
  }
  uint64_t File(const std::string& name) {
    proto::CreateRequest request;
    request.set_parent(kRootIno);
    request.set_name(name);
    request.set_mode(S_IFREG | 0644);
    auto attr = ns_->Create(request);
    EXPECT_TRUE(attr.ok()) << attr.status();
    return attr.ok() ? attr->ino() : 0;
  }
  // One segment of `length` bytes, sealed unless `keep_open`.
  proto::Segment Write(uint64_t ino, uint64_t length, bool keep_open = false) {
    proto::OpenWriteRequest open;
    open.set_ino(ino);
    open.set_mount_id(1);
    EXPECT_TRUE(ns_->OpenWrite(open).ok());
    proto::SealSegmentRequest seal;
    seal.set_ino(ino);
    seal.set_mount_id(1);
    auto opened = ns_->SealSegment(seal);
    EXPECT_TRUE(opened.ok()) << opened.status();
    if (!opened.ok() || keep_open) return opened.ok() ? opened->segments(0) : proto::Segment();
    seal.set_segment_id(opened->segments(0).id());
    seal.set_sealed_length(length);
    seal.set_close(true);
    auto closed = ns_->SealSegment(seal);
    EXPECT_TRUE(closed.ok()) << closed.status();
    return closed.ok() ? closed->segments(0) : proto::Segment();
  }
  std::set<uint64_t> Holders(uint64_t ino) {
    auto inode = ns_->GetInode(ino);
    EXPECT_TRUE(inode.ok()) << inode.status();
    std::set<uint64_t> ids;
    for (const auto& r : inode->segments(0).replicas()) ids.insert(r.server_id());
    return ids;
  }
  RereplicationPlan Plan() {
    auto plan = ns_->PlanRereplication(0, 1000, 100, 100);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *plan : RereplicationPlan();
  }
};

TEST_F(NamespaceRereplicationTest, SegmentOnDeadServerIsCopiedToAFreshOne) {
  // Goal: a sealed segment with a replica on a dead server is planned for
  // one copy, from its live replicas to the one server not holding it;
  // recording it swaps the dead replica out and queues its deletion.
  RegisterServers(4);
  uint64_t f = File("f");
  proto::Segment segment = Write(f, 4096);
  std::set<uint64_t> holders = Holders(f);
  ASSERT_EQ(3u, holders.size());
  uint64_t spare = 0;
  for (uint64_t id = 1; id <= 4; ++id) spare = holders.count(id) ? spare : id;
  // (a) everything live: nothing to do, nothing counted.
  RereplicationPlan healthy = Plan();
  EXPECT_TRUE(healthy.tasks.empty());
  EXPECT_EQ(0u, healthy.census.under_replicated_segments);
  EXPECT_EQ(0u, healthy.census.open_segments);
  // (b) one holder dies.
  uint64_t dead = *holders.begin();
  std::set<uint64_t> live = {1, 2, 3, 4};
  live.erase(dead);
  KillAllBut(live);
  RereplicationPlan plan = Plan();
  ASSERT_EQ(1u, plan.tasks.size());
  // The census (for /metrics): one segment of 4096 bytes lacks one copy.
  EXPECT_EQ(1u, plan.census.under_replicated_segments);
  EXPECT_EQ(4096u, plan.census.under_replicated_bytes);
  EXPECT_EQ(1u, plan.census.missing_copies);
  EXPECT_EQ(0u, plan.census.lost_segments);
  const RereplicationTask& task = plan.tasks[0];
  EXPECT_EQ(f, task.ino);
  EXPECT_EQ(segment.id(), task.segment_id);
  EXPECT_EQ(4096u, task.length);
  EXPECT_EQ(spare, task.target_server_id);
  EXPECT_EQ("10.0.0." + std::to_string(spare) + ":7000", task.target_address);
  EXPECT_EQ(2u, task.source_addresses.size());
  EXPECT_EQ(0u, plan.next_ino);
  // (c) record the copy.
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  std::set<uint64_t> expected = live;
  EXPECT_EQ(expected, Holders(f));
  EXPECT_TRUE(Plan().tasks.empty());
  // (d) a repeated commit changes nothing; the dead server, back, deletes.
  ASSERT_TRUE(ns_->CommitReplica(task).ok());
  EXPECT_EQ(expected, Holders(f));
  EXPECT_EQ(std::vector<uint64_t>{segment.id()}, Beat(dead));
  EXPECT_TRUE(Beat(spare).empty());
}

TEST_F(NamespaceRereplicationTest, CopyOfAFileDeletedMeanwhileIsAbortedAndDeleted) {
  // Goal: the compare step. A copy finished after its file was unlinked is
  // not recorded, and the target is told to delete it.
  RegisterServers(4);
  uint64_t f = File("f");
  proto::Segment segment = Write(f, 100);
  std::set<uint64_t> live = {1, 2, 3, 4};
  live.erase(*Holders(f).begin());
  KillAllBut(live);
  RereplicationPlan plan = Plan();
  ASSERT_EQ(1u, plan.tasks.size());
  ASSERT_TRUE(ns_->Unlink(kRootIno, "f", false).ok());
  absl::Status committed = ns_->CommitReplica(plan.tasks[0]);
  EXPECT_EQ(absl::StatusCode::kAborted, committed.code()) << committed;
  std::vector<uint64_t> deletions = Beat(plan.tasks[0].target_server_id);
  EXPECT_NE(deletions.end(), std::find(deletions.begin(), deletions.end(), segment.id()));
}

TEST_F(NamespaceRereplicationTest, CopyOfASegmentWithAnotherLengthIsAborted) {
  // Goal: the compare step also checks the segment's sealed length (a
  // truncated and rewritten WAL file reuses no segment id, but a task
  // whose length no longer matches must not be recorded).
  RegisterServers(4);
  uint64_t f = File("f");
  Write(f, 100);
  std::set<uint64_t> live = {1, 2, 3, 4};
  live.erase(*Holders(f).begin());
  KillAllBut(live);
  RereplicationTask task = Plan().tasks.at(0);
  task.length = 99;
  EXPECT_EQ(absl::StatusCode::kAborted, ns_->CommitReplica(task).code());
  EXPECT_EQ(3u, Holders(f).size());  // unchanged: two live, one dead
}

TEST_F(NamespaceRereplicationTest, OpenAndUnreachableSegmentsAreNotPlanned) {
  // Goal: open segments belong to their writer; a segment with no live
  // replica has nothing to copy from.
  RegisterServers(4);
  uint64_t open_file = File("open");
  Write(open_file, 0, /*keep_open=*/true);
  std::set<uint64_t> holders = Holders(open_file);
  std::set<uint64_t> live = {1, 2, 3, 4};
  live.erase(*holders.begin());
  KillAllBut(live);
  RereplicationPlan plan = Plan();
  EXPECT_TRUE(plan.tasks.empty());
  EXPECT_EQ(1u, plan.census.open_segments);  // counted, not copied
  EXPECT_EQ(0u, plan.census.under_replicated_segments);
  // Every server dead: nothing planned either.
  KillAllBut({});
  EXPECT_TRUE(Plan().tasks.empty());
}

TEST_F(NamespaceRereplicationTest, DeadReplicasStayUntilEnoughLiveOnesAreListed) {
  // Goal: with two of three replicas dead, both copies are planned at once
  // to distinct servers, and the dead replicas leave the list only when
  // the second copy is recorded.
  RegisterServers(5);
  uint64_t f = File("f");
  Write(f, 10);
  std::set<uint64_t> holders = Holders(f);
  auto it = holders.begin();
  std::set<uint64_t> dead = {*it, *std::next(it)};
  std::set<uint64_t> live;
  for (uint64_t id = 1; id <= 5; ++id) {
    if (!dead.count(id)) live.insert(id);
  }
  KillAllBut(live);
  RereplicationPlan plan = Plan();
  ASSERT_EQ(2u, plan.tasks.size());
  EXPECT_NE(plan.tasks[0].target_server_id, plan.tasks[1].target_server_id);
  EXPECT_EQ(1u, plan.tasks[0].source_addresses.size());
  ASSERT_TRUE(ns_->CommitReplica(plan.tasks[0]).ok());
  EXPECT_EQ(4u, Holders(f).size());  // 2 live + 2 dead
  ASSERT_TRUE(ns_->CommitReplica(plan.tasks[1]).ok());
  EXPECT_EQ(live, Holders(f));
}

TEST_F(NamespaceRereplicationTest, PlanIsBoundedAndResumesAfterTheLastInode) {
  // Goal: bounded work per pass. With room for one task, the plan stops
  // after the first file and the next plan starts after it.
  RegisterServers(4);
  uint64_t a = File("a");
  Write(a, 1);
  uint64_t b = File("b");
  Write(b, 1);
  // Kill a server holding both files' segments (any of the three that
  // hold a's, if it also holds b's).
  uint64_t victim = 0;
  for (uint64_t id : Holders(a)) victim = Holders(b).count(id) ? id : victim;
  ASSERT_NE(0u, victim);
  std::set<uint64_t> live = {1, 2, 3, 4};
  live.erase(victim);
  KillAllBut(live);
  auto first = ns_->PlanRereplication(0, 1000, 1, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(1u, first->tasks.size());
  EXPECT_EQ(a, first->tasks[0].ino);
  EXPECT_EQ(a + 1, first->next_ino);
  auto second = ns_->PlanRereplication(first->next_ino, 1000, 1, 0);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(1u, second->tasks.size());
  EXPECT_EQ(b, second->tasks[0].ino);
}

TEST_F(NamespaceRereplicationTest, ListServersAndListSegments) {
  // Goal: the inspection calls show liveness, and pages of files cover the
  // namespace.
  RegisterServers(4);
  for (int i = 0; i < 5; ++i) Write(File("f" + std::to_string(i)), 10);
  KillAllBut({1, 2, 3});
  auto servers = ns_->ListServers(0);
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(4, servers->servers_size());
  EXPECT_TRUE(servers->servers(0).live());
  EXPECT_FALSE(servers->servers(3).live());
  EXPECT_EQ(kDeadServerMs + 1, servers->servers(3).heartbeat_age_ms());
  EXPECT_EQ("10.0.0.4:7000", servers->servers(3).address());
  // Pages of two inodes: the root (a directory) is not listed.
  std::set<uint64_t> files;
  uint64_t start = 0;
  for (int page = 0; page < 10; ++page) {
    auto listed = ns_->ListSegments(start, 2);
    ASSERT_TRUE(listed.ok()) << listed.status();
    for (const auto& file : listed->files()) {
      files.insert(file.attr().ino());
      EXPECT_EQ(3u, file.replication());
      ASSERT_EQ(1, file.segments_size());
      EXPECT_FALSE(file.segments(0).replicas(0).address().empty());
    }
    start = listed->next_ino();
    if (start == 0) break;
  }
  EXPECT_EQ(5u, files.size());
  EXPECT_EQ(0u, start);
}

}  // namespace
}  // namespace logfs::meta
