// The segment server's local replicas: a data file, a state file and a
// chunk-CRC file per segment under <data_dir>/segments (store/segd/replica_files.h,
// store/format/chunk_crc.h). No
// networking; the RPC layer (store/segd/segment_service.h) maps requests onto
// these calls and docs/rpc.md ("Segment server") gives their semantics.
//
// Lengths: `length` counts bytes written (pwrite returned), `durable_length`
// bytes covered by a successful journal sync (or replica fdatasync). Appends only raise `length`;
// SyncDirty() raises `durable_length`. An fdatasync failure is sticky: the
// replica is marked failed and every later Append / Sync / Info / Read of it
// returns kDataLoss, because the kernel may have dropped the dirty pages
// (fsyncgate); it is never retried.
//
// Journal (store/segd/journal.h): every append is written to its replica files
// and then staged in the data dir's one journal. A sync round makes only
// the journal durable, one write however many replicas it covers
// (BookKeeper's journal); replica
// files are fdatasynced when the journal wraps (checkpoint), at seal and at
// open. Open replays the journal into the replicas of unsealed segments.
//
// Checksums: every kCrcChunkBytes chunk of a replica has a CRC32C in its
// .crc file, written with the data and made durable by the same sync. A
// Read verifies every chunk it touches; a mismatch marks the replica
// corrupt for the life of the process: Read, Append and Seal return
// kDataLoss, Info reports `corrupt`.
//
// Files: every file operation goes through ReplicaStoreOptions::file_system
// (src/env/file_system.h), so tests can break the disk
// (tests/fakes/fault_file_system.h). The code is split by job:
// replica_store.cc (the namespace: create, delete, list, server id),
// replica_store_load.cc (open: scan, journal replay, load each replica),
// replica_store_write.cc (append, seal, sync rounds, checkpoints) and
// replica_store_read.cc (verified reads, short-circuit descriptors).
//
// Thread-safety: every method may be called from any thread. Calls on one
// replica are serialized by that replica's mutex; pwrite/ftruncate run
// under it (so appends of one replica land in order and a failed write can
// be rolled back before anyone sees it). The journal sync in SyncDirty runs
// with no lock held, so appends continue while a sync is in flight.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"
#include "store/format/limits.h"
#include "store/format/replica_fds.h"
#include "store/segd/journal.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {

struct ReplicaStoreOptions {
  std::string data_dir;  // created if missing
  uint64_t journal_bytes = 64u << 20;  // size of <data_dir>/journal
  bool journal_preallocate = true;     // zero-fill it when created
  // Every file operation of the store and its journal goes here; not
  // owned, must outlive the store. OpenReadOnly needs files with real
  // descriptors (RandomAccessFile::ReopenReadOnlyFd).
  env::FileSystem* file_system = env::FileSystem::Default();
};

// A snapshot of one replica's state.
struct ReplicaInfo {
  uint64_t segment_id = 0;
  uint64_t epoch = 0;
  uint64_t length = 0;          // bytes written
  uint64_t durable_length = 0;  // bytes fdatasynced
  bool sealed = false;
  bool corrupt = false;  // a chunk failed its CRC; never served again
  // Which life of segment_id this is: a delete and a create of the same id
  // (a copy starting over) make a new one. Unique within the process.
  uint64_t incarnation = 0;
};

struct ReplicaRead {
  std::string data;  // up to max_bytes from the offset
  uint64_t length = 0;  // replica length at the time of the read
  bool sealed = false;
};

class ReplicaStore {
 public:
  // Opens (creating if needed) the data dir and loads every replica in it:
  // length = file size, and each is fdatasynced once so durable_length =
  // length. Half-created or half-deleted replicas (a data file without a
  // state file or the reverse) are removed: they were never acknowledged.
  // kFailedPrecondition if the dir cannot be created, is not a directory or
  // is not writable.
  static absl::StatusOr<std::unique_ptr<ReplicaStore>> Open(const ReplicaStoreOptions& options);
  ~ReplicaStore();

