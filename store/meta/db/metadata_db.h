// Meta's persistent state in RocksDB: inodes, directory entries, id
// counters, the segment-server registry, replicas waiting to be deleted on
// each server, and orphans (unlinked files still open at a crash). Key
// layout: docs/metadata_format.md. This is the only file pair that knows
// RocksDB; rocksdb::Status becomes absl::Status here.
//
// Every mutation is one Batch, a namespace change that is either entirely
// on disk or not at all, and each gets a seq 1, 2, ... (the meta journal's
// record number). Changes are group committed, as HDFS's FSEditLog (an
// edit is logged under the namespace lock, logSync() runs outside it) and
// LevelDB's DBImpl::Write writer queue (the first waiter commits the
// group of every writer queued behind it):
//   - Stage(batch) gives the change its seq and makes it visible at once
//     to every later read of the *latest* view (View::kLatest), so the
//     next change can be decided on top of it; it does no I/O.
//   - WaitDurable(seq) returns once the change is durable: the first
//     waiter becomes the group's leader and, without the lock, appends
//     every change staged so far to the journal (one etcd transaction per
//     up to 120 records; nothing for a lone meta) and writes them to
//     RocksDB in one synced write with the last seq (MetaCounter::
//     kAppliedSeq); the others wait on a condition and wake when their
//     seq is durable. Changes staged meanwhile form the next group.
//   - The *durable* view (View::kDurable) is RocksDB itself: it holds
//     only changes that are durable, so readers that must not see a change
//     before it is durable read it, without waiting.
// Journal first, RocksDB second, as before: a replica's RocksDB is always
// a prefix of the journal. Staged changes not yet committed live in
// memory only, in two layers of rocksdb::WriteBatchWithIndex (the group
// being committed, and the changes staged since), read over RocksDB.
// A standby applies the records the active committed (ApplyJournalRecord).
//
// A failed group (the journal or RocksDB refused it, or its outcome is
// unknown) fails every change of it and every change staged after it
// (they were decided on top of it), and every later Stage: this replica
// stops writing (docs/meta_ha.md "Group commit").
//
// Thread-safety: all methods may be called from any thread (RocksDB is
// internally synchronized; the staged layers are under write_mu_). A
// Batch is not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"
#include "store/format/logfs.pb.h"
#include "store/meta/db/meta_journal.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace logfs::meta {

struct MetadataDbOptions {
  std::string path;  // RocksDB directory; created durably (with parents) if missing
  // Creates `path` and syncs its parent. RocksDB's own files go through
  // RocksDB's Env, not this. Not owned, must outlive the MetadataDb.
  env::FileSystem* file_system = env::FileSystem::Default();
};

// Persisted id counters. Each holds the next id to hand out.
enum class MetaCounter : uint8_t {
  kNextIno = 1,
  kNextSegmentId = 2,
  kNextMountId = 3,
  kNextServerId = 4,
  // Not a counter: the cluster's random id, made at meta's first start
  // (as HDFS's namespaceID), that segment servers keep with their own.
  kClusterId = 5,
  // Not a counter: the seq of the last meta journal record in this
  // database (docs/meta_ha.md "Journal"), written in the record's own
  // batch, so that a restarted replica resumes at the next one.
  kAppliedSeq = 6,
};

// What one change wrote that a mount's kernel may cache: inodes (their
// attributes) and directory entries, and the mount whose call it was (0:
// meta's own, or a call without a call id). Meta turns these into cache
// invalidations once the change is durable (docs/coherence.md).
struct ChangedKeys {
  uint64_t origin_mount = 0;
  uint64_t origin_call = 0;  // the call's seq (CallId), 0 if none
  std::vector<uint64_t> inodes;
  std::vector<std::pair<uint64_t, std::string>> entries;  // (parent, name)
};

class MetadataDb {
 public:
  // A set of mutations applied atomically by Write(). Later operations on
  // the same key win.
  class Batch {
   public:
    Batch();
    ~Batch();
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;

    void PutInode(const proto::Inode& inode);  // keyed by inode.attr().ino()
    void DeleteInode(uint64_t ino);
    void PutDirEntry(uint64_t parent, const proto::DirEntry& entry);  // keyed by entry.name()
    void DeleteDirEntry(uint64_t parent, const std::string& name);
    void PutCounter(MetaCounter counter, uint64_t value);
    // Keyed by server.server_id().
    void PutServer(const proto::RegisterServerRequest& server);
    void AddPendingDeletion(uint64_t server_id, uint64_t segment_id);
    void DeletePendingDeletion(uint64_t server_id, uint64_t segment_id);
    void AddOrphan(uint64_t ino);
    void DeleteOrphan(uint64_t ino);
    // The files that list a shared sealed segment (key 'g').
    void PutSharedSegment(uint64_t segment_id, const proto::SharedSegment& shared);
    void DeleteSharedSegment(uint64_t segment_id);
    // A directory snapshot's record (key 'n', by record.root()).
    void PutSnapshot(const proto::SnapshotRecord& record);
    void DeleteSnapshot(uint64_t root);
    // Meta's table of applied changes (docs/rpc.md "Retries"), keyed by
    // (call.mount_id(), call.seq()).
    void PutCallRecord(const proto::CallId& call, const proto::CallRecord& record);
    void DeleteCallRecord(uint64_t mount_id, uint64_t seq);

