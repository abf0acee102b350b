// Fuzz target: segd's journal replay (store/segd/journal.h) from arbitrary
// bytes: what a crash, a torn write or a damaged disk leaves in
// DATA_DIR/journal.
//
// Input: [u8 mode][journal file bytes]. Checksums stop random bytes at the
// first record, so bits 0-2 of mode make records pass them first
// (FixJournalRecords in fuzz/journal_bytes.h). Bit 3 opens with
// preallocation (zero-fill to journal_bytes), as a real segd does.
//
// Checks beyond the sanitizers: every replayed record's data lies within
// the file; and after Restart, one Add and a Sync, a reopen replays
// exactly that record.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/journal_bytes.h"
#include "store/segd/journal.h"

namespace logfs::fuzz {
namespace {

constexpr uint64_t kJournalBytes = 64u << 10;

std::vector<Seed> Seeds() {
  std::string two = JournalRecordBytes(7, 1, 0, "first") + JournalRecordBytes(7, 1, 5, "second");
  std::string stale = two + JournalRecordBytes(6, 2, 0, "stale generation");
  std::string torn = JournalRecordBytes(7, 3, 0, std::string(100, 'x'));
  torn.resize(torn.size() - 30);
  std::string huge = JournalRecordBytes(7, 4, 0, "");
  PutLe<uint32_t>(huge, 32, 0xfffffff0u);  // a length far past the file's end
  return {
      {"two_records", std::string(1, 3) + two},
      {"stale_tail", std::string(1, 3) + stale},
      {"torn", std::string(1, 3) + torn},
      {"huge_length", std::string(1, 1) + huge},
      {"zeros", std::string(1, 8) + std::string(4096, '\0')},
      {"raw", std::string(1, 0) + two},
  };
}

std::string& Dir() {
  static std::string* dir = new std::string(MakeScratchDir("journal"));
  return *dir;
}

}  // namespace
}  // namespace logfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  logfs::fuzz::QuietLogs();
  logfs::fuzz::WriteSeedsIfAsked(logfs::fuzz::Seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace logfs;
  fuzz::InputReader in(data, size);
  const uint8_t mode = in.TakeU8();
  std::string file(in.TakeRest());
  fuzz::FixJournalRecords(mode, file);
  const std::string& dir = fuzz::Dir();
  fuzz::EmptyDir(dir);
  fuzz::WriteFile(dir + "/" + segd::kJournalFileName, file);

  segd::JournalOptions options;
  options.dir = dir;
  options.journal_bytes = fuzz::kJournalBytes;
  options.preallocate = (mode & 8) != 0;
  auto journal = segd::Journal::Open(options, [&](const segd::JournalRecord& record) {
    CHECK_LE(record.data.size(), file.size());
    return absl::OkStatus();
  });
  if (!journal.ok()) return 0;
  // A new generation hides everything before it.
  CHECK((*journal)->Restart().ok());
  CHECK((*journal)->Add(9, 0, "after restart").ok());
  CHECK((*journal)->Sync().ok());
  journal->reset();
  int replayed = 0;
  auto reopened = segd::Journal::Open(options, [&](const segd::JournalRecord& record) {
    CHECK_EQ(record.segment_id, 9u);
    CHECK_EQ(record.offset, 0u);
    CHECK_EQ(record.data, "after restart");
    ++replayed;
    return absl::OkStatus();
  });
  CHECK(reopened.ok()) << reopened.status();
  CHECK_EQ(replayed, 1);
  return 0;
}
