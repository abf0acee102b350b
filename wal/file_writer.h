// The writer of one file open for write in a mount: fans every append out
// to all replicas of the file's open segment at once, tracks each replica's
// durable length, and completes syncs when the ack quorum has the bytes
// (acked length = the ack-quorum-th largest durable length, DESIGN §4).
//
// WAL files send each write at once, asking the replicas to make it durable
// at once; block files buffer writes into appends of `append_bytes`.
// Concurrent Syncs share one wait (group commit, as LevelDB's
// DBImpl::Write groups writers): for WAL files the answers of appends in
// flight; for block files a replica Sync round, which covers every byte
// sent before it (a sync that arrives during a round waits for the next). Waiters are callbacks kept in a map ordered by target
// length and fired, outside the lock, when the acked length passes it.
//
// Errors are sticky: once a quorum is lost the writer fails every waiter
// and every later call (fsyncgate: never retry and pretend).
//
// Thread-safe. Write may block (queue full, segment roll); Sync never does.
// Owned through shared_ptr: in-flight replica calls keep it alive.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include <asio.hpp>
#include "store/rpc/client_pool.h"
#include "store/format/logfs.pb.h"
#include "store/client/meta_retry.h"

namespace logfs::wal {

struct FileWriterOptions {
  uint64_t mount_id = 0;
  uint64_t segment_bytes = 64ull << 20;    // roll the segment at this size
  size_t append_bytes = 1;                 // send once this much is buffered
  size_t max_unacked_bytes = 32u << 20;    // Write blocks above this
  absl::Duration replica_timeout = absl::Seconds(10);  // one replica call
  absl::Duration fsync_timeout = absl::Seconds(30);    // a blocked Write/Close
  absl::Duration meta_timeout = absl::Seconds(10);  // one attempt of a meta call
  // Meta calls (seal, roll, truncate) whose transport fails are retried
  // this long (store/client/meta_retry.h): a meta restart in that window does not
  // fail the writer.
  absl::Duration meta_retry = absl::Seconds(30);
  // Ids that make the writer's changes in meta exactly-once across those
  // retries (the mount's sequence). Unset: no ids, and a retried seal that
  // meta applied before it died fails with ESTALE or EBUSY.
  std::function<proto::CallId()> next_call_id;
  // Runs a blocking job (a recovery) off the network threads. The owner
  // must finish every job before it tears down the client pool (Mount
  // joins its thread pool first). Unset: a detached thread per job.
  std::function<void(std::function<void()>)> run_blocking;
};

class FileWriter : public std::enable_shared_from_this<FileWriter> {
 public:
  using SyncCallback = std::function<void(absl::Status)>;

  // `inode` is what meta's OpenWrite returned (every segment sealed). The
  // lease is held; Close releases it. `meta` and `pool` must outlive the
  // writer.
  static std::shared_ptr<FileWriter> Create(FileWriterOptions options, proto::Inode inode,
                                            std::shared_ptr<rpc::RpcClient> meta,
                                            rpc::ClientPool* pool);
  ~FileWriter();