    // Number of operations added.
    int count() const;
    // The call this change is (ChangedKeys::origin_mount, origin_call).
    void set_origin(const proto::CallId& call);

   private:
    friend class MetadataDb;
    struct Rep;
    std::unique_ptr<Rep> rep_;
  };

  // Opens or creates the database at options.path. When it returns, the
  // directory's own entry is durable too (RocksDB fsyncs its files and the
  // directory, never the directory's parent). Errors:
  // kFailedPrecondition when another process (or another MetadataDb in this
  // process) holds the database's lock, or the directory is unusable;
  // kDataLoss on corruption; kInternal otherwise.
  static absl::StatusOr<std::unique_ptr<MetadataDb>> Open(const MetadataDbOptions& options);
  ~MetadataDb();

  // Which state a read sees: kLatest, every staged change (for deciding
  // the next change); kDurable, only changes whose WaitDurable has
  // returned or could (for answers to clients: a change that is not yet
  // durable is visible to no client).
  enum class View { kLatest, kDurable };

  // One point of the durable view (a rocksdb::Snapshot): reads given it
  // see RocksDB as it was when it was taken, so that a read of several
  // keys (a lookup's entry, then its inode) sees no group land in
  // between. Released when destroyed; must not outlive the database.
  // Thread-compatible.
  class Snapshot {
   public:
    ~Snapshot();
    Snapshot(const Snapshot&) = delete;
    Snapshot& operator=(const Snapshot&) = delete;

   private:
    friend class MetadataDb;
    Snapshot(MetadataDb* db, const void* snapshot) : db_(db), snapshot_(snapshot) {}
    MetadataDb* const db_;
    const void* const snapshot_;  // a const rocksdb::Snapshot*
  };
  std::unique_ptr<Snapshot> DurableSnapshot();

  // Stages `batch` as the next change (see the class comment) and returns
  // its seq: visible to kLatest reads at once, durable after
  // WaitDurable(seq). Stage in the order the changes were decided (meta
  // stages under Namespace's mutex). No I/O. Errors: kInvalidArgument for a
  // batch over the journal's RecordBytesMax() (nothing staged); after a
  // failed group, the failure every later write gets (WaitDurable).
  absl::StatusOr<uint64_t> Stage(Batch& batch) ABSL_LOCKS_EXCLUDED(write_mu_);
  // The seq of the last change staged (0: none since Open).
  uint64_t staged_seq() const ABSL_LOCKS_EXCLUDED(write_mu_);
  // Blocks until change `seq` (and every one before it) is durable: in the
  // journal (LocalMetaJournal until SetJournal) and in RocksDB, synced.
  // The caller may become the leader of a group and do its I/O. Errors: a
  // failed group fails its changes, the ones staged after it and every
  // later one, and calls the journal-failure handler once (this replica
  // must stop serving). With a replicated journal the error is
  // NotActiveMetaError (store/format/error_codec.h: clients look for the
  // active again); a lone meta keeps the code of RocksDB's error
  // (kResourceExhausted for ENOSPC) and writes again once restarted.
  absl::Status WaitDurable(uint64_t seq) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Stage, then WaitDurable: on disk and in the journal when OK.
  absl::Status Write(Batch& batch) ABSL_LOCKS_EXCLUDED(write_mu_);

  // Called with the changed keys of every group of changes (Stage order)
  // once the group is durable, on the thread that committed it, before
  // any WaitDurable of the group returns: a change's invalidations are out
  // before its caller answers. Must not call back into the database, and
  // should be quick (it delays the group's waiters). Set before the first
  // Stage whose keys it should see; null: none.
  using DurableObserver = std::function<void(std::vector<ChangedKeys>)>;
  void SetDurableObserver(DurableObserver observer) ABSL_LOCKS_EXCLUDED(write_mu_);

  // Groups committed and changes in them since Open (for metrics and
  // benchmarks: changes / groups is the mean group size).
  struct GroupCommitStats {
    uint64_t groups = 0;
    uint64_t changes = 0;
  };
  GroupCommitStats group_commit_stats() const ABSL_LOCKS_EXCLUDED(write_mu_);

