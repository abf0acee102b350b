// ReplicaStore on a FaultFileSystem: a crash that drops every unsynced
// byte, then reopen (journal replay) on the same disk, keeps every acked
// append and never serves bytes past a torn record; a failed journal sync
// fails every replica of its round and every later append, for good; a
// full disk fails the append with kResourceExhausted and loses nothing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <string>

#include "src/util/crc32c.h"
#include "store/format/limits.h"
#include "store/segd/journal.h"
#include "store/segd/replica_files.h"
#include "store/segd/replica_store.h"
#include "tests/fakes/fault_file_system.h"

namespace logfs::segd {
namespace {

const std::string kJournalPart = std::string("/") + kJournalFileName;

uint32_t Crc(const std::string& s) { return util::Crc32c(s.data(), s.size()); }

// `n` bytes that differ with `seed` and position, so a misplaced or stale
// byte shows.
std::string Bytes(size_t n, int seed) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>('a' + (i * 7 + seed * 13) % 26);
  return out;
}

class ReplicaStoreFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-rsfault-XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    ReplicaStoreOptions options{dir_ + "/data", 1u << 20};
    options.file_system = &fs_;
    auto store = ReplicaStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  // Appends to `id` at its current length as this test knows it.
  absl::Status Append(uint64_t id, const std::string& data) {
    auto info = store_->Append(id, 1, written_[id].size(), data, Crc(data));
    if (info.ok()) written_[id] += data;
    return info.status();
  }
  // One sync round; afterwards every append so far counts as acked.
  void SyncRound() {
    store_->SyncDirty();
    for (const auto& [id, data] : written_) {
      auto info = store_->Info(id);
      ASSERT_TRUE(info.ok()) << info.status();
      ASSERT_EQ(data.size(), info->durable_length);
      acked_[id] = data;
    }
  }
  std::string ReadAll(uint64_t id) {
    std::string out;
    for (int reads = 0; reads < 1000; ++reads) {
      auto read = store_->Read(id, out.size(), format::kReadBytesMax);
      EXPECT_TRUE(read.ok()) << read.status();
      if (!read.ok() || read->data.empty()) break;
      out += read->data;
    }
    return out;
  }
  // After a crash and reopen: each replica holds at least what was acked,
  // and nothing but a prefix of what was written to it.
  void ExpectAckedKeptAndNothingElse(bool exactly_acked) {
    for (const auto& [id, acked] : acked_) {
      SCOPED_TRACE(id);
      const std::string have = ReadAll(id);
      ASSERT_GE(have.size(), acked.size());
      EXPECT_EQ(acked, have.substr(0, acked.size()));
      EXPECT_EQ(written_[id].substr(0, have.size()), have);
      if (exactly_acked) {
        EXPECT_EQ(acked.size(), have.size());
      }
    }
  }

  testing::FaultFileSystem fs_;
  std::string dir_;
  std::unique_ptr<ReplicaStore> store_;
  std::map<uint64_t, std::string> written_;  // what each Append that returned OK wrote
  std::map<uint64_t, std::string> acked_;    // covered by a sync round
};

TEST_F(ReplicaStoreFaultTest, CrashThenReplayKeepsEveryAckedAppend) {
  // Goal: appends acked only through the journal (the replica files are
  // not synced until a checkpoint or seal) survive a power cut that drops
  // every unsynced byte of every file; unacked ones vanish whole.
  // (a) three replicas, rounds of appends of odd sizes across 64 KiB CRC
  // chunks; (b) more appends with no round; (c) crash, reopen, compare.
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(store_->Create(id, 1).ok());
  int seed = 0;
  for (int round = 0; round < 4; ++round) {
    for (uint64_t id : {1, 2, 3}) {
      ASSERT_TRUE(Append(id, Bytes(1000 + 23456 * round + 77 * id, ++seed)).ok());
    }
    SyncRound();
  }
  for (uint64_t id : {1, 2}) ASSERT_TRUE(Append(id, Bytes(5000, ++seed)).ok());

  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  ExpectAckedKeptAndNothingElse(/*exactly_acked=*/true);
  // The store works on: the next append goes where the acked bytes end.
  ASSERT_TRUE(store_->Append(1, 1, acked_[1].size(), "more", Crc("more")).ok());
}

