// Private to store/segd/replica_store*.cc and store/segd/internal/replica.cc: one
// replica's in-memory state and the file operations that must run under
// its lock (writing at the end, rolling back, cutting at a seal). Its two
// files are owned: closed when the last holder drops it.
//
// Thread-safety: fields marked ABSL_GUARDED_BY(mu) need `mu`; the file
// pointers and segment_id are immutable (the files take positional calls
// from any thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

struct ReplicaStore::Replica {
  // 1, 2, ...: a fresh one for every Replica object of the process.
  static uint64_t NextIncarnation() {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1);
  }

  Replica(uint64_t id, std::unique_ptr<env::WritableFile> data_file,
          std::unique_ptr<env::WritableFile> chunk_crc_file)
      : segment_id(id),
        incarnation(NextIncarnation()),
        file(std::move(data_file)),
        crc_file(std::move(chunk_crc_file)) {}

  ReplicaInfo Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return ReplicaInfo{segment_id, epoch, length, durable_length, sealed, corrupt, incarnation};
  }
  // kNotFound once deleted; the sticky failure once failed.
  absl::Status Usable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Usable(), and kDataLoss once corrupt: whether its bytes may be served
  // or extended.
  absl::Status Servable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Writes `data` at `length` with the CRCs of the whole chunks it
  // completes and raises `length` (the last partial chunk's CRC stays in
  // tail_crc). On failure both files are cut back (or, if that
  // fails, the replica is marked failed) and the error is returned.
  absl::Status WriteAtEnd(absl::string_view data) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Writes the partial last chunk's CRC (kept in memory while the replica
  // is open) to the .crc file, which then covers every byte.
  absl::Status WriteTailCrc() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Undoes writes past `old_length` (whose last partial chunk had
  // `old_tail_crc`): cuts both files back, or marks the replica failed if
  // that fails. No CRC check: the bytes cut were never acknowledged.
  void RollBackTo(uint64_t old_length, uint32_t old_tail_crc) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Cuts the replica to `new_length` < length, data and CRCs. The chunk the
  // cut lands in is verified first (a CRC is never recomputed over damaged
  // bytes): if it is bad the replica is marked corrupt and kDataLoss
  // returned. Syscall errors before anything changed are returned as is;
  // after the data file was cut they mark the replica failed.
  absl::Status CutTo(uint64_t new_length, uint64_t server_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Marks the replica corrupt at `chunk` (once; later calls keep the first
  // reason) and returns its kDataLoss.
  absl::Status SetCorrupt(uint64_t server_id, uint64_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // fdatasyncs the data file, then the .crc file. The error of the first
  // that failed. No lock needed (the files are immutable).
  absl::Status SyncFiles() const;

  // Immutable after construction. The files stay open as long as anyone
  // holds the Replica, so a sync in flight never touches a reused
  // descriptor.
  const uint64_t segment_id;
  const uint64_t incarnation;                         // ReplicaInfo::incarnation
  const std::unique_ptr<env::WritableFile> file;      // <id>.seg
  const std::unique_ptr<env::WritableFile> crc_file;  // <id>.crc

  // Serializes Seals of this replica; taken before `mu`, and held over
  // the seal's fdatasyncs, which `mu` is not.
  absl::Mutex seal_mu;
  mutable absl::Mutex mu;
  uint64_t epoch ABSL_GUARDED_BY(mu) = 0;
  uint64_t length ABSL_GUARDED_BY(mu) = 0;
  uint64_t durable_length ABSL_GUARDED_BY(mu) = 0;
  bool sealed ABSL_GUARDED_BY(mu) = false;
  // A Seal has cut the replica and is making it durable (without `mu`):
  // appends are refused, its length no longer changes.
  bool sealing ABSL_GUARDED_BY(mu) = false;
  bool deleted ABSL_GUARDED_BY(mu) = false;
  absl::Status failure ABSL_GUARDED_BY(mu);  // sticky, set by a failed fdatasync
  // CRC32C of the last partial chunk (the bytes past the last full chunk);
  // 0 when length is a multiple of kCrcChunkBytes. Readers take it with
  // `length`, since the .crc file's entry may already cover later appends.
  uint32_t tail_crc ABSL_GUARDED_BY(mu) = 0;
  bool corrupt ABSL_GUARDED_BY(mu) = false;
  absl::Status corruption ABSL_GUARDED_BY(mu);  // why, once corrupt
  // Seals that cut the replica. A read compares it with its snapshot to
  // tell a concurrent cut (retry) from damage on disk.
  uint64_t cuts ABSL_GUARDED_BY(mu) = 0;
};

// What a Read saw of a replica under its lock.
struct ReplicaStore::ReadSnapshot {
  uint64_t length = 0;
  bool sealed = false;
  uint32_t tail_crc = 0;
  uint64_t cuts = 0;
};

}  // namespace logfs::segd
