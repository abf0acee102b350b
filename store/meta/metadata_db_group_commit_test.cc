// MetadataDb's group commit (store/meta/metadata_db.h): a staged change is
// visible to the latest view at once and to the durable view only once its
// group is written; concurrent writers share groups, each group one journal
// append in seq order; a failed group fails every change staged after it.
// The journal is a fake whose Append can be held; the database is a real
// RocksDB in a temp dir.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/format/error_codec.h"
#include "store/meta/internal/gated_journal.h"
#include "store/meta/metadata_db.h"

namespace logfs::meta {
namespace {

class MetadataDbGroupCommitTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_metadb_group_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    db_ = Open("db");
  }
  void TearDown() override {
    db_.reset();
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
  static proto::DirEntry Entry(const std::string& name, uint64_t ino) {
    proto::DirEntry entry;
    entry.set_name(name);
    entry.set_ino(ino);
    return entry;
  }
  uint64_t StageInode(uint64_t ino, uint64_t size) {
    MetadataDb::Batch batch;
    batch.PutInode(Inode(ino, size));
    auto seq = db_->Stage(batch);
    EXPECT_TRUE(seq.ok()) << seq.status();
    return seq.ok() ? *seq : 0;
  }
  static std::vector<std::string> Names(const MetadataDb::DirPage& page) {
    std::vector<std::string> names;
    for (const auto& e : page.entries) names.push_back(e.name());
    return names;
  }

  std::string dir_;
  std::unique_ptr<MetadataDb> db_;
};

TEST_F(MetadataDbGroupCommitTest, AStagedChangeIsLatestAtOnceAndDurableOnlyOnceWritten) {
  using View = MetadataDb::View;
  MetadataDb::Batch first;
  first.PutInode(Inode(10, 1));
  first.PutDirEntry(1, Entry("a", 10));
  first.PutDirEntry(1, Entry("c", 12));
  ASSERT_TRUE(db_->Write(first).ok());

  MetadataDb::Batch second;
  second.PutInode(Inode(10, 5));
  second.PutInode(Inode(11, 2));
  second.DeleteDirEntry(1, "a");
  second.PutDirEntry(1, Entry("b", 11));
  auto seq = db_->Stage(second);
  ASSERT_TRUE(seq.ok()) << seq.status();
  EXPECT_EQ(2u, *seq);
  EXPECT_EQ(2u, db_->staged_seq());
  EXPECT_EQ(1u, db_->applied_seq());

  // Latest: the staged change, deletions included, merged into scans.
  auto latest = db_->GetInode(10, View::kLatest);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(5u, latest->attr().size());
  EXPECT_TRUE(db_->GetInode(11, View::kLatest).ok());
  EXPECT_TRUE(absl::IsNotFound(db_->GetDirEntry(1, "a", View::kLatest).status()));
  auto page = db_->ListDir(1, "", 100, 1 << 20, View::kLatest);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ((std::vector<std::string>{"b", "c"}), Names(*page));
  auto applied = db_->GetCounter(MetaCounter::kAppliedSeq);  // latest
  ASSERT_TRUE(applied.ok());
  EXPECT_EQ(2u, *applied);

  // Durable: as before the change.
  auto durable = db_->GetInode(10, View::kDurable);
  ASSERT_TRUE(durable.ok()) << durable.status();
  EXPECT_EQ(1u, durable->attr().size());
  EXPECT_TRUE(absl::IsNotFound(db_->GetInode(11, View::kDurable).status()));
  EXPECT_TRUE(db_->GetDirEntry(1, "a", View::kDurable).ok());
  page = db_->ListDir(1, "", 100, 1 << 20, View::kDurable);
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ((std::vector<std::string>{"a", "c"}), Names(*page));

  ASSERT_TRUE(db_->WaitDurable(*seq).ok());
  EXPECT_EQ(2u, db_->applied_seq());
  durable = db_->GetInode(10, View::kDurable);
  ASSERT_TRUE(durable.ok());
  EXPECT_EQ(5u, durable->attr().size());
  page = db_->ListDir(1, "", 100, 1 << 20, View::kDurable);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((std::vector<std::string>{"b", "c"}), Names(*page));

  // And on disk: a reopen sees it, with its seq.
  db_.reset();
  db_ = Open("db");
  EXPECT_EQ(2u, db_->applied_seq());
  EXPECT_TRUE(db_->GetInode(11, View::kDurable).ok());
}

TEST_F(MetadataDbGroupCommitTest, ChangesStagedWhileAGroupIsWrittenFormTheNextGroup) {
  GatedJournal journal;
  db_->SetJournal(&journal);
  journal.Hold(true);
  const uint64_t first = StageInode(10, 1);
  std::thread leader([&] { EXPECT_TRUE(db_->WaitDurable(first).ok()); });
  journal.AwaitHeldAppend();
  // Group 1 (change 1) is in the journal's hands; these three wait, and
  // are still visible to the latest view.
  const uint64_t second = StageInode(11, 1);
  StageInode(12, 1);
  const uint64_t fourth = StageInode(13, 1);
  EXPECT_TRUE(db_->GetInode(13).ok());
  EXPECT_TRUE(absl::IsNotFound(db_->GetInode(13, MetadataDb::View::kDurable).status()));
  std::thread follower([&] { EXPECT_TRUE(db_->WaitDurable(second).ok()); });
  journal.Hold(false);
  leader.join();
  follower.join();
  ASSERT_TRUE(db_->WaitDurable(fourth).ok());
  EXPECT_EQ(4u, db_->applied_seq());
  const MetadataDb::GroupCommitStats stats = db_->group_commit_stats();
  EXPECT_EQ(2u, stats.groups);
  EXPECT_EQ(4u, stats.changes);
  absl::MutexLock lock(&journal.mu);
  EXPECT_EQ((std::vector<size_t>{1, 3}), journal.group_sizes);
  ASSERT_EQ(4u, journal.records.size());
  for (uint64_t i = 0; i < 4; ++i) EXPECT_EQ(i + 1, journal.records[i].seq());
}

TEST_F(MetadataDbGroupCommitTest, ConcurrentWritersShareGroupsAndAStandbyEndsUpEqual) {
  GatedJournal journal;
  db_->SetJournal(&journal);
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
        if (!db_->Write(batch).ok()) ++failed;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(0, failed.load());
  constexpr uint64_t kChanges = kThreads * kWritesEach;
  EXPECT_EQ(kChanges, db_->applied_seq());
  const MetadataDb::GroupCommitStats stats = db_->group_commit_stats();
  EXPECT_EQ(kChanges, stats.changes);
  EXPECT_LE(stats.groups, kChanges);

  std::unique_ptr<MetadataDb> standby = Open("standby");
  absl::MutexLock lock(&journal.mu);
  ASSERT_EQ(kChanges, journal.records.size());
  for (uint64_t i = 0; i < kChanges; ++i) {
    ASSERT_EQ(i + 1, journal.records[i].seq());
    ASSERT_TRUE(standby->ApplyJournalRecord(journal.records[i]).ok());
  }
  for (uint64_t ino = 100; ino < 100 + kChanges; ++ino) {
    auto inode = standby->GetInode(ino);
    ASSERT_TRUE(inode.ok()) << ino;
    EXPECT_EQ(ino, inode->attr().size());
  }
}

TEST_F(MetadataDbGroupCommitTest, AFailedGroupFailsItsChangesEveryLaterOneAndWritesNothing) {
  GatedJournal journal;
  db_->SetJournal(&journal);
  int handled = 0;
  db_->SetJournalFailureHandler([&](const absl::Status&) { ++handled; });
  ASSERT_TRUE(db_->WaitDurable(StageInode(10, 1)).ok());

  journal.Hold(true);
  const uint64_t doomed = StageInode(11, 1);
  absl::Status leader_status;
  std::thread leader([&] { leader_status = db_->WaitDurable(doomed); });
  journal.AwaitHeldAppend();
  // Decided on top of the doomed change: fails with it.
  const uint64_t after = StageInode(12, 1);
  {
    absl::MutexLock lock(&journal.mu);
    journal.fail_with = absl::DeadlineExceededError("etcd did not answer");
  }
  journal.Hold(false);
  leader.join();
  EXPECT_TRUE(format::IsNotActiveMeta(leader_status)) << leader_status;
  absl::Status after_status = db_->WaitDurable(after);
  EXPECT_TRUE(format::IsNotActiveMeta(after_status)) << after_status;
  EXPECT_EQ(1, handled);
  EXPECT_EQ(1u, db_->applied_seq());
  MetadataDb::Batch later;
  later.PutInode(Inode(13, 1));
  EXPECT_TRUE(format::IsNotActiveMeta(db_->Stage(later).status()));
  // Nothing of the failed group reached RocksDB.
  for (uint64_t ino : {11, 12, 13}) {
    EXPECT_TRUE(absl::IsNotFound(db_->GetInode(ino, MetadataDb::View::kDurable).status())) << ino;
  }
  db_.reset();
  db_ = Open("db");
  EXPECT_EQ(1u, db_->applied_seq());
  EXPECT_TRUE(absl::IsNotFound(db_->GetInode(11).status()));
}

}  // namespace
}  // namespace logfs::meta
