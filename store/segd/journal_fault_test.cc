// Journal on a FaultFileSystem: a failed fdatasync or write fails the
// journal for good (fsyncgate: never retried), a full disk while it grows
// fails one append and nothing else, and a crash that drops every unsynced
// byte, or tears a write, replays exactly the records whose Sync returned
// OK.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "store/segd/journal.h"
#include "tests/fakes/fault_file_system.h"

namespace logfs::segd {
namespace {

using Record = std::pair<uint64_t, std::string>;  // segment id, data

const std::string kJournalPart = std::string("/") + kJournalFileName;

class JournalFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-jfault-XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    options_.dir = tmpl;
    options_.journal_bytes = 1u << 20;
    options_.file_system = &fs_;
  }
  void TearDown() override {
    journal_.reset();
    std::filesystem::remove_all(options_.dir);
  }
  // Closes and reopens the journal (on the same fake), restarts it and
  // returns the records replayed.
  std::vector<Record> Reopen() {
    journal_.reset();
    std::vector<Record> replayed;
    auto journal = Journal::Open(options_, [&](const JournalRecord& r) {
      replayed.emplace_back(r.segment_id, std::string(r.data));
      return absl::OkStatus();
    });
    EXPECT_TRUE(journal.ok()) << journal.status();
    if (!journal.ok()) return replayed;
    journal_ = std::move(*journal);
    absl::Status restarted = journal_->Restart();
    EXPECT_TRUE(restarted.ok()) << restarted;
    return replayed;
  }
  // Adds and syncs `n` records of `bytes` bytes, ids from `first_id`.
  std::vector<Record> AddSynced(int n, size_t bytes, uint64_t first_id) {
    std::vector<Record> records;
    for (int i = 0; i < n; ++i) {
      records.emplace_back(first_id + i, std::string(bytes, static_cast<char>('a' + i % 26)));
      EXPECT_TRUE(journal_->Add(records.back().first, 0, records.back().second).ok());
    }
    EXPECT_TRUE(journal_->Sync().ok());
    return records;
  }

  testing::FaultFileSystem fs_;
  JournalOptions options_;
  std::unique_ptr<Journal> journal_;
};

TEST_F(JournalFaultTest, FailedSyncIsStickyAndNeverRetried) {
  // Goal: after one fdatasync fails, every Add and Sync fails with the
  // same kDataLoss, even once the disk works again, and the journal never
  // calls fdatasync again (a later success would prove nothing).
  // (a) a healthy round; (b) the failing round; (c) the disk "recovers".
  Reopen();
  AddSynced(3, 100, 1);
  EXPECT_TRUE(journal_->failure().ok());

  fs_.FailSyncs(kJournalPart);
  ASSERT_TRUE(journal_->Add(10, 0, "lost").ok());
  absl::Status failed = journal_->Sync();
  EXPECT_EQ(absl::StatusCode::kDataLoss, failed.code()) << failed;
  EXPECT_EQ(1u, fs_.faults_injected());

  fs_.ClearFaults();
  const uint64_t syncs_before = fs_.file_syncs(kJournalPart);
  EXPECT_EQ(failed, journal_->Add(11, 0, "later"));
  EXPECT_EQ(failed, journal_->Sync());
  EXPECT_EQ(failed, journal_->failure());
  EXPECT_EQ(syncs_before, fs_.file_syncs(kJournalPart));
  EXPECT_EQ(1u, fs_.faults_injected());
}

TEST_F(JournalFaultTest, FailedWriteFailsTheJournal) {
  Reopen();
  AddSynced(2, 100, 1);
  fs_.FailWrites(EIO, kJournalPart);
  ASSERT_TRUE(journal_->Add(3, 0, "x").ok());  // staged in memory only
  EXPECT_EQ(absl::StatusCode::kDataLoss, journal_->Sync().code());
  fs_.ClearFaults();
  EXPECT_EQ(absl::StatusCode::kDataLoss, journal_->Add(4, 0, "y").code());
}

TEST_F(JournalFaultTest, CrashDropsTheUnsyncedRoundAndKeepsEverySyncedRecord) {
  // Goal: what a failed Sync wrote (unsynced bytes in the page cache) is
  // gone after a crash; every record of an OK Sync is replayed, in order.
  // (a) rounds that straddle blocks; (b) a round whose fdatasync fails
  // after its write landed; (c) crash and replay.
  Reopen();
  std::vector<Record> synced = AddSynced(5, 3000, 1);
  std::vector<Record> more = AddSynced(7, 777, 100);
  synced.insert(synced.end(), more.begin(), more.end());
  fs_.FailSyncs(kJournalPart);
  ASSERT_TRUE(journal_->Add(999, 0, std::string(5000, 'z')).ok());
  ASSERT_FALSE(journal_->Sync().ok());
  fs_.ClearFaults();

  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ(synced, Reopen());
}

TEST_F(JournalFaultTest, TornWriteEndsReplayBeforeTheTornRecord) {
  // Goal: a power cut in the middle of a journal write leaves a prefix of
  // it on disk; replay returns every record synced before it, and of the
  // torn round only the records wholly inside the prefix, never a part of
  // one, wherever the tear falls. Records sit back to back from offset 0:
  // three synced ones end at 3 * (40 + 1500) = 4620, so the torn round's
  // write starts at the block boundary 4096 (rewriting 524 synced bytes),
  // record 50 spans [4620, 10660) and record 51 [10660, 10800).
  constexpr uint64_t kWriteStart = 4096;
  constexpr uint64_t kEnd50 = 10660;
  constexpr uint64_t kEnd51 = 10800;
  // In the rewritten synced bytes, record 50's header, its data, exactly
  // at its end, in record 51's header and in its data.
  for (size_t prefix : {0, 100, 548, 4096, 6564, 6600, 6700}) {
    SCOPED_TRACE(prefix);
    Reopen();
    std::vector<Record> expected = AddSynced(3, 1500, 1);
    const Record r50{50, std::string(6000, 'T')};
    const Record r51{51, std::string(100, 'U')};
    ASSERT_TRUE(journal_->Add(r50.first, 0, r50.second).ok());
    ASSERT_TRUE(journal_->Add(r51.first, 0, r51.second).ok());
    fs_.TearNextWrite(kJournalPart, prefix);
    ASSERT_FALSE(journal_->Sync().ok());
    ASSERT_TRUE(fs_.SimulateCrash().ok());
    if (kWriteStart + prefix >= kEnd50) expected.push_back(r50);
    if (kWriteStart + prefix >= kEnd51) expected.push_back(r51);
    EXPECT_EQ(expected, Reopen());
  }
}

TEST_F(JournalFaultTest, FullDiskWhileGrowingFailsOneAddAndLosesNothing) {
  // Goal: a journal that was not preallocated reserves blocks as it grows;
  // ENOSPC there is kResourceExhausted for that append only (the journal
  // stays usable) and every record synced before or after survives a crash.
  options_.preallocate = false;
  Reopen();
  std::vector<Record> synced = AddSynced(3, 1000, 1);
  fs_.FailWrites(ENOSPC, kJournalPart);
  absl::Status full = journal_->Add(9, 0, std::string(8000, 'f'));
  EXPECT_EQ(absl::StatusCode::kResourceExhausted, full.code()) << full;
  fs_.ClearFaults();
  EXPECT_TRUE(journal_->failure().ok());
  std::vector<Record> more = AddSynced(2, 8000, 20);
  synced.insert(synced.end(), more.begin(), more.end());
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ(synced, Reopen());
}

}  // namespace
}  // namespace logfs::segd
