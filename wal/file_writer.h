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
// sent before it (a sync that arrives during a round waits for the next).
// Waiters are callbacks ordered by target length (wal/sync_waiters.h) and
// run, outside the lock, when the acked length passes it.
//
// Errors are sticky: once a quorum is lost the writer fails every waiter
// and every later call (fsyncgate: never retry and pretend).
//
// Its parts, each a value type with its own test, all under one mutex:
// the replicas of the open segment (wal/replica_set.h), the bytes on their
// way to them (wal/append_tail.h), the waiting syncs (wal/sync_waiters.h)
// and one phase (wal/writer_phase.h). It reaches the segment servers, meta
// and the clock through WriterDeps (wal/writer_deps.h). The member
// definitions are split by job: file_writer.cc (admission, Write, Sync,
// errors), replica_fanout.cc (appends, sync rounds, answers),
// segment_roll.cc, segment_seal.cc (one replica seal fan-out and one meta
// seal for roll, flush and close), recovery.cc, truncate.cc,
// segment_append.cc and fsync_deadline.cc.
//
// Thread-safe. Write may block (queue full, segment roll); Sync never does.
// Owned through shared_ptr: in-flight replica calls keep it alive.
#pragma once

#include <cstdint>
#include <deque>
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
#include "store/client/meta_client.h"
#include "store/client/segd_client.h"
#include "store/format/logfs.pb.h"
#include "wal/append_tail.h"
#include "wal/replica_lag.h"
#include "wal/replica_set.h"
#include "wal/slow_servers.h"
#include "wal/sync_waiters.h"
#include "wal/writer_deps.h"
#include "wal/writer_phase.h"