  ReplicaStore(const ReplicaStore&) = delete;
  ReplicaStore& operator=(const ReplicaStore&) = delete;

  // Creates an empty replica at `epoch`, durably. On an existing replica:
  // the same epoch returns it unchanged; a higher epoch raises (and
  // persists) its epoch, fencing older writers; a lower one is
  // kFailedPrecondition.
  absl::StatusOr<ReplicaInfo> Create(uint64_t segment_id, uint64_t epoch);

  // Writes `data` at `offset` after checking `crc32c` against it. Returns
  // the replica after the write (the caller waits for durable_length >=
  // offset + data.size()). An exact resend of bytes already written succeeds
  // without writing. Errors: kNotFound, kDataLoss (crc mismatch, or replica
  // failed or corrupt), kFailedPrecondition (sealed, or epoch < replica epoch),
  // kOutOfRange (offset != length and not an exact resend),
  // kResourceExhausted (ENOSPC; the file is truncated back so nothing
  // half-written stays), other syscall errors likewise rolled back.
  absl::StatusOr<ReplicaInfo> Append(uint64_t segment_id, uint64_t epoch, uint64_t offset,
                                     absl::string_view data, uint32_t crc32c);

  // Reads up to min(max_bytes, format::kReadBytesMax) bytes at `offset` (fewer at
  // the end; none at offset == length), after checking the CRC of every
  // chunk they touch. kOutOfRange if offset > length, kNotFound, kDataLoss
  // if the replica failed or is corrupt ("replica N of segment S is corrupt
  // at chunk C": N is this server's id; the replica is marked corrupt),
  // kUnavailable if a seal cut the replica during the read (retry).
  absl::StatusOr<ReplicaRead> Read(uint64_t segment_id, uint64_t offset, uint64_t max_bytes);

  // New read-only descriptors of a sealed replica's data and .crc files,
  // for a short-circuit reader (store/segd/short_circuit_server.h), which must
  // verify CRCs itself. kNotFound, kDataLoss (failed or corrupt),
  // kFailedPrecondition (not sealed: an open replica still changes),
  // kUnimplemented (the file system has no descriptors), syscall errors.
  absl::StatusOr<format::ReplicaFds> OpenReadOnly(uint64_t segment_id);

  // kNotFound, or kDataLoss if the replica failed. A corrupt replica is
  // reported (ReplicaInfo::corrupt), not an error.
  absl::StatusOr<ReplicaInfo> Info(uint64_t segment_id);

  // Seals the replica at `length`: truncates it if longer, fdatasyncs,
  // persists the sealed state, and raises its epoch to `epoch`. Errors:
  // kNotFound, kFailedPrecondition (epoch < replica epoch, or already sealed
  // at another length), kOutOfRange (length > replica length), kDataLoss
  // (replica failed or corrupt, including a bad CRC in the chunk a cut
  // lands in, or this fdatasync failed), syscall errors. Sealing again
  // at the same length is OK. Appends are refused from the cut on
  // (kFailedPrecondition); the fdatasyncs run without the replica's lock,
  // so a slow disk holds up neither the sync thread's rounds nor reads.
  absl::StatusOr<ReplicaInfo> Seal(uint64_t segment_id, uint64_t epoch, uint64_t length);

  // Opens a sealed replica again for appends at `epoch` (> its epoch),
  // as HDFS reopens a finalized last block for append: a WAL file reopened
  // for append continues its last, unfull segment instead of starting a
  // new one (docs/rpc.md CreateSegment, reopen_length). The replica must be sealed at
  // exactly `length` (what meta recorded). Its .crc file is replaced by a
  // copy first, so short-circuit readers holding the sealed one keep
  // checking the sealed length against unchanged CRCs while appends
  // rewrite the last partial chunk's; then the state file says open at
  // `epoch`, durably. Reopening again at the same epoch and length
  // returns the replica (a retry). Errors: kNotFound, kDataLoss (failed or
  // corrupt), kFailedPrecondition (not sealed at `length`, epoch not above
  // its own, or a seal of this process cut it: journal records past the
  // cut could be replayed into it after a crash), syscall errors.
  absl::StatusOr<ReplicaInfo> Reopen(uint64_t segment_id, uint64_t epoch, uint64_t length)
      ABSL_LOCKS_EXCLUDED(files_mu_);

