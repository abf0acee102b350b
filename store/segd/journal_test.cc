// Journal on a real temp dir: what Sync makes durable is exactly what
// replay returns, across block boundaries, partial blocks rewritten by the
// next Sync, records larger than a block, and a journal that grows.
#include "store/segd/journal.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "src/env/file_system.h"

namespace logfs::segd {
namespace {

using Record = std::pair<uint64_t, std::string>;  // segment id, data

// The POSIX file system, recording the largest ReadAt asked of any
// writable file it opened (the journal reads through one).
class ReadSizeRecorder : public env::FileSystemWrapper {
 public:
  ReadSizeRecorder() : FileSystemWrapper(env::FileSystem::Default()) {}
  absl::StatusOr<std::unique_ptr<env::WritableFile>> NewWritableFile(
      const std::string& path, const env::WritableFileOptions& options) override {
    auto file = target()->NewWritableFile(path, options);
    if (!file.ok()) return file.status();
    return std::unique_ptr<env::WritableFile>(new File(std::move(*file), &largest_read_));
  }
  size_t largest_read() const { return largest_read_.load(); }

 private:
  class File : public env::WritableFileWrapper {
   public:
    File(std::unique_ptr<env::WritableFile> file, std::atomic<size_t>* largest_read)
        : WritableFileWrapper(std::move(file)), largest_read_(largest_read) {}
    absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* scratch) const override {
      if (n > largest_read_->load()) largest_read_->store(n);
      return target()->ReadAt(offset, n, scratch);
    }

   private:
    std::atomic<size_t>* const largest_read_;
  };

  std::atomic<size_t> largest_read_{0};
};

class JournalTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "journal_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl.data()));
    options_.dir = tmpl;
    options_.journal_bytes = 1u << 20;
  }
  void TearDown() override {
    journal_.reset();
    std::filesystem::remove_all(options_.dir);
  }
  // Closes and reopens the journal; returns the records replayed.
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
    return replayed;
  }
  void Restart() { ASSERT_TRUE(journal_->Restart().ok()); }

  JournalOptions options_;
  std::unique_ptr<Journal> journal_;
};

// Regression (fuzz/journal_replay_fuzzer): a header with a valid CRC whose
// length (0xfffffff0) runs far past the file's end made replay allocate
// and read 4 GiB for the body before finding it short. It ends replay
// instead, reading nothing larger than a header.
TEST_F(JournalTest, LengthPastTheFileEndsReplay) {
  ReadSizeRecorder recorder;
  options_.file_system = &recorder;
  const std::string header(
      "\x4c\x47\x4a\x31\xaa\xaf\xb3\x13\x07\x00\x00\x00\x00\x00\x00\x00"
      "\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
      "\xf0\xff\xff\xff\x00\x00\x00\x00",
      kJournalHeaderBytes);
  std::FILE* f = std::fopen((options_.dir + "/" + kJournalFileName).c_str(), "wb");
  ASSERT_NE(nullptr, f);
  ASSERT_EQ(header.size(), std::fwrite(header.data(), 1, header.size(), f));
  ASSERT_EQ(0, std::fclose(f));
  EXPECT_TRUE(Reopen().empty());
  ASSERT_NE(nullptr, journal_);
  EXPECT_EQ(recorder.largest_read(), kJournalHeaderBytes);
  Restart();
  ASSERT_TRUE(journal_->Add(4, 0, "ok").ok());
  ASSERT_TRUE(journal_->Sync().ok());
  EXPECT_EQ(Reopen(), std::vector<Record>({{4, "ok"}}));
  journal_.reset();  // its files are the recorder's
}