  // Makes `journal` (not owned, must outlive the database) the journal of
  // every later Write: at promotion, after the last record was applied,
  // with nothing staged.
  void SetJournal(MetaJournal* journal) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Called once, from the failing Write's thread, when a journal failure
  // stops writes (see Write). Set before the first Write.
  void SetJournalFailureHandler(std::function<void(const absl::Status&)> handler)
      ABSL_LOCKS_EXCLUDED(write_mu_);

  // A standby's apply of the record the active committed: its batch and
  // kAppliedSeq in one RocksDB write, without sync (the journal holds it;
  // SyncWal before serving). OK without effect for a record already
  // applied; kFailedPrecondition for one past the next (a gap);
  // kDataLoss for a batch RocksDB cannot parse.
  absl::Status ApplyJournalRecord(const proto::MetaJournalRecord& record)
      ABSL_LOCKS_EXCLUDED(write_mu_);
  // Seq of the last journal record applied (0: none): the last durable
  // change.
  uint64_t applied_seq() const ABSL_LOCKS_EXCLUDED(write_mu_);
  // Makes every applied record durable (RocksDB's SyncWAL).
  absl::Status SyncWal();

  // The reads below see the latest view unless told otherwise; `at`, with
  // kDurable, reads at that snapshot. kNotFound (without an errno) when
  // absent.
  absl::StatusOr<proto::Inode> GetInode(uint64_t ino, View view = View::kLatest,
                                        const Snapshot* at = nullptr);
  absl::StatusOr<proto::DirEntry> GetDirEntry(uint64_t parent, const std::string& name,
                                              View view = View::kLatest,
                                              const Snapshot* at = nullptr);

  // One page of the entries of `parent` in name (byte) order: those after
  // `start_after` (from the first when empty), at most `max_entries` of
  // them and, past the first, at most `max_bytes` of encoded entries
  // (each as a repeated field costs: tag, length and DirEntry). One RocksDB iterator; entries added
  // or removed by concurrent writes may or may not show. kDataLoss on an unparseable entry.
  struct DirPage {
    std::vector<proto::DirEntry> entries;
    bool more = false;  // another entry follows the last one
  };
  absl::StatusOr<DirPage> ListDir(uint64_t parent, const std::string& start_after,
                                  size_t max_entries, size_t max_bytes, View view = View::kLatest);
  // True when `parent` has at least one entry.
  absl::StatusOr<bool> HasEntries(uint64_t parent);

  // The counter's value; 0 if never written.
  absl::StatusOr<uint64_t> GetCounter(MetaCounter counter);

  absl::StatusOr<std::vector<proto::RegisterServerRequest>> ListServers();

  // Up to `max_count` segment ids pending deletion on `server_id`, ascending.
  absl::StatusOr<std::vector<uint64_t>> ListPendingDeletions(uint64_t server_id, size_t max_count);
  // Whether segment `segment_id` is pending deletion on `server_id` (not
  // yet handed to it): re-replication copies no segment there meanwhile.
  // Errors from the database.
  absl::StatusOr<bool> HasPendingDeletion(uint64_t server_id, uint64_t segment_id);

  absl::StatusOr<std::vector<uint64_t>> ListOrphans();
  // The files that list segment `segment_id` when more than one does, in
  // the latest view; an empty message when one file (or none) does.
  // kDataLoss on an unparseable record.
  absl::StatusOr<proto::SharedSegment> GetSharedSegment(uint64_t segment_id);
  // Every share record, by segment id ascending (latest view). kDataLoss
  // on an unparseable record.
  absl::StatusOr<std::vector<std::pair<uint64_t, proto::SharedSegment>>> ListSharedSegments();

  // Every snapshot record, in root inode order (latest view). kDataLoss
  // on an unparseable record.
  absl::StatusOr<std::vector<proto::SnapshotRecord>> ListSnapshots();

  // The record of an applied change; kNotFound (without an errno) when
  // absent.
  absl::StatusOr<proto::CallRecord> GetCallRecord(const proto::CallId& call);
  // Deletes every change record applied before `time_ns` (a scan of all of
  // them, in one synced batch); returns how many it deleted. kDataLoss on
  // an unparseable record.
  absl::StatusOr<uint64_t> DeleteCallRecordsBefore(int64_t time_ns);

  // Up to `max_count` inodes with ino >= start_ino, ascending (a bounded
  // scan for re-replication and inspection; consistent per inode only).
  // kDataLoss on an unparseable inode.
  absl::StatusOr<std::vector<proto::Inode>> ListInodes(uint64_t start_ino, size_t max_count);

