// The segment server's journal: one circular file per data dir that every
// append to every replica is also written to, so that one durable write
// makes a round of appends to any number of segments durable
// (BookKeeper's journal; the per-replica files are synced only at
// checkpoints and seals). Layout: docs/segd_layout.md ("Journal").
//
// File: <data_dir>/journal, `journal_bytes` long, zero-filled when created
// so that later writes overwrite allocated blocks and fdatasync has no
// metadata to commit. Records are written back to back from offset 0; each
// is a 40-byte header (magic, header CRC32C, generation, segment id,
// offset, length, data CRC32C) and the data. A new generation starts at
// every wrap and every open; replay reads records from offset 0 while they
// are whole, valid and of the first record's generation, so stale records
// of an earlier pass are never replayed.
//
// Add only copies a record into memory; Sync writes every record added
// since the last Sync with one WriteAtDurably (pwritev2 RWF_DSYNC) of whole
// 4 KiB blocks through an O_DIRECT file (the block layer adds the cache flush). That costs no
// syscall per append and no page-cache writeback per round, as a database
// log buffer does (InnoDB's log buffer, PostgreSQL's WAL buffers). The
// partial last block is rewritten, with the same leading bytes, by the
// next Sync. Where O_DIRECT is refused (tmpfs, or a fake file system), the
// same writes go through the page cache, each round a WriteAt and a Sync.
// Every file operation goes through JournalOptions::file_system.
//
// Before it wraps, the journal calls its checkpoint function, which must
// make durable every replica byte journaled so far (the store fdatasyncs
// the replica files written since the last checkpoint); only then are old
// records overwritten.
//
// Errors are sticky (fsyncgate): after a failed write, a failed fdatasync
// or a failed checkpoint, every Add and Sync returns kDataLoss, and so
// does failure(); the error is logged once. Only a restart (reopen and
// replay) clears it.
//
// Thread-safety: Add and Sync may be called from any thread. Syncs run one
// at a time, with Add's lock held only to take the staged records, so
// appends continue during a sync.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"

namespace logfs::segd {

inline constexpr char kJournalFileName[] = "journal";
inline constexpr size_t kJournalHeaderBytes = 40;

struct JournalOptions {
  std::string dir;                  // holds the journal file
  uint64_t journal_bytes = 64u << 20;  // file size; a record larger wraps alone
  bool preallocate = true;          // zero-fill the file when it is created
  // Every file operation goes here; not owned, must outlive the journal.
  env::FileSystem* file_system = env::FileSystem::Default();
};

// One record found by replay.
struct JournalRecord {
  uint64_t segment_id = 0;
  uint64_t offset = 0;  // in the segment, bytes
  absl::string_view data;
};

class Journal {
 public:
  using ReplayFn = std::function<absl::Status(const JournalRecord& record)>;
  using CheckpointFn = std::function<absl::Status()>;

  // Opens (creating and zero-filling if needed) the journal in
  // `options.dir` and calls `replay` for each record of the last
  // generation, in the order written. A replay error stops and is
  // returned. The caller must make the replayed bytes durable and then
  // call Restart() before the first Add. Syscall errors as kInternal etc.
  static absl::StatusOr<std::unique_ptr<Journal>> Open(const JournalOptions& options,
                                                       const ReplayFn& replay);
  ~Journal();

  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Starts a new generation at offset 0 and durably invalidates the first
  // record, so the records just replayed are never replayed again.
  absl::Status Restart() ABSL_LOCKS_EXCLUDED(sync_mu_, mu_);

  // Called (with the journal's lock held) before a wrap; must not call back
  // into the journal. Set once, before the first Add.
  void SetCheckpoint(CheckpointFn checkpoint) { checkpoint_ = std::move(checkpoint); }

