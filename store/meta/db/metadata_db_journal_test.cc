// MetadataDb with a replicated journal (docs/meta_ha.md "Journal"): every
// write is committed to the journal before it is applied, with its seq in
// the same batch; a standby applying the records ends up equal; a journal
// failure stops every later write; group commit (below). The journal here
// is a fake that keeps records in memory (internal/gated_journal.h); the
// meta HA tests in tests/ run the etcd one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/format/error_codec.h"
#include "tests/fakes/gated_journal.h"
#include "store/meta/db/metadata_db.h"

namespace logfs::meta {
namespace {

class MetadataDbJournalTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_metadb_journal_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    active_ = Open("active");
    standby_ = Open("standby");
    active_->SetJournal(&journal_);
  }
  void TearDown() override {
    active_.reset();
    standby_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::unique_ptr<MetadataDb> Open(const std::string& name) {
    auto db = MetadataDb::Open({dir_ + "/" + name});
    EXPECT_TRUE(db.ok()) << db.status();
    return db.ok() ? std::move(*db) : nullptr;
  }
  static proto::Inode Inode(uint64_t ino, uint64_t size) {
    proto::Inode inode;
    inode.mutable_attr()->set_ino(ino);
    inode.mutable_attr()->set_size(size);
    return inode;
  }
  absl::Status PutInode(uint64_t ino, uint64_t size) {
    MetadataDb::Batch batch;
    batch.PutInode(Inode(ino, size));
    return active_->Write(batch);
  }
  // Stages an inode on the active without waiting; its seq.
  uint64_t StageInode(uint64_t ino, uint64_t size) {
    MetadataDb::Batch batch;
    batch.PutInode(Inode(ino, size));
    auto seq = active_->Stage(batch);
    EXPECT_TRUE(seq.ok()) << seq.status();
    return seq.ok() ? *seq : 0;
  }
  static proto::DirEntry Entry(const std::string& name, uint64_t ino) {
    proto::DirEntry entry;
    entry.set_name(name);
    entry.set_ino(ino);
    return entry;
  }
  static std::vector<std::string> Names(const MetadataDb::DirPage& page) {
    std::vector<std::string> names;
    for (const auto& e : page.entries) names.push_back(e.name());
    return names;
  }

  std::string dir_;
  GatedJournal journal_;
  std::unique_ptr<MetadataDb> active_;
  std::unique_ptr<MetadataDb> standby_;
};

TEST_F(MetadataDbJournalTest, EveryWriteIsJournaledWithItsSeqWhichSurvivesAReopen) {
  ASSERT_TRUE(PutInode(10, 1).ok());
  ASSERT_TRUE(PutInode(11, 2).ok());
  ASSERT_EQ(2u, journal_.Records().size());
  EXPECT_EQ(1u, journal_.Records()[0].seq());
  EXPECT_EQ(2u, journal_.Records()[1].seq());
  EXPECT_EQ(2u, active_->applied_seq());

  active_.reset();
  active_ = Open("active");
  EXPECT_EQ(2u, active_->applied_seq());
  auto applied = active_->GetCounter(MetaCounter::kAppliedSeq);
  ASSERT_TRUE(applied.ok());
  EXPECT_EQ(2u, *applied);
}

TEST_F(MetadataDbJournalTest, AStandbyApplyingTheRecordsEndsUpWithTheSameState) {
  ASSERT_TRUE(PutInode(10, 1).ok());
  ASSERT_TRUE(PutInode(10, 5).ok());
  MetadataDb::Batch remove;
  remove.DeleteInode(10);
  remove.PutInode(Inode(12, 7));
  ASSERT_TRUE(active_->Write(remove).ok());

  for (const auto& record : journal_.Records()) {
    ASSERT_TRUE(standby_->ApplyJournalRecord(record).ok()) << record.seq();
  }
  EXPECT_EQ(3u, standby_->applied_seq());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetInode(10).status()));
  auto inode = standby_->GetInode(12);
  ASSERT_TRUE(inode.ok()) << inode.status();
  EXPECT_EQ(7u, inode->attr().size());
  // Applied twice: no effect.
  ASSERT_TRUE(standby_->ApplyJournalRecord(journal_.Records()[0]).ok());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetInode(10).status()));
  ASSERT_TRUE(standby_->SyncWal().ok());

  standby_.reset();
  standby_ = Open("standby");
  EXPECT_EQ(3u, standby_->applied_seq());
}

TEST_F(MetadataDbJournalTest, AGapOrAGarbageRecordIsRefusedAndAppliesNothing) {
  ASSERT_TRUE(PutInode(10, 1).ok());
  ASSERT_TRUE(PutInode(11, 1).ok());
  absl::Status gap = standby_->ApplyJournalRecord(journal_.Records()[1]);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, gap.code()) << gap;
  EXPECT_TRUE(absl::IsNotFound(standby_->GetInode(11).status()));

  proto::MetaJournalRecord garbage;
  garbage.set_seq(1);
  garbage.set_batch("not a rocksdb write batch at all");
  absl::Status bad = standby_->ApplyJournalRecord(garbage);
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.code()) << bad;
  garbage.set_batch("x");
  EXPECT_EQ(absl::StatusCode::kDataLoss, standby_->ApplyJournalRecord(garbage).code());
  EXPECT_EQ(0u, standby_->applied_seq());
}