  // Number of inodes (a full scan of the inode keys; call at start only).
  absl::StatusOr<uint64_t> CountInodes();

 private:
  struct Rep;
  explicit MetadataDb(std::unique_ptr<Rep> rep);
  struct Layer;  // staged changes: a rocksdb::WriteBatchWithIndex
  void FailJournalLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The leader's work: commits every change staged so far as one group,
  // without the lock while it does I/O.
  void CommitGroupLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // The value of `key` in `view`; kNotFound ("<what> not found") when
  // absent.
  absl::StatusOr<std::string> ReadKey(const std::string& key, absl::string_view what, View view,
                                      const Snapshot* at = nullptr) ABSL_LOCKS_EXCLUDED(write_mu_);
  // Calls fn(key, value) for each key >= `start` that starts with
  // `prefix`, in key order, until fn returns false. A kLatest scan holds
  // write_mu_ throughout (fn must not call back into the database).
  // Every value under key `prefix`, parsed as a Message, in key order
  // (latest view); kDataLoss ("<what>") on one that does not parse.
  template <typename Message>
  absl::StatusOr<std::vector<Message>> ListMessages(char prefix, absl::string_view what);
  template <typename Fn>
  absl::Status ScanKeys(const std::string& prefix, const std::string& start, View view, Fn fn,
                        const Snapshot* at = nullptr) ABSL_LOCKS_EXCLUDED(write_mu_);

  std::unique_ptr<Rep> rep_;
  LocalMetaJournal local_journal_;

  mutable absl::Mutex write_mu_;
  MetaJournal* journal_ ABSL_GUARDED_BY(write_mu_) = &local_journal_;
  uint64_t applied_seq_ ABSL_GUARDED_BY(write_mu_) = 0;  // durable
  uint64_t staged_seq_ ABSL_GUARDED_BY(write_mu_) = 0;
  // Changes applied_seq_ + 1 .. staged_seq_: the group being committed
  // (committing_, null when no group is) and the ones staged since
  // (staged_, with their batches for the journal in staged_records_).
  // A layer is immutable once it is committing_, so reads use it without
  // the lock.
  std::shared_ptr<Layer> committing_ ABSL_GUARDED_BY(write_mu_);
  std::shared_ptr<Layer> staged_ ABSL_GUARDED_BY(write_mu_);
  std::vector<std::string> staged_records_ ABSL_GUARDED_BY(write_mu_);
  // With an observer: the keys of the changes in staged_ (Stage order).
  std::vector<ChangedKeys> staged_keys_ ABSL_GUARDED_BY(write_mu_);
  DurableObserver durable_observer_ ABSL_GUARDED_BY(write_mu_);
  GroupCommitStats stats_ ABSL_GUARDED_BY(write_mu_);
  // Not OK once a failed group stopped writes (WaitDurable).
  absl::Status journal_failure_ ABSL_GUARDED_BY(write_mu_);
  std::function<void(const absl::Status&)> on_journal_failure_ ABSL_GUARDED_BY(write_mu_);

  // ------------------------------------------------------------ checkpoints
  // In store/meta/metadata_db_checkpoint.cc.
 public:
  struct CheckpointFile {
    std::string name;  // relative to the checkpoint's directory (no '/')
    uint64_t size_bytes = 0;
  };
  struct CheckpointInfo {
    std::vector<CheckpointFile> files;  // by name
    uint64_t applied_seq = 0;           // kAppliedSeq in the checkpoint (0 if never written)
  };

  // Makes a consistent copy of the database at `dir` (rocksdb::Checkpoint,
  // as RocksDB's BackupEngine does it: the memtable flushed, then table
  // files hard-linked where `dir` is on the same file system, else copied,
  // and the MANIFEST, OPTIONS and live WAL copied), so that `dir` opens as
  // a MetadataDb holding exactly the writes made before some point during
  // the call, kAppliedSeq included. The parent of `dir` must exist; `dir`
  // must not. Concurrent writes are fine (each lands wholly before or
  // after the point). The files are durable when it returns (RocksDB
  // fsyncs them and the directory). Errors: kInvalidArgument for an empty
  // `dir`; kAlreadyExists if `dir` exists; kResourceExhausted for ENOSPC;
  // kDataLoss if the checkpoint cannot be read back; kInternal otherwise
  // (e.g. a missing parent). A failed call may leave `dir` or `dir`.tmp
  // behind: the caller removes them.
  absl::StatusOr<CheckpointInfo> CreateCheckpoint(const std::string& dir);

 private:
  rocksdb::DB* rocks_db() const;                                    // in metadata_db.cc; never null
  static std::string CounterKeyForCheckpoint(MetaCounter counter);  // in metadata_db.cc
};

}  // namespace logfs::meta
