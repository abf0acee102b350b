// Fuzz target: the segment server's load of its data dir
// (store/segd/replica_store_load.cc, ReplicaStore::Open) from arbitrary
// files: DATA_DIR/server_id, the journal, and for segments 1..4 their
// .seg, .state and .crc files, as a crash or a damaged disk leaves them.
// The state-file codec (DecodeReplicaState) gets every .state file too.
//
// Input: [u8 mode] then files, each [u8 kind][u16 LE length][bytes] (a
// later file of one kind replaces an earlier one): kind % 14 is 0
// server_id, 1 journal, else segment 1 + (kind - 2) / 3 with suffix .seg,
// .state, .crc by (kind - 2) % 3. Mode bit 0 rewrites each .crc file to
// match its .seg (so loads get past the CRC check), bits 1-3 fix journal
// records as fuzz/journal_bytes.h says (mode >> 1).
//
// Checks beyond the sanitizers: a decoded state encodes back to the same
// state; once open, each replica answers Info, and a Read returns no
// more bytes than its length; the store closes cleanly.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "fuzz/journal_bytes.h"
#include "store/format/chunk_crc.h"
#include "store/segd/journal.h"
#include "store/segd/replica_files.h"
#include "store/segd/replica_store.h"

namespace logfs::fuzz {
namespace {

constexpr int kKinds = 14;
constexpr uint64_t kJournalBytes = 64u << 10;

std::string FileName(int kind) {
  if (kind == 0) return segd::kServerIdFileName;
  if (kind == 1) return segd::kJournalFileName;
  static const char* const kSuffixes[] = {segd::kSegmentFileSuffix, segd::kStateFileSuffix,
                                          segd::kCrcFileSuffix};
  return std::string(segd::kSegmentsDirName) + "/" + std::to_string(1 + (kind - 2) / 3) +
         kSuffixes[(kind - 2) % 3];
}

std::string CrcFileFor(const std::string& data) {
  std::string out;
  for (uint32_t crc : format::ComputeChunkCrcs(data)) {
    out.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  }
  return out;
}

void CheckStateCodec(const std::string& text) {
  auto state = segd::DecodeReplicaState(text);
  if (!state.ok()) return;
  auto again = segd::DecodeReplicaState(segd::EncodeReplicaState(*state));
  CHECK(again.ok()) << again.status();
  CHECK_EQ(again->epoch, state->epoch);
  CHECK_EQ(again->sealed, state->sealed);
  CHECK_EQ(again->sealed_length, state->sealed_length);
}

std::string FileBytes(int kind, const std::string& bytes) {
  std::string out(1, static_cast<char>(kind));
  out.push_back(static_cast<char>(bytes.size() & 0xff));
  out.push_back(static_cast<char>(bytes.size() >> 8));
  return out + bytes;
}

std::vector<Seed> Seeds() {
  const std::string state_open = segd::EncodeReplicaState({3, false, 0});
  const std::string state_sealed = segd::EncodeReplicaState({4, true, 5});
  const std::string journal =
      JournalRecordBytes(9, 1, 5, " world") + JournalRecordBytes(9, 2, 0, "ignored: sealed");
  return {
      {"open_replica", std::string(1, 1) + FileBytes(0, "7 11\n") + FileBytes(2, "hello") +
                           FileBytes(3, state_open)},
      {"sealed_replica", std::string(1, 1) + FileBytes(0, "7\n") + FileBytes(5, "hello") +
                             FileBytes(6, state_sealed)},
      {"journal_replay", std::string(1, 1 | (3 << 1)) + FileBytes(2, "hello") +
                             FileBytes(3, state_open) + FileBytes(5, "hello") +
                             FileBytes(6, state_sealed) + FileBytes(1, journal)},
      {"stale_files", std::string(1, 0) + FileBytes(8, "data without state") +
                          FileBytes(12, state_open) + FileBytes(10, "crc alone")},
      {"bad_crc", std::string(1, 0) + FileBytes(2, "hello") + FileBytes(3, state_sealed) +
                      FileBytes(4, "\x01\x02\x03\x04")},
  };
}

std::string& Dir() {
  static std::string* dir = new std::string(MakeScratchDir("replicas"));
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
  std::map<int, std::string> files;
  while (!in.empty()) {
    const int kind = in.TakeU8() % fuzz::kKinds;
    files[kind] = std::string(in.TakeBytes(in.TakeU16()));
  }
  for (int kind = 2; kind < fuzz::kKinds; ++kind) {
    if ((mode & 1) && (kind - 2) % 3 == 2 && files.count(kind - 2)) {
      files[kind] = fuzz::CrcFileFor(files[kind - 2]);
    }
    if ((kind - 2) % 3 == 1 && files.count(kind)) fuzz::CheckStateCodec(files[kind]);
  }
  if (files.count(1)) fuzz::FixJournalRecords(mode >> 1, files[1]);

  const std::string& dir = fuzz::Dir();
  fuzz::EmptyDir(dir);
  fuzz::MakeDirIn(dir, segd::kSegmentsDirName);
  for (const auto& [kind, bytes] : files) {
    fuzz::WriteFile(dir + "/" + fuzz::FileName(kind), bytes);
  }
  segd::ReplicaStoreOptions options{dir, fuzz::kJournalBytes};
  auto store = segd::ReplicaStore::Open(options);
  if (!store.ok()) return 0;
  for (uint64_t id : (*store)->SegmentIds()) {
    auto info = (*store)->Info(id);
    if (!info.ok()) continue;
    auto read = (*store)->Read(id, 0, 1 << 20);
    if (read.ok()) CHECK_LE(read->data.size(), info->length);
  }
  (*store)->ListReplicas();
  return 0;
}