  // Stages one record (not durable until a later Sync returns OK).
  // Errors: kResourceExhausted (ENOSPC while a journal that was not
  // preallocated grows; nothing was staged), kDataLoss (the journal failed
  // earlier or now).
  absl::Status Add(uint64_t segment_id, uint64_t offset, absl::string_view data)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the staged records durably (O_DIRECT with RWF_DSYNC, or
  // through the page cache and fdatasync): every record whose Add returned
  // before this call is durable once it returns OK. kDataLoss on failure
  // (sticky).
  absl::Status Sync() ABSL_LOCKS_EXCLUDED(sync_mu_, mu_);

  // OK, or the sticky error every Add and Sync returns since a write,
  // fdatasync or checkpoint failed (kDataLoss).
  absl::Status failure() const ABSL_LOCKS_EXCLUDED(mu_);

  // Syncs that reached the disk: durable writes or fdatasyncs.
  uint64_t syncs() const { return syncs_.load(); }
  uint64_t wraps() const { return wraps_.load(); }

  // Sync writes whole blocks of this size, at offsets that are multiples of it.
  static constexpr size_t kBlockBytes = 4096;

 private:
  // A growable buffer aligned to kBlockBytes, as O_DIRECT needs.
  class BlockBuffer {
   public:
    BlockBuffer() = default;
    ~BlockBuffer() { std::free(data_); }
    BlockBuffer(const BlockBuffer&) = delete;
    BlockBuffer& operator=(const BlockBuffer&) = delete;
    void swap(BlockBuffer& other) noexcept {
      std::swap(data_, other.data_);
      std::swap(size_, other.size_);
      std::swap(capacity_, other.capacity_);
    }
    char* data() { return data_; }
    size_t size() const { return size_; }
    void clear() { size_ = 0; }
    void Append(const char* bytes, size_t n);
    // Frees the memory if more than `keep` bytes are allocated (after a
    // burst, so that one large round does not stay resident).
    void ShrinkTo(size_t keep);
    // Zero-fills up to the next block boundary (not counted in size()).
    size_t PadToBlock();

   private:
    void Reserve(size_t bytes);
    char* data_ = nullptr;
    size_t size_ = 0;
    size_t capacity_ = 0;
  };

  Journal(JournalOptions options, std::unique_ptr<env::WritableFile> file,
          std::unique_ptr<env::WritableFile> direct_file);
  // Calls `replay` for each record of the first record's generation, from
  // offset 0, until one is not whole and valid.
  absl::Status Replay(const ReplayFn& replay);
  absl::Status FailLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reserves the file's blocks up to `end` (a journal that was not
  // preallocated grows). kResourceExhausted on ENOSPC, which does not fail
  // the journal; other errors do.
  absl::Status GrowLocked(uint64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes `bytes` at `at`, durably (O_DIRECT with RWF_DSYNC: `*durable`
  // set) or, if O_DIRECT is refused, through the page cache (the caller
  // syncs).
  absl::Status WriteOut(absl::string_view bytes, uint64_t at, bool* durable)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(sync_mu_);

  const JournalOptions options_;
  const std::string path_;
  const std::unique_ptr<env::WritableFile> file_;  // page-cache I/O, replay
  // O_DIRECT writes; null where refused.
  std::unique_ptr<env::WritableFile> direct_file_ ABSL_GUARDED_BY(sync_mu_);
  CheckpointFn checkpoint_;

  std::atomic<uint64_t> syncs_{0};
  std::atomic<uint64_t> wraps_{0};

  // Held across a whole Sync (one at a time); taken before mu_.
  absl::Mutex sync_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  BlockBuffer writing_ ABSL_GUARDED_BY(sync_mu_);  // the staged records a Sync took

  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t position_ ABSL_GUARDED_BY(mu_) = 0;  // where the next record goes
  uint64_t file_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Bytes [staged_start_, position_) of the file, not yet written by a
  // Sync; staged_start_ is a multiple of kBlockBytes, so the staged bytes
  // begin with what an earlier Sync wrote of their first block.
  BlockBuffer staged_ ABSL_GUARDED_BY(mu_);
  uint64_t staged_start_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::segd