TEST_F(MetadataDbJournalTest, AJournalFailureStopsEveryLaterWriteAndCallsTheHandlerOnce) {
  int handled = 0;
  active_->SetJournalFailureHandler([&](const absl::Status&) { ++handled; });
  ASSERT_TRUE(PutInode(10, 1).ok());
  journal_.Fail(absl::DeadlineExceededError("etcd did not answer"));
  absl::Status failed = PutInode(11, 1);
  EXPECT_TRUE(format::IsNotActiveMeta(failed)) << failed;
  EXPECT_TRUE(absl::IsNotFound(active_->GetInode(11).status()));
  EXPECT_EQ(1, handled);

  journal_.Fail(absl::OkStatus());
  const int appends = journal_.Appends();
  EXPECT_TRUE(format::IsNotActiveMeta(PutInode(12, 1)));
  EXPECT_EQ(appends, journal_.Appends());  // never asked again
  EXPECT_EQ(1, handled);
  EXPECT_EQ(1u, active_->applied_seq());
}

TEST_F(MetadataDbJournalTest, ARecordTooLargeForTheJournalFailsAloneAndWritesGoOn) {
  journal_.SetRecordBytesMax(10);  // an inode's batch is larger
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, PutInode(10, 1).code());
  EXPECT_EQ(0, journal_.Appends());  // refused before it was staged
  journal_.SetRecordBytesMax(1 << 20);
  ASSERT_TRUE(PutInode(11, 1).ok());
  EXPECT_EQ(1u, active_->applied_seq());
  EXPECT_EQ(1u, journal_.Records()[0].seq());
}

TEST_F(MetadataDbJournalTest, ExpiredCallRecordsAreDeletedThroughTheJournal) {
  MetadataDb::Batch batch;
  proto::CallId call;
  call.set_mount_id(3);
  call.set_seq(1);
  proto::CallRecord record;
  record.set_time_ns(100);
  batch.PutCallRecord(call, record);
  ASSERT_TRUE(active_->Write(batch).ok());
  auto deleted = active_->DeleteCallRecordsBefore(200);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(1u, *deleted);
  ASSERT_EQ(2u, journal_.Records().size());
  for (const auto& r : journal_.Records()) ASSERT_TRUE(standby_->ApplyJournalRecord(r).ok());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetCallRecord(call).status()));
}

// ---- group commit (store/meta/db/metadata_db.h): a staged change is visible
// to the latest view at once and to the durable view only once its group
// is written; concurrent writers share groups, one journal append each, in
// seq order; a failed group fails every change staged after it.

TEST_F(MetadataDbJournalTest, AStagedChangeIsLatestAtOnceAndDurableOnlyOnceWritten) {
  using View = MetadataDb::View;
  MetadataDb::Batch first;
  first.PutInode(Inode(10, 1));
  first.PutDirEntry(1, Entry("a", 10));
  first.PutDirEntry(1, Entry("c", 12));
  ASSERT_TRUE(active_->Write(first).ok());

  MetadataDb::Batch second;
  second.PutInode(Inode(10, 5));
  second.PutInode(Inode(11, 2));
  second.DeleteDirEntry(1, "a");
  second.PutDirEntry(1, Entry("b", 11));
  auto seq = active_->Stage(second);
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(2u, *seq);
  EXPECT_EQ(2u, active_->staged_seq());
  EXPECT_EQ(1u, active_->applied_seq());

  // Latest: the staged change, deletions included, merged into scans.
  auto latest = active_->GetInode(10, View::kLatest);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(5u, latest->attr().size());
  EXPECT_TRUE(active_->GetInode(11, View::kLatest).ok());
  EXPECT_TRUE(absl::IsNotFound(active_->GetDirEntry(1, "a", View::kLatest).status()));
  auto page = active_->ListDir(1, "", 100, 1 << 20, View::kLatest);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ((std::vector<std::string>{"b", "c"}), Names(*page));
  auto applied = active_->GetCounter(MetaCounter::kAppliedSeq);  // latest
  ASSERT_TRUE(applied.ok());
  EXPECT_EQ(2u, *applied);

  // Durable: as before the change.
  auto durable = active_->GetInode(10, View::kDurable);
  ASSERT_TRUE(durable.ok()) << durable.status();
  EXPECT_EQ(1u, durable->attr().size());
  EXPECT_TRUE(absl::IsNotFound(active_->GetInode(11, View::kDurable).status()));
  EXPECT_TRUE(active_->GetDirEntry(1, "a", View::kDurable).ok());
  page = active_->ListDir(1, "", 100, 1 << 20, View::kDurable);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ((std::vector<std::string>{"a", "c"}), Names(*page));

  ASSERT_TRUE(active_->WaitDurable(*seq).ok());
  EXPECT_EQ(2u, active_->applied_seq());
  durable = active_->GetInode(10, View::kDurable);
  ASSERT_TRUE(durable.ok());
  EXPECT_EQ(5u, durable->attr().size());
  page = active_->ListDir(1, "", 100, 1 << 20, View::kDurable);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((std::vector<std::string>{"b", "c"}), Names(*page));

  // And on disk: a reopen sees it, with its seq.
  active_.reset();
  active_ = Open("active");
  EXPECT_EQ(2u, active_->applied_seq());
  EXPECT_TRUE(active_->GetInode(11, View::kDurable).ok());
}