namespace logfs::wal {

struct FileWriterOptions {
  uint64_t mount_id = 0;
  // Roll the segment at this size (bytes, > 0: with 0 every write would
  // roll forever, so Write refuses it with kInvalidArgument).
  uint64_t segment_bytes = 64ull << 20;
  // A WAL file's first write of this writer continues the file's last
  // segment if it is shorter than this (bytes) and meta finds its replica
  // set whole and healthy (MetaSealCall::continue_below_bytes), as HDFS
  // appends to a file's last block: a file reopened for append by one
  // short-lived writer after another (`cmd >> log`) keeps one segment
  // instead of gaining one per writer. Every replica must reopen, else the
  // segment is sealed back and a new one placed. 0: always a new segment.
  uint64_t continue_below_bytes = 0;
  size_t append_bytes = 1;                             // send once this much is buffered
  // Unsynced WAL appends (a WAL whose application has not synced for
  // kLazyAfterAppends appends: RocksDB with sync=false) are coalesced:
  // held in the buffer until `coalesce_bytes` are there, a Sync (fsync,
  // close, a read of them on this mount) asks for them, or
  // `coalesce_delay` passed since the first, then sent as one append to
  // each replica instead of one per write(). Nobody waits for those bytes,
  // so only CPU and round trips change; the delay keeps them reaching the
  // replicas, and readers of other mounts (tail -f), within about a
  // millisecond plus the servers' --sync_interval_ms. Zero delay: off.
  size_t coalesce_bytes = 128u << 10;
  absl::Duration coalesce_delay = absl::ZeroDuration();
  size_t max_unacked_bytes = 32u << 20;                // Write blocks above this
  absl::Duration replica_timeout = absl::Seconds(10);  // one replica call
  absl::Duration fsync_timeout = absl::Seconds(30);    // a blocked Write/Close
  // Ids that make the writer's changes in meta exactly-once across
  // retries (the mount's sequence). Unset: client::MetaClient stamps its
  // own, from the same sequence.
  std::function<proto::CallId()> next_call_id;
  // Runs a blocking job (a recovery) off the network threads. The owner
  // must finish every job before it tears down the client pool (the client
  // joins its thread pool first), and must not run it inline. Unset: a
  // detached thread per job.
  std::function<void(std::function<void()>)> run_blocking;
  // Runs the jobs of WriteAsync and CloseAsync that wait for replicas (a
  // write queued behind a full queue or a roll, a close), as run_blocking
  // does but on other threads: such a job may wait for a recovery, which
  // must never queue behind it. Unset: a detached thread per job.
  std::function<void(std::function<void()>)> run_waiting;
  // Slow-replica exclusion (wal/replica_lag.h): a replica of the open
  // segment found slow by this rule is rolled away from at the next Write
  // (roll, not repair; its replica of the sealed segment stays), and its
  // server is avoided by new segments for `avoid_slow_server_for`.
  // slow_replica.slow_lag zero turns it off.
  ReplicaLagOptions slow_replica;
  absl::Duration avoid_slow_server_for = absl::Minutes(10);
  // At most one roll away from one server per this long: meta, short of
  // other servers with room, may place the new segment on it again, and
  // rolling every window then would only make tiny segments.
  absl::Duration slow_roll_backoff = absl::Seconds(30);
  // The process's list of servers to avoid, shared by its writers (a
  // mount's); unset: the writer keeps one of its own.
  std::shared_ptr<SlowServers> slow_servers;
};

class FileWriter final : public ReplicaReplyHandler,
                         public std::enable_shared_from_this<FileWriter> {
 public:
  using SyncCallback = std::function<void(absl::Status)>;

  // A WAL whose application has not synced for this many appends stops
  // asking for an fdatasync per append (EagerSync), and its writes are
  // coalesced (FileWriterOptions::coalesce_delay).
  static constexpr uint64_t kLazyAfterAppends = 32;

  // `inode` is what meta's OpenWrite returned (every segment sealed). The
  // lease is held; Close releases it. `meta` and `segd` must outlive the
  // writer. Meta calls (seal, roll, truncate) follow `meta`'s retry policy:
  // a meta restart within its retry window does not fail the writer.
  static std::shared_ptr<FileWriter> Create(FileWriterOptions options, proto::Inode inode,
                                            client::MetaClient* meta, client::SegdClient* segd);
  // The same over any WriterDeps (a unit test's fake). `deps` is shared
  // with the calls in flight.
  static std::shared_ptr<FileWriter> Create(FileWriterOptions options, proto::Inode inode,
                                            std::shared_ptr<WriterDeps> deps);
  ~FileWriter() override;

  // Appends `data` at `offset`, or at the current end when `offset` is
  // nullopt (O_APPEND). Returns once the bytes are queued for the replicas.
  // Errors: EPERM (offset is not the end of file; nothing is written), the
  // sticky error (EIO) after a failure, kFailedPrecondition after Close,
  // kInvalidArgument (EINVAL) when options.segment_bytes is 0.
  absl::Status Write(std::optional<uint64_t> offset, absl::string_view data)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Write that never blocks, for callers that must not wait (a FUSE worker,
  // DESIGN §2): a write the writer can take at once is taken here and
  // `done` runs inline with Write's result. One that would wait (the queue
  // of unacked bytes is full, a roll, seal or recovery is in progress, or
  // the write needs a roll) has its bytes copied and is queued, in order
  // behind any other queued write, and `done` runs on a run_waiting thread
  // once Write has taken it or failed. Until the queue is empty, later
  // writes queue behind it, so writes are taken in call order; a write
  // sent once the last queued one was answered is taken inline again.
  void WriteAsync(std::optional<uint64_t> offset, absl::string_view data, SyncCallback done)
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
  // Close on a run_waiting thread, then `done` with its result there. Never
  // blocks.
  void CloseAsync(SyncCallback done);

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

  // Shrinks a block file this writer holds to `length` bytes (ftruncate
  // before close: RocksDB's direct-I/O writer cuts the padding of its last
  // aligned write so). The cut must lie in bytes no reader has seen: past
  // every sealed segment, in the open one or in the buffer (readers on
  // other mounts see a block file's sealed segments only). A cut in the
  // buffer drops bytes never sent; one in the open segment waits until it
  // is acked, seals it at the cut (the replicas cut it) and keeps the
  // lease, so a later write opens a new segment, as after a flush. Blocks.
  // Errors: EPERM for a WAL file, a cut into a sealed segment, or a length
  // past the end; the sticky error; kFailedPrecondition after Close.
  absl::Status CutTo(uint64_t length) ABSL_LOCKS_EXCLUDED(mu_);

  // Appends sealed segments that another file lists to the end of this
  // one, without their bytes (copy_file_range: fsclient::Client::
  // CopyRange). Applies only while the writer has no open segment and no
  // byte buffered, unacked or queued, no roll, seal or recovery runs, and
  // `offset` is its length; then runs `at_meta(lease_epoch)` (meta's
  // CopyRange, which appends them and returns the inode), during which
  // writes wait, and takes the returned inode's segments as the file's:
  // later writes start a new segment after them. Never waits for a
  // segment server; blocks on `at_meta`. Returns the bytes appended.
  // Errors: EOPNOTSUPP (kFailedPrecondition) when the writer's state does
  // not allow it, and at_meta's own error when meta answered with one:
  // nothing changed, the caller copies bytes instead. EIO, sticky, when
  // meta could not be reached (kUnavailable, kDeadlineExceeded: the
  // segments may or may not be appended) or answered with an inode that
  // does not continue the writer's. The sticky error, kFailedPrecondition
  // after Close.
  using AppendAtMeta = std::function<absl::StatusOr<proto::Inode>(uint64_t lease_epoch)>;
  absl::StatusOr<uint64_t> AppendSegments(uint64_t offset, const AppendAtMeta& at_meta)
      ABSL_LOCKS_EXCLUDED(mu_);

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
  using Callbacks = std::vector<SyncCallback>;
  // What the replica seal fan-out (SealReplicas) found.
  struct ReplicaSealResult {
    std::vector<size_t> sealed;  // replica indexes that sealed
    std::vector<size_t> failed;  // ... and those that did not
    absl::Status last_error;     // of a failed one
    bool no_space = false;       // some replica was out of space
  };
  // A replica to seal: its index in replicas_ and its address.
  using ReplicaAddresses = std::vector<std::pair<size_t, std::string>>;
  // What Close sealed on the replicas, for the seal at meta.
  struct CloseSeal {
    uint64_t segment_id = 0;  // 0: none was open
    uint64_t length = 0;
    absl::Status replicas;  // of the replica seal
    absl::Status status;    // Close's result so far
  };

  FileWriter(FileWriterOptions options, proto::Inode inode, std::shared_ptr<WriterDeps> deps);

  // --- file_writer.cc: phase, admission, Write, Sync, errors.
  // Moves the phase along the table in wal/writer_phase.h (CHECKed).
  void SetPhaseLocked(WriterPhase next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends operation phase `from` (kRolling, kSealing, kClosing) with `to`.
  // If a recovery interrupted it and still runs, the recovery resumes `to`.
  void EndPhaseLocked(WriterPhase from, WriterPhase to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No roll, seal or recovery in progress (the writer may be closing).
  bool QuiescentLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Close has started (Writes fail).
  bool ClosedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Keeps busy_ (and the mount's count of busy writers) equal to "bytes
  // sent to the replicas and not yet acked, no error": call after the
  // acked or sent bytes, open_, error_ or the phase change. A stale true
  // only turns the quorum-only sync off (EagerSync); it never affects
  // durability.
  void UpdateBusyLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool CanAcceptLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteInternal(std::optional<uint64_t> offset, absl::string_view data,
                             rpc::CallBatch* sends) ABSL_LOCKS_EXCLUDED(mu_);
  // Write's work once the writer can accept: the checks, then buffering
  // and sending, rolling where a segment fills (which drops mu_).
  absl::Status AcceptLocked(std::optional<uint64_t> offset, absl::string_view data,
                            rpc::CallBatch* sends) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a write of `bytes` bytes now would have to wait: for room in
  // the queue, for an operation in progress, or for a roll of its own.
  bool WriteWouldWaitLocked(size_t bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the queued writes one by one with Write, in order, on a
  // run_waiting thread, until none is left; the drain has ended when the
  // last one's `done` runs.
  void DrainQueuedWrites() ABSL_LOCKS_EXCLUDED(mu_);
  // Runs `job` as options_.run_waiting says (a thread of its own if unset).
  void RunWaiting(std::function<void()> job);
  // Latches the first error and moves every sync waiter to failed_waiters_;
  // callers run RunFailedWaiters() once they have dropped mu_.
  void SetErrorLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunFailedWaiters() ABSL_LOCKS_EXCLUDED(mu_);
  Callbacks TakeReadyWaitersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- replica_fanout.cc: appends, sync rounds, the replicas' answers.
  // Sends the buffered bytes to every live replica of open_. With `sends`
  // (Write, Sync, replies), the calls are only queued, in order, and the
  // caller writes them with sends->Flush() once it has released mu_: no
  // lock is held across those sendmsgs, so the io thread never waits on
  // mu_ for them. Without (rolls, seals, close, recovery: rare), they are
  // written at once, under mu_.
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
  // asked, so that the ack comes from the fastest ack quorum of them.
  // Block files leave it to Sync rounds, and so does a WAL whose
  // application has not synced for kLazyAfterAppends appends (RocksDB with
  // sync=false): its appends become durable within the servers'
  // --sync_interval_ms instead of costing an fdatasync each, and its next
  // fsync sends a Sync round and makes it eager again (kLazyAfterAppends,
  // public above).
  bool EagerSync() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return kind_ == proto::KIND_WAL && appends_since_sync_ < kLazyAfterAppends;
  }
  // Whether buffered bytes wait to be coalesced (options_.coalesce_delay):
  // a lazy WAL's, below coalesce_bytes.
  bool CoalescingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return kind_ == proto::KIND_WAL && !EagerSync() &&
           options_.coalesce_delay > absl::ZeroDuration() &&
           tail_.buffered() < options_.coalesce_bytes;
  }
  // Sends the buffer once coalesce_delay has passed (one timer at a time).
  void ArmCoalesceTimerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnCoalesceTimer() ABSL_LOCKS_EXCLUDED(mu_);
  void OnReplicaReply(uint64_t segment_id, size_t replica, bool sync_round,
                      absl::StatusOr<uint64_t> durable_length) override ABSL_LOCKS_EXCLUDED(mu_);
  // Records replica `replica`'s durable length and what it acks, and
  // watches its lag behind the quorum (NoteSlowReplicaLocked).
  void OnDurableLocked(size_t replica, uint64_t durable_length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once lag_ finds a live replica slow: lists its server in
  // slow_servers_ and asks the next Write to roll (slow_roll_segment_).
  void NoteSlowReplicaLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the open segment is to be rolled away from a slow replica.
  bool SlowRollDueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return open_.has_value() && slow_roll_segment_ == open_->id();
  }
  // Waits (mu_.Await drops mu_) until the file's first `target` bytes are
  // acked and no recovery runs, or the writer fails; fails it with EIO
  // after fsync_timeout. Returns error_.
  absl::Status WaitAckedUnlocking(uint64_t target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- segment_roll.cc: the next segment.
  // Seals the open segment once it is acked and opens the next. Drops mu_
  // for the replica and meta calls; Writes wait (kRolling) meanwhile.
  absl::Status RollUnlocking() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts and logs a roll away from a slow replica of open_.
  void CountSlowRollLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seals `sealed_id` at `sealed_length` in meta, which places the next
  // segment, and creates its replicas (a few placements at most); then
  // installs it. Drops mu_ for those calls.
  absl::Status OpenNextSegmentUnlocking(uint64_t sealed_id, uint64_t sealed_length,
                                        const std::vector<uint64_t>& failed_servers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The meta seal and replica creation of OpenNextSegmentUnlocking.
  absl::StatusOr<proto::Inode> PlaceNextSegment(MetaSealCall call) ABSL_LOCKS_EXCLUDED(mu_);
  // Creates the segment's replicas; returns the servers that failed.
  std::vector<uint64_t> CreateReplicas(const proto::Segment& segment) ABSL_LOCKS_EXCLUDED(mu_);
  // Reopens the replicas of a continued segment (meta gave the file's last
  // one back open); if any refuses, seals them all back at its length.
  struct ReopenResult {
    std::vector<uint64_t> refused;          // servers that did not reopen
    std::vector<uint64_t> not_sealed_back;  // ... and that then did not seal
  };
  ReopenResult ReopenReplicas(const proto::Segment& segment) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes meta's new open segment (the last of `inode`) the writer's; the
  // old one ends at `sealed_length`, and its bytes past that go to the
  // new one.
  absl::Status InstallSegmentLocked(const proto::Inode& inode, uint64_t sealed_length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- segment_seal.cc: the one replica seal and the one meta seal.
  // Seals `segment` at `length` on `replicas` at once; `done` runs once
  // each has answered (inline when there are none). No lock held.
  void SealReplicas(SegmentRef segment, uint64_t length, ReplicaAddresses replicas,
                    std::function<void(ReplicaSealResult)> done) ABSL_LOCKS_EXCLUDED(mu_);
  ReplicaSealResult SealReplicasAndWait(SegmentRef segment, uint64_t length,
                                        ReplicaAddresses replicas) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the replicas that did not seal failed; EIO unless an ack quorum
  // sealed.
  absl::Status ApplyReplicaSealLocked(uint64_t segment_id, const ReplicaSealResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ReplicaAddresses LiveReplicasLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Seals open_ at `length` on its live replicas (blocking; mu_ dropped
  // meanwhile). Sets seal_in_flight_, which the caller (a roll, Close)
  // clears once open_ is replaced or closed: a replica that fails after
  // the seal needs no recovery, and one must not race the roll or close.
  absl::Status SealOpenSegmentUnlocking(uint64_t length) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The SealSegment at meta for the writer's segment `segment_id`.
  MetaSealCall MetaSealCallLocked(uint64_t segment_id, uint64_t length,
                                  const std::vector<uint64_t>& failed_servers) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<proto::Inode> MetaSealAndWait(const MetaSealCall& call) ABSL_LOCKS_EXCLUDED(mu_);
  // SealAsync's steps: seal the replicas, then meta; or fail the seal.
  void SealReplicasAsync(SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAsyncReplicaSeal(SegmentRef segment, uint64_t length, ReplicaSealResult result,
                          SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);
  void OnAsyncMetaSeal(uint64_t segment_id, uint64_t length, absl::Status status, SyncCallback done)
      ABSL_LOCKS_EXCLUDED(mu_);
  void FailAsyncSeal(absl::Status status, SyncCallback done) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CloseInternal() ABSL_LOCKS_EXCLUDED(mu_);
  // Close's sync and replica seal (mu_ dropped for both).
  CloseSeal SealForCloseUnlocking() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- recovery.cc: rolling away from a failed replica.
  void StartRecoveryLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Recover() ABSL_LOCKS_EXCLUDED(mu_);
  // Seals the open segment on its survivors and opens the next, with the
  // bytes past the seal re-sent there. Drops mu_ for the calls.
  absl::Status RollAwayUnlocking() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Asks the survivors their lengths, picks the seal length, brings short
  // ones up to it from the tail and seals them; returns the sealed ones.
  absl::StatusOr<std::vector<size_t>> SealSurvivorsUnlocking(uint64_t* sealed_length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Brings each of `answered` (index, length) up to `length` from the tail
  // (dropping those the tail can no longer complete), then seals them.
  ReplicaSealResult CompleteAndSealUnlocking(
      const std::vector<std::pair<size_t, uint64_t>>& answered, uint64_t length)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- truncate.cc: CutTo's seal of the open segment at `cut` (segment
  // offset), once everything sent is acked, in phase kSealing (which it
  // ends); drops mu_ for the calls.
  absl::Status CutToInternal(uint64_t length) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SealAtCutUnlocking(uint64_t cut) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- segment_append.cc: AppendSegments' check of the writer's state,
  // and its taking of meta's answer (CHECKs phase kRolling).
  absl::Status CanAppendSegmentsLocked(uint64_t offset) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<uint64_t> TakeAppendedLocked(absl::StatusOr<proto::Inode> inode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- fsync_deadline.cc: fails the writer (EIO, sticky) if a sync waits
  // past fsync_timeout.
  void ArmFsyncDeadlineLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnFsyncDeadline() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status NoQuorumInTimeError() const;

  // Immutable after construction.
  const FileWriterOptions options_;
  const uint64_t ino_;
  const uint64_t lease_epoch_;  // the inode's when opened (MetaSealCall)
  const proto::FileKind kind_;
  const std::shared_ptr<WriterDeps> deps_;
  const std::shared_ptr<SlowServers> slow_servers_;  // never null

  mutable absl::Mutex mu_;
  WriterPhase phase_ ABSL_GUARDED_BY(mu_) = WriterPhase::kIdle;
  // The phase a running recovery goes back to (what it interrupted).
  WriterPhase resume_phase_ ABSL_GUARDED_BY(mu_) = WriterPhase::kIdle;
  // open_ is being sealed (replica seals in flight, or done and the roll,
  // flush or close not yet finished): a replica failure seen now is the
  // seal's to handle (it needs its quorum), not recovery's.
  bool seal_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<proto::Segment> sealed_ ABSL_GUARDED_BY(mu_);
  std::optional<proto::Segment> open_ ABSL_GUARDED_BY(mu_);  // the open segment
  ReplicaSet replicas_ ABSL_GUARDED_BY(mu_);                 // of open_
  ReplicaLagMonitor lag_ ABSL_GUARDED_BY(mu_);               // of open_'s replicas
  // The open segment found with a slow replica (0: none): the next Write
  // rolls it. Its replica index, for the log.
  uint64_t slow_roll_segment_ ABSL_GUARDED_BY(mu_) = 0;
  size_t slow_replica_ ABSL_GUARDED_BY(mu_) = 0;
  // When this writer last rolled away from each slow server (entries older
  // than slow_roll_backoff are dropped).
  std::map<uint64_t, absl::Time> slow_rolled_at_ ABSL_GUARDED_BY(mu_);
  AppendTail tail_ ABSL_GUARDED_BY(mu_);  // open_'s file_offset is its segment_start
  SyncWaiters waiters_ ABSL_GUARDED_BY(mu_);
  Callbacks failed_waiters_ ABSL_GUARDED_BY(mu_);
  // The length the running recovery seals open_ at, once it has picked
  // it: answers of open_'s replicas count up to it only.
  std::optional<uint64_t> recovery_seal_length_ ABSL_GUARDED_BY(mu_);
  // open_'s replicas were sealed at this length (segment offset) by a
  // recovery or a cut (CutTo) that then failed (the next segment could
  // not be opened, meta did not record the seal): the writer has failed,
  // and Close seals there too. A replica seal at the same length is a
  // no-op; one at the shorter acked length would be refused by every
  // replica ("already sealed at ..."), which would drop them all from the
  // segment.
  std::optional<uint64_t> replicas_sealed_length_ ABSL_GUARDED_BY(mu_);
  // Steps to resume once the recovery in progress has finished (a seal
  // that found a replica failed); run by Recover() without mu_.
  std::vector<std::function<void()>> after_recovery_ ABSL_GUARDED_BY(mu_);
  // WriteAsync's writes that wait their turn, and whether a
  // DrainQueuedWrites job runs (then every WriteAsync queues).
  struct QueuedWrite {
    std::optional<uint64_t> offset;
    std::string data;
    SyncCallback done;
  };
  std::deque<QueuedWrite> queued_writes_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool fsync_deadline_armed_ ABSL_GUARDED_BY(mu_) = false;
  bool coalesce_timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  int sync_round_replies_ ABSL_GUARDED_BY(mu_) = 0;       // replies a round still awaits
  uint64_t appends_since_sync_ ABSL_GUARDED_BY(mu_) = 0;  // since the last Sync call
  bool busy_ ABSL_GUARDED_BY(mu_) = false;                // counted in the process's busy writers
  int64_t mtime_ns_ ABSL_GUARDED_BY(mu_) = 0;             // of the last write
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  absl::Status last_replica_error_ ABSL_GUARDED_BY(mu_);  // why a replica last failed
  // The file as this writer opened it: a close that finds it so changed
  // nothing (MetaSealCall.unchanged).
  const uint64_t opened_length_;
  const size_t opened_segments_;
  const int64_t opened_mtime_ns_;
};

}  // namespace logfs::wal