  // Appends `data` at `offset`, or at the current end when `offset` is
  // nullopt (O_APPEND). Returns once the bytes are queued for the replicas.
  // Errors: EPERM (offset is not the end of file; nothing is written), the
  // sticky error (EIO) after a failure, kFailedPrecondition after Close.
  absl::Status Write(std::optional<uint64_t> offset, absl::string_view data)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `done` once every byte written before this call is durable on
  // the ack quorum, or with the sticky error. Never blocks; `done` may run
  // on this thread or a network thread.
  void Sync(SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Sync, then seal the open segment on its replicas and in meta, and
  // release the lease; meta records the time of the last write (or of the
  // last SetMtime) as the file's mtime. Blocks. Returns the first error
  // seen; after a failure the file is sealed at its acked length.
  absl::Status Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Seals the open segment once everything written is durable, keeping the
  // lease: after it the file's length is final for every reader, and a
  // later Write opens a new segment. Never blocks; Writes wait while the
  // seal is in progress. This is what close(2) (FUSE flush) does, so that
  // close returns only when the length is final (DESIGN §3).
  void SealAsync(SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Empties a WAL file that this writer holds (truncate(0), O_TRUNC: log
  // rotation by copy-truncate). Drops every segment in meta; later
  // appends start a new segment at offset 0. Syncs waiting for the
  // discarded bytes complete. Blocks. EIO after an earlier failure.
  absl::Status TruncateToZero() ABSL_LOCKS_EXCLUDED(mu_);

  // An explicit mtime (utimens) that Close must keep, in ns since the epoch.
  void SetMtime(int64_t mtime_ns) ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t length() const ABSL_LOCKS_EXCLUDED(mu_);        // bytes accepted
  uint64_t acked_length() const ABSL_LOCKS_EXCLUDED(mu_);  // durable on the quorum
  proto::FileKind kind() const { return kind_; }
  uint64_t ino() const { return ino_; }

  // Segments as readers of this mount see them: sealed ones, then the open
  // one with its acked length.
  std::vector<proto::Segment> ReadableSegments() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct ReplicaState {
    uint64_t server_id = 0;
    std::string address;
    uint64_t durable_length = 0;  // segment-relative
    bool failed = false;
  };

  FileWriter(FileWriterOptions options, proto::Inode inode, std::shared_ptr<rpc::RpcClient> meta,
             rpc::ClientPool* pool);
  // Keeps busy_ (and the mount's count of busy writers) equal to "bytes
  // sent to the replicas and not yet acked, no error": call after acked_,
  // sent_, open_, error_ or closed_ change. A stale true only turns the
  // quorum-only sync off (EagerSync); it never affects durability.
  void UpdateBusyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  bool CanAcceptLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteInternal(std::optional<uint64_t> offset, absl::string_view data,
                             rpc::CallBatch* sends) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CloseInternal() ABSL_LOCKS_EXCLUDED(mu_);
  // Sends buffer_ to every live replica of open_. With `sends` (Write,
  // Sync, replies), the calls are only queued, in order, and the caller
  // writes them with sends->Flush() once it has released mu_: no lock is
  // held across those sendmsgs, so the io thread never waits on mu_ for
  // them. Without (rolls, seals, close, recovery: rare), they are written
  // at once, under mu_.
  void SendBufferLocked(rpc::CallBatch* sends = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartSyncRoundLocked(rpc::CallBatch* sends = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts a Sync round for waiting syncs unless one is in flight or the
  // appends already ask for sync (EagerSync).
  void RequestSyncRoundLocked(rpc::CallBatch* sends = nullptr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WAL files: every append asks the segment servers to fdatasync at once
  // (their group commit shares the fdatasync), so an fsync waits only for
  // the appends' answers. When no append of the mount is in flight (one
  // writer, RocksDB fillseq), only the first ack quorum of live replicas
  // is asked; the others sync within their --sync_interval_ms (5 ms by
  // default), in rounds that cover many appends. That saves a disk write
  // and flush per append, and the CPU they cost (about 40 us on a VM),
  // which the application's next call can use. The cost: if one of the
  // asked replicas is frozen or slow, that fsync waits for the others'
  // interval round. With anything else in flight (other writers, this
  // writer's own earlier appends, block-file appends) every replica is
  // asked, so that the ack comes from the fastest ack quorum of them. Block files leave it to Sync rounds, and so does
  // a WAL whose application has not synced for kLazyAfterAppends appends
  // (RocksDB with sync=false): its appends become durable within the
  // servers' --sync_interval_ms instead of costing an fdatasync each, and
  // its next fsync sends a Sync round and makes it eager again.
  static constexpr uint64_t kLazyAfterAppends = 32;
  bool EagerSync() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return kind_ == proto::KIND_WAL && appends_since_sync_ < kLazyAfterAppends;
  }
  void OnReplicaResponse(uint64_t segment_id, size_t replica, absl::Status status,
                         const std::string& message, bool sync_round) ABSL_LOCKS_EXCLUDED(mu_);
  // Latches the first error and moves every sync waiter to failed_waiters_;
  // callers run RunFailedWaiters() once they have dropped mu_.
  void SetErrorLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunFailedWaiters() ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the writer (EIO, sticky) if a sync waits past fsync_timeout.
  void ArmFsyncDeadlineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnFsyncDeadline() ABSL_LOCKS_EXCLUDED(mu_);
  void StartRecoveryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Recover() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RollAwayFromFailedReplicasLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<size_t>> SealSurvivorsLocked(uint64_t* sealed_length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status OpenNextSegmentLocked(uint64_t sealed_id, uint64_t sealed_length,
                                     const std::vector<uint64_t>& failed_servers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TrimTailLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IdleLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !rolling_ && !sealing_ && !recovering_;
  }
  std::vector<SyncCallback> TakeReadyWaitersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WaitAckedLocked(uint64_t target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SealOpenSegmentLocked(uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<proto::Inode> MetaSeal(uint64_t segment_id, uint64_t length, bool close,
                                        int64_t mtime_ns,
                                        const std::vector<uint64_t>& failed_servers)
      ABSL_LOCKS_EXCLUDED(mu_);
  client::MetaRetryOptions MetaRetry() const;
  // Creates the segment's replicas; returns the servers that failed.
  std::vector<uint64_t> CreateReplicas(const proto::Segment& segment) ABSL_LOCKS_EXCLUDED(mu_);
  void SealReplicasAsync(SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> FailedServerIdsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the failed servers and the writer's sealed file length to a seal.
  void FillSealRequest(const std::vector<uint64_t>& failed_servers,
                       proto::SealSegmentRequest* request) ABSL_LOCKS_EXCLUDED(mu_);
  void FinishSealAsync(uint64_t segment_id, uint64_t length, absl::Status status,
                       std::vector<uint64_t> failed_servers,
                       SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Immutable after construction.
  const FileWriterOptions options_;
  const uint64_t ino_;
  const proto::FileKind kind_;
  const std::shared_ptr<rpc::RpcClient> meta_;
  rpc::ClientPool* const pool_;

  mutable absl::Mutex mu_;
  std::vector<proto::Segment> sealed_ ABSL_GUARDED_BY(mu_);
  uint64_t appends_since_sync_ ABSL_GUARDED_BY(mu_) = 0;  // since the last Sync call
  std::optional<proto::Segment> open_ ABSL_GUARDED_BY(mu_);  // the open segment
  std::vector<ReplicaState> replicas_ ABSL_GUARDED_BY(mu_);  // of open_
  uint32_t ack_quorum_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t length_ ABSL_GUARDED_BY(mu_) = 0;     // file bytes accepted
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;       // bytes of open_ sent to replicas
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;      // file bytes durable on the quorum
  std::string buffer_ ABSL_GUARDED_BY(mu_);      // accepted, not yet sent
  struct SyncWaiter {
    SyncCallback done;
    absl::Time since;  // for the --fsync_timeout_ms deadline
  };
  std::multimap<uint64_t, SyncWaiter> waiters_ ABSL_GUARDED_BY(mu_);  // by target
  std::vector<SyncCallback> failed_waiters_ ABSL_GUARDED_BY(mu_);
  // Steps to resume once the recovery in progress has finished (a seal
  // that found a replica failed); run by Recover() without mu_.
  std::vector<std::function<void()>> after_recovery_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<asio::steady_timer> fsync_timer_ ABSL_GUARDED_BY(mu_);
  bool fsync_timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  int sync_round_replies_ ABSL_GUARDED_BY(mu_) = 0;  // replies a round still awaits
  bool rolling_ ABSL_GUARDED_BY(mu_) = false;   // Write/Close wait while set
  bool sealing_ ABSL_GUARDED_BY(mu_) = false;   // SealAsync in progress
  bool recovering_ ABSL_GUARDED_BY(mu_) = false;  // rolling away from a failed replica
  // Seal RPCs for open_ are in flight: a replica failure seen now is the
  // seal's to handle (it needs its quorum), not recovery's.
  bool seal_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  // Bytes of open_ from tail_start_ to sent_ that not every live replica
  // has made durable: what a roll re-sends to the next segment.
  std::string tail_ ABSL_GUARDED_BY(mu_);
  uint64_t tail_start_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;  // counted in the process's busy writers
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = 0;    // of the last write
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  absl::Status last_replica_error_ ABSL_GUARDED_BY(mu_);  // why a replica last failed
};

}  // namespace logfs::wal
