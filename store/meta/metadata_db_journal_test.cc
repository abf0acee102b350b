// MetadataDb with a replicated journal (docs/meta_ha.md "Journal"): every
// write is committed to the journal before it is applied, with its seq in
// the same batch; a standby applying the records ends up equal; a journal
// failure stops every later write. The journal here is a fake that keeps
// records in memory; tests/meta_ha_test.cc runs the etcd one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "store/format/error_codec.h"
#include "store/meta/metadata_db.h"

namespace logfs::meta {
namespace {

// Keeps what is appended; fails with `fail_with` while it is set.
class MemoryJournal : public MetaJournal {
 public:
  absl::Status Append(uint64_t first_seq, absl::Span<const std::string> batches) override {
    ++appends;
    if (!fail_with.ok()) return fail_with;
    for (const std::string& batch : batches) {
      proto::MetaJournalRecord record;
      record.set_seq(first_seq++);
      record.set_batch(batch);
      records.push_back(std::move(record));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<proto::MetaJournalRecord>> Read(uint64_t from,
                                                             size_t max_records) override {
    std::vector<proto::MetaJournalRecord> out;
    for (const auto& r : records) {
      if (r.seq() >= from && out.size() < max_records) out.push_back(r);
    }
    return out;
  }
  absl::Status Trim(uint64_t through) override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> TrimmedThrough() override { return 0; }
  size_t RecordBytesMax() const override { return record_bytes_max; }

  std::vector<proto::MetaJournalRecord> records;
  absl::Status fail_with;
  int appends = 0;
  size_t record_bytes_max = 1 << 20;
};

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

  std::string dir_;
  MemoryJournal journal_;
  std::unique_ptr<MetadataDb> active_;
  std::unique_ptr<MetadataDb> standby_;
};

TEST_F(MetadataDbJournalTest, EveryWriteIsJournaledWithItsSeqWhichSurvivesAReopen) {
  ASSERT_TRUE(PutInode(10, 1).ok());
  ASSERT_TRUE(PutInode(11, 2).ok());
  ASSERT_EQ(2u, journal_.records.size());
  EXPECT_EQ(1u, journal_.records[0].seq());
  EXPECT_EQ(2u, journal_.records[1].seq());
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

  for (const auto& record : journal_.records) {
    ASSERT_TRUE(standby_->ApplyJournalRecord(record).ok()) << record.seq();
  }
  EXPECT_EQ(3u, standby_->applied_seq());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetInode(10).status()));
  auto inode = standby_->GetInode(12);
  ASSERT_TRUE(inode.ok()) << inode.status();
  EXPECT_EQ(7u, inode->attr().size());
  // Applied twice: no effect.
  ASSERT_TRUE(standby_->ApplyJournalRecord(journal_.records[0]).ok());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetInode(10).status()));
  ASSERT_TRUE(standby_->SyncWal().ok());

  standby_.reset();
  standby_ = Open("standby");
  EXPECT_EQ(3u, standby_->applied_seq());
}

TEST_F(MetadataDbJournalTest, AGapOrAGarbageRecordIsRefusedAndAppliesNothing) {
  ASSERT_TRUE(PutInode(10, 1).ok());
  ASSERT_TRUE(PutInode(11, 1).ok());
  absl::Status gap = standby_->ApplyJournalRecord(journal_.records[1]);
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
  journal_.fail_with = absl::DeadlineExceededError("etcd did not answer");
  absl::Status failed = PutInode(11, 1);
  EXPECT_TRUE(format::IsNotActiveMeta(failed)) << failed;
  EXPECT_TRUE(absl::IsNotFound(active_->GetInode(11).status()));
  EXPECT_EQ(1, handled);

  journal_.fail_with = absl::OkStatus();
  const int appends = journal_.appends;
  EXPECT_TRUE(format::IsNotActiveMeta(PutInode(12, 1)));
  EXPECT_EQ(appends, journal_.appends);  // never asked again
  EXPECT_EQ(1, handled);
  EXPECT_EQ(1u, active_->applied_seq());
}

TEST_F(MetadataDbJournalTest, ARecordTooLargeForTheJournalFailsAloneAndWritesGoOn) {
  journal_.record_bytes_max = 10;  // an inode's batch is larger
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, PutInode(10, 1).code());
  EXPECT_EQ(0, journal_.appends);  // refused before it was staged
  journal_.record_bytes_max = 1 << 20;
  ASSERT_TRUE(PutInode(11, 1).ok());
  EXPECT_EQ(1u, active_->applied_seq());
  EXPECT_EQ(1u, journal_.records[0].seq());
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
  ASSERT_EQ(2u, journal_.records.size());
  for (const auto& r : journal_.records) ASSERT_TRUE(standby_->ApplyJournalRecord(r).ok());
  EXPECT_TRUE(absl::IsNotFound(standby_->GetCallRecord(call).status()));
}

}  // namespace
}  // namespace logfs::meta