  // Removes the replica's files. OK if absent.
  absl::Status Delete(uint64_t segment_id) ABSL_LOCKS_EXCLUDED(files_mu_);

  // Removes the replica's files only if none of them changed (mtime) for
  // `idle_ms`: meta's deletion of a replica no file lists (a stray) must
  // not remove one that a create, copy or append is making right now.
  // Returns whether it was deleted (false also if absent); syscall errors.
  absl::StatusOr<bool> DeleteIfIdle(uint64_t segment_id, int64_t idle_ms)
      ABSL_LOCKS_EXCLUDED(files_mu_);

  // A snapshot of every replica, for meta's replica report; a failed one
  // is listed as corrupt (it is never served either). No particular order.
  std::vector<ReplicaInfo> ListReplicas() const ABSL_LOCKS_EXCLUDED(mu_);

  // One sync round: one fdatasync of the journal, then every replica
  // appended to before the round started gets durable_length = the end of
  // its last journaled append (or its length, if a seal cut it since). A
  // failure marks those replicas failed (sticky) and fails the journal.
  // Returns the number of fdatasyncs (0 when nothing was appended). Call
  // from one thread at a time (the sync thread); other calls may run
  // concurrently.
  int SyncDirty();

  // Ids of every replica, in no particular order.
  std::vector<uint64_t> SegmentIds() const;

  // OK, or why this server can take no more appends: its journal failed
  // (a write or fdatasync error, sticky until a restart; kDataLoss). The
  // heartbeat reports it to meta, which then places no new segments here.
  absl::Status Health() const;

  // The id meta gave this server (0 if none yet) and the id of the cluster
  // whose meta gave it (0 if none yet, or a data dir from before cluster
  // ids), and their durable update (DATA_DIR/server_id, written atomically
  // with its directory synced). Errors of the write.
  uint64_t server_id() const;
  uint64_t cluster_id() const;
  absl::Status SetServerId(uint64_t server_id, uint64_t cluster_id = 0);

  // Syncs so far: of the journal (sync rounds: a durable write, or a write
  // and fdatasync) and fdatasyncs of replica files (checkpoints, seals,
  // open).
  uint64_t fdatasync_count() const;
  // Times the journal wrapped (each one a checkpoint).
  uint64_t journal_wraps() const;

  const std::string& data_dir() const { return data_dir_; }

 private:
  struct Replica;
  struct ReadSnapshot;
  // Seal's work on replica `r`, whose seal_mu the caller holds.
  absl::StatusOr<ReplicaInfo> SealHeld(const std::shared_ptr<Replica>& r, uint64_t epoch,
                                       uint64_t length);

  // Files being replayed into, by segment id (null: skip that segment).
  using ReplayFiles = absl::flat_hash_map<uint64_t, std::unique_ptr<env::WritableFile>>;
  // What LoadAll found in the segments dir.
  struct DirScan {
    absl::flat_hash_set<uint64_t> data_ids, state_ids, crc_ids;
    std::vector<std::string> stale;  // names to remove
  };