TEST_F(ReplicaStoreFaultTest, TornJournalWriteIsNeverServedAfterReplay) {
  // Goal: a power cut in the middle of the journal write of a round leaves
  // a torn record; replay stops before it, so after reopen each replica
  // has exactly its acked bytes: nothing from the torn round, whole or in
  // part. (a) three acked rounds of two records, 2 * (40 + 3000 + 500 r)
  // bytes each, ending at 21240; (b) a round whose journal write (from the
  // block boundary 20480) is torn 3000 bytes in, inside its first record
  // [21240, 27280); (c) crash, reopen, compare.
  for (uint64_t id : {1, 2}) ASSERT_TRUE(store_->Create(id, 1).ok());
  for (int round = 0; round < 3; ++round) {
    for (uint64_t id : {1, 2}) ASSERT_TRUE(Append(id, Bytes(3000 + 500 * round, round)).ok());
    SyncRound();
  }
  ASSERT_TRUE(Append(1, Bytes(6000, 8)).ok());
  ASSERT_TRUE(Append(2, Bytes(6000, 9)).ok());
  fs_.TearNextWrite(kJournalPart, 3000);
  EXPECT_EQ(1, store_->SyncDirty());
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Info(1).status().code());

  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  ExpectAckedKeptAndNothingElse(/*exactly_acked=*/true);
}

TEST_F(ReplicaStoreFaultTest, FailedJournalSyncFailsTheRoundAndEveryLaterAppend) {
  // Goal: fsyncgate. A failed journal fdatasync fails every replica whose
  // bytes rode in that round, every later append to any replica (old or
  // created afterwards), and the store's health; it is never retried,
  // even after the disk works again.
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(store_->Create(id, 1).ok());
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(Append(id, Bytes(100, 1)).ok());
  SyncRound();
  ASSERT_TRUE(store_->Health().ok());

  ASSERT_TRUE(Append(1, Bytes(100, 2)).ok());
  ASSERT_TRUE(Append(2, Bytes(100, 3)).ok());
  fs_.FailSyncs(kJournalPart);
  store_->SyncDirty();
  fs_.ClearFaults();
  const uint64_t journal_syncs = fs_.file_syncs(kJournalPart);

  for (uint64_t id : {1, 2})
    EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Info(id).status().code());
  EXPECT_EQ(absl::StatusCode::kDataLoss, Append(3, Bytes(100, 4)).code());
  ASSERT_TRUE(store_->Create(4, 1).ok());
  EXPECT_EQ(absl::StatusCode::kDataLoss, Append(4, Bytes(100, 5)).code());
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Health().code());
  store_->SyncDirty();
  EXPECT_EQ(journal_syncs, fs_.file_syncs(kJournalPart));
  // Replica 3's append was rolled back, so its acked bytes are still whole.
  EXPECT_EQ(acked_[3], ReadAll(3));

  // A restart (reopen and replay) is the way back.
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  EXPECT_TRUE(store_->Health().ok());
  ExpectAckedKeptAndNothingElse(/*exactly_acked=*/false);
}

TEST_F(ReplicaStoreFaultTest, FullDiskIsResourceExhaustedAndLosesNothingAcked) {
  // Goal: ENOSPC writing a replica file is kResourceExhausted for that
  // append, leaves no half-written bytes, fails nothing else, and every
  // acked byte survives a crash.
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, Bytes(70000, 1)).ok());
  SyncRound();
  fs_.FailWrites(ENOSPC, kSegmentFileSuffix);
  absl::Status full = Append(1, Bytes(5000, 2));
  EXPECT_EQ(absl::StatusCode::kResourceExhausted, full.code()) << full;
  auto info = store_->Info(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(acked_[1].size(), info->length);
  EXPECT_TRUE(store_->Health().ok());
  fs_.ClearFaults();
  ASSERT_TRUE(Append(1, Bytes(5000, 3)).ok());
  SyncRound();
  EXPECT_EQ(acked_[1], ReadAll(1));
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  ExpectAckedKeptAndNothingElse(/*exactly_acked=*/true);
}

TEST_F(ReplicaStoreFaultTest, FailedCloseOfTheStateFileFailsCreateAndLeavesNoReplica) {
  // Goal: a close error on the state file (where NFS reports a failed
  // write) fails Create; after a crash the half-made replica is gone.
  fs_.FailCloses(std::string(kStateFileSuffix) + ".tmp");
  EXPECT_FALSE(store_->Create(5, 1).ok());
  fs_.ClearFaults();
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  EXPECT_TRUE(store_->SegmentIds().empty());
  EXPECT_TRUE(store_->Create(5, 1).ok());
}

TEST_F(ReplicaStoreFaultTest, SealedReplicaSurvivesACrashAndKeepsRealDescriptors) {
  // Goal: a seal (replica fdatasync, state file, directory sync) is
  // durable on its own, and short-circuit descriptors still come from the
  // fake (it passes real descriptors through).
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, Bytes(1234, 1)).ok());
  ASSERT_TRUE(store_->Seal(1, 2, 1000).ok());
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  Reopen();
  auto info = store_->Info(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->sealed);
  EXPECT_EQ(1000u, info->length);
  EXPECT_EQ(written_[1].substr(0, 1000), ReadAll(1));
  auto fds = store_->OpenReadOnly(1);
  ASSERT_TRUE(fds.ok()) << fds.status();
  EXPECT_TRUE(fds->data.valid());
  EXPECT_EQ(1000u, fds->length);
}

}  // namespace
}  // namespace logfs::segd