TEST_F(MetadataDbJournalTest, ChangesStagedWhileAGroupIsWrittenFormTheNextGroup) {
  journal_.Hold(true);
  const uint64_t first = StageInode(10, 1);
  std::thread leader([&] { EXPECT_TRUE(active_->WaitDurable(first).ok()); });
  journal_.AwaitHeldAppend();
  // Group 1 (change 1) is in the journal's hands; these three wait, and
  // are still visible to the latest view.
  const uint64_t second = StageInode(11, 1);
  StageInode(12, 1);
  const uint64_t fourth = StageInode(13, 1);
  EXPECT_TRUE(active_->GetInode(13).ok());
  EXPECT_TRUE(absl::IsNotFound(active_->GetInode(13, MetadataDb::View::kDurable).status()));
  std::thread follower([&] { EXPECT_TRUE(active_->WaitDurable(second).ok()); });
  journal_.Hold(false);
  leader.join();
  follower.join();
  ASSERT_TRUE(active_->WaitDurable(fourth).ok());
  EXPECT_EQ(4u, active_->applied_seq());
  const MetadataDb::GroupCommitStats stats = active_->group_commit_stats();
  EXPECT_EQ(2u, stats.groups);
  EXPECT_EQ(4u, stats.changes);
  EXPECT_EQ((std::vector<size_t>{1, 3}), journal_.GroupSizes());
  const auto records = journal_.Records();
  ASSERT_EQ(4u, records.size());
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(i + 1, records[i].seq());
}

TEST_F(MetadataDbJournalTest, ConcurrentWritersShareGroupsAndAStandbyEndsUpEqual) {
  constexpr int kThreads = 16;
  constexpr int kWritesEach = 40;
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWritesEach; ++i) {
        MetadataDb::Batch batch;
        const uint64_t ino = 100 + t * kWritesEach + i;
        batch.PutInode(Inode(ino, ino));
        if (!active_->Write(batch).ok()) ++failed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(0, failed.load());
  constexpr uint64_t kChanges = kThreads * kWritesEach;
  EXPECT_EQ(kChanges, active_->applied_seq());
  const MetadataDb::GroupCommitStats stats = active_->group_commit_stats();
  EXPECT_EQ(kChanges, stats.changes);
  EXPECT_LE(stats.groups, kChanges);

  const auto records = journal_.Records();
  ASSERT_EQ(kChanges, records.size());
  for (uint64_t i = 0; i < kChanges; ++i) {
    ASSERT_EQ(i + 1, records[i].seq());
    ASSERT_TRUE(standby_->ApplyJournalRecord(records[i]).ok());
  }
  for (uint64_t ino = 100; ino < 100 + kChanges; ++ino) {
    auto inode = standby_->GetInode(ino);
    ASSERT_TRUE(inode.ok()) << ino;
    EXPECT_EQ(ino, inode->attr().size());
  }
}

TEST_F(MetadataDbJournalTest, AFailedGroupFailsItsChangesEveryLaterOneAndWritesNothing) {
  int handled = 0;
  active_->SetJournalFailureHandler([&](const absl::Status&) { ++handled; });
  ASSERT_TRUE(active_->WaitDurable(StageInode(10, 1)).ok());

  journal_.Hold(true);
  const uint64_t doomed = StageInode(11, 1);
  absl::Status leader_status;
  std::thread leader([&] { leader_status = active_->WaitDurable(doomed); });
  journal_.AwaitHeldAppend();
  // Decided on top of the doomed change: fails with it.
  const uint64_t after = StageInode(12, 1);
  journal_.Fail(absl::DeadlineExceededError("etcd did not answer"));
  journal_.Hold(false);
  leader.join();
  EXPECT_TRUE(format::IsNotActiveMeta(leader_status)) << leader_status;
  absl::Status after_status = active_->WaitDurable(after);
  EXPECT_TRUE(format::IsNotActiveMeta(after_status)) << after_status;
  EXPECT_EQ(1, handled);
  EXPECT_EQ(1u, active_->applied_seq());
  MetadataDb::Batch later;
  later.PutInode(Inode(13, 1));
  EXPECT_TRUE(format::IsNotActiveMeta(active_->Stage(later).status()));
  // Nothing of the failed group reached RocksDB.
  for (uint64_t ino : {11, 12, 13}) {
    EXPECT_TRUE(absl::IsNotFound(active_->GetInode(ino, MetadataDb::View::kDurable).status()))
        << ino;
  }
  active_.reset();
  active_ = Open("active");
  EXPECT_EQ(1u, active_->applied_seq());
  EXPECT_TRUE(absl::IsNotFound(active_->GetInode(11).status()));
}

}  // namespace
}  // namespace logfs::meta