TEST_F(JournalTest, ReplayReturnsExactlyTheSyncedRecords) {
  EXPECT_TRUE(Reopen().empty());
  Restart();
  // Sizes chosen so records straddle 4 KiB blocks, fill one exactly, and
  // exceed a block; syncs land mid-block so the next Sync rewrites it.
  const std::vector<size_t> sizes = {1, 100, 4056, 3000, 9000, 5, 4096 - 40, 777, 20000, 3};
  std::vector<Record> synced;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Record r{i + 1, std::string(sizes[i], static_cast<char>('a' + i))};
    ASSERT_TRUE(journal_->Add(r.first, 0, r.second).ok());
    synced.push_back(r);
    if (i % 3 != 1) {
      ASSERT_TRUE(journal_->Sync().ok()) << i;
    }
  }
  ASSERT_TRUE(journal_->Sync().ok());
  // Added after the last Sync: never acknowledged, so never replayed.
  ASSERT_TRUE(journal_->Add(99, 0, "unsynced").ok());
  EXPECT_EQ(synced, Reopen());
  // A new generation: the old records are not replayed again.
  Restart();
  ASSERT_TRUE(journal_->Add(7, 0, "next").ok());
  ASSERT_TRUE(journal_->Sync().ok());
  EXPECT_EQ((std::vector<Record>{{7, "next"}}), Reopen());
}

TEST_F(JournalTest, JournalThatWasNotPreallocatedGrowsAsRecordsArrive) {
  options_.preallocate = false;
  Reopen();
  Restart();
  const std::string path = options_.dir + "/" + kJournalFileName;
  std::vector<Record> synced;
  for (int i = 0; i < 20; ++i) {
    synced.emplace_back(1, std::string(1000, static_cast<char>('A' + i)));
    ASSERT_TRUE(journal_->Add(1, i * 1000, synced.back().second).ok());
  }
  ASSERT_TRUE(journal_->Sync().ok());
  struct stat st;
  ASSERT_EQ(0, ::stat(path.c_str(), &st));
  EXPECT_GE(static_cast<uint64_t>(st.st_size), 20 * (1000 + kJournalHeaderBytes));
  EXPECT_LT(static_cast<uint64_t>(st.st_size), options_.journal_bytes);
  EXPECT_EQ(synced, Reopen());
}

TEST_F(JournalTest, SyncWithNothingStagedStillSucceeds) {
  Reopen();
  Restart();
  ASSERT_TRUE(journal_->Sync().ok());
  ASSERT_TRUE(journal_->Add(3, 0, "x").ok());
  ASSERT_TRUE(journal_->Sync().ok());
  ASSERT_TRUE(journal_->Sync().ok());
  EXPECT_EQ((std::vector<Record>{{3, "x"}}), Reopen());
}

TEST_F(JournalTest, WrapsWhileAnotherThreadSyncsKeepTheLastGenerationWhole) {
  // One thread adds records to a small journal, so it wraps often; another
  // syncs in a loop, so wraps land while a Sync writes. After a last Sync,
  // replay must return exactly the records added since the last wrap's
  // checkpoint, in order: none lost, none stale from an earlier pass.
  options_.journal_bytes = 64u << 10;
  Reopen();
  std::vector<Record> since_checkpoint;  // touched by the adding thread only
  int checkpoints = 0;
  journal_->SetCheckpoint([&] {
    ++checkpoints;
    since_checkpoint.clear();
    return absl::OkStatus();
  });
  Restart();
  std::atomic<bool> done{false};
  std::atomic<int> sync_failures{0};
  std::thread syncer([&] {
    while (!done.load()) {
      if (!journal_->Sync().ok()) ++sync_failures;
    }
  });
  for (int i = 0; i < 2000; ++i) {
    // 40-byte header + 10..1009 bytes: records straddle blocks and wraps.
    Record r{static_cast<uint64_t>(i),
             std::string(10 + (i * 37) % 1000, static_cast<char>('a' + i % 26))};
    ASSERT_TRUE(journal_->Add(r.first, 0, r.second).ok()) << i;
    since_checkpoint.push_back(std::move(r));
  }
  done.store(true);
  syncer.join();
  ASSERT_TRUE(journal_->Sync().ok());
  EXPECT_EQ(0, sync_failures.load());
  EXPECT_GE(checkpoints, 10);
  EXPECT_EQ(journal_->wraps(), static_cast<uint64_t>(checkpoints));
  std::vector<Record> expected = since_checkpoint;
  EXPECT_EQ(expected, Reopen());
}

}  // namespace
}  // namespace logfs::segd