  explicit ReplicaStore(const ReplicaStoreOptions& options);
  // Creates and removes a file in the segments dir (access(2) lies for
  // root and read-only mounts).
  absl::Status ProbeWritable();
  absl::Status LoadAll();
  absl::Status LoadServerId();
  absl::StatusOr<DirScan> ScanSegmentsDir();
  // Opens the journal and replays it into the replicas' data files.
  absl::Status OpenJournal();
  // Writes one replayed journal record into its replica's data file, if the
  // replica exists and is not sealed.
  absl::Status ReplayRecord(const JournalRecord& record, ReplayFiles* files) const;
  // The journal's checkpoint: fdatasyncs every replica journaled since the
  // last one.
  absl::Status Checkpoint() ABSL_LOCKS_EXCLUDED(checkpoint_mu_);
  absl::Status LoadOne(uint64_t segment_id);
  // The failure (`*failure`) or corruption (`*corruption`) of a replica
  // being loaded, and its last partial chunk's CRC.
  uint32_t CheckLoadedReplica(Replica& replica, uint64_t size, const ReplicaState& state,
                              bool crc_file_existed, absl::Status* failure,
                              absl::Status* corruption);
  absl::StatusOr<std::shared_ptr<Replica>> Find(uint64_t segment_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records that `replica` has journaled bytes up to `end`.
  void MarkDirty(const std::shared_ptr<Replica>& replica, uint64_t end) ABSL_LOCKS_EXCLUDED(mu_);
  // The last partial chunk's CRC of a replica being loaded, from its .crc
  // file (sealed) or rebuilt from the data (open, or no .crc file yet).
  // kDataLoss if a sealed replica's .crc file is damaged.
  absl::StatusOr<uint32_t> LoadChunkCrcs(Replica& replica, uint64_t length, bool sealed,
                                         bool crc_file_existed);
  // Writes `data` at the end of `r` and journals it; on failure nothing
  // of it stays. Errors as Append.
  absl::Status WriteAndJournal(const std::shared_ptr<Replica>& r, uint64_t offset,
                               absl::string_view data);
  // Reads the whole chunks covering [begin, end) of `replica` as of
  // `snapshot`, verifies their CRCs and returns them (from the chunk
  // boundary at or below `begin`). Errors as Read.
  absl::StatusOr<std::string> ReadVerifiedChunks(Replica& replica, const ReadSnapshot& snapshot,
                                                 uint64_t begin, uint64_t end);
  // Marks `replica` corrupt at `chunk` and returns its kDataLoss, unless a
  // seal cut it since the caller's snapshot (`cuts_seen`): kUnavailable.
  absl::Status MarkCorrupt(Replica& replica, uint64_t cuts_seen, uint64_t chunk)
      ABSL_LOCKS_EXCLUDED(mu_);
  std::string SegmentPath(uint64_t segment_id, const char* suffix) const;
  // Creates the data and .crc files of a new replica (removing them again
  // if the second fails).
  absl::StatusOr<std::shared_ptr<Replica>> CreateFiles(uint64_t segment_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(files_mu_);
  absl::Status DeleteLocked(uint64_t segment_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(files_mu_);

  // Immutable after construction.
  const ReplicaStoreOptions options_;
  env::FileSystem& fs_;
  const std::string data_dir_;
  const std::string segments_dir_;
  std::unique_ptr<Journal> journal_;  // set by LoadAll

  // Internally synchronized.
  std::atomic<uint64_t> fdatasync_count_{0};

  // Serializes Create, Delete and SetServerId, whose file I/O runs under it.
  // Lock order: files_mu_, then a Replica's seal_mu, then its mu, then
  // mu_ (never a Replica's mu while holding mu_).
  absl::Mutex files_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Replica>> replicas_ ABSL_GUARDED_BY(mu_);
  // Replicas with bytes journaled since the last round took them, with the
  // end of their last journaled append (by segment id; the pointer tells
  // incarnations of a re-created id apart).
  struct Dirty {
    std::shared_ptr<Replica> replica;
    uint64_t end = 0;
  };
  absl::flat_hash_map<uint64_t, Dirty> dirty_ ABSL_GUARDED_BY(mu_);

  // Replicas written since the journal's last checkpoint. Lock order: a
  // Replica's mu, then the journal's, then checkpoint_mu_.
  absl::Mutex checkpoint_mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Replica>> unsynced_
      ABSL_GUARDED_BY(checkpoint_mu_);
  uint64_t server_id_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cluster_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace logfs::segd
