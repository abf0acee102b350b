// Meta's namespace logic over MetadataDb, without networking: inodes,
// directories, rename, xattrs and file kinds, open pins and orphans, writer
// leases, segment lists and placement, the segment-server registry, and
// recovery of a dead writer's open segment. docs/rpc.md ("Meta") is the
// contract; each method below is one RPC of that table and returns its
// errors as PosixError(errno, ...) so the exact errno reaches the client.
//
// State: everything in the namespace is in MetadataDb, changed by one
// batch per change. In memory only: mounts, leases and pins (MountTable)
// and the servers' liveness, space and reports (ServerRegistry). After a
// restart, leases and pins are gone: orphans are deleted at Open(), and an
// open segment left by a writer is recovered at the next OpenWrite or by
// meta itself. docs/meta.md maps the files of this class, one per job.
//
// Group commit (docs/meta_ha.md "Group commit"), as HDFS's FSNamesystem:
// a change is decided and staged under the mutex (MetadataDb::Stage:
// visible to the next change at once, no I/O), and the call waits for it
// to be durable after releasing the mutex (MetadataDb::WaitDurable, one
// synced RocksDB write and one journal append for every change staged
// meanwhile). A change's method returns only once it is durable, and so
// does a call whose answer depends on a staged change (a refusal included):
// it waits for every change staged before it released the mutex. Reads
// that answer clients (Lookup, GetAttr, GetInode, Readlink, Readdir,
// GetXattr, ListXattr, Open) read the durable view and never wait for a
// sync: a change is visible to them once it is durable.
//
// Thread-safety: every public method may be called from any thread; one
// mutex serializes their decisions. OpenWrite drops the mutex while it
// asks segment servers to recover a segment (see there).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/format/limits.h"  // kNameBytesMax, kReplicationMax, ...
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/namespace/internal/replica_report_state.h"
#include "store/meta/namespace/mount_table.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/rereplication_task.h"
#include "store/meta/namespace/segd_api.h"
#include "store/meta/namespace/segment_recovery.h"
#include "store/meta/namespace/server_registry.h"

namespace logfs::meta {

inline constexpr uint64_t kRootIno = 1;
// Names one inode may have (Link: EMLINK past it), ext4's EXT4_LINK_MAX.
inline constexpr uint32_t kLinkCountMax = 65000;
inline constexpr size_t kDeletionsPerHeartbeatMax = 10000;
// Orphans whose unlink grace is over that one ExpireMounts pass deletes
// (one batch); the rest wait for the next pass.
inline constexpr size_t kOrphansPerExpiryMax = 10000;
// Strays handed to a server in one heartbeat reply (namespace_replica_reports.cc).
inline constexpr size_t kStraysPerHeartbeatMax = 256;
// A server meta reached at its advertised address is dialled again this
// long after (ProbeServerAddresses), so that an address that stops
// answering (a partition, a changed NAT) shows within about this long.
inline constexpr int64_t kReachableReprobeMs = 60 * 1000;

struct NamespaceOptions {
  int64_t dead_server_ms = 10000;    // no heartbeat this long: server is dead
  int64_t lease_timeout_ms = 60000;  // no mount heartbeat this long: leases lapse
  // A file whose writer's lease lapsed this long ago (its mount
  // disconnected or went silent) and that nobody has opened for write
  // since is recovered by meta itself (LapsedOpenFiles), as HDFS's
  // NameNode recovers a lease past its hard limit. The delay lets a mount
  // whose connection merely broke come back and take its lease again.
  int64_t lease_recovery_delay_ms = 5000;
  // A file unlinked or replaced by rename while nobody has it open stays
  // openable by inode number for this long (ms), then is deleted. A kernel
  // that resolved the name just before a rename replaced it opens the old
  // inode an instant later: it gets the old file, as POSIX allows, instead
  // of ESTALE twice in a row (the VFS retries a stale lookup only once).
  // 0 deletes at once.
  int64_t unlinked_grace_ms = 2000;
  // Bytes of an inode's reply past which a new segment fails with EFBIG
  // (store/format/limits.h); at most kInodeReplyBytesMax.
  size_t inode_reply_bytes_max = format::kInodeReplyBytesMax;
  // Replica reports (namespace_replica_reports.cc): how often each server is asked
  // for one, and how long a stray replica must be unchanged on its server
  // before the server deletes it.
  int64_t replica_report_interval_ms = 600000;
  int64_t stray_replica_grace_ms = 300000;
  uint32_t default_replication = 3;  // both kinds
  uint32_t wal_ack_quorum = 2;       // block files ack on every replica
  // Wall clock in ns since the Unix epoch; null means absl::Now(). Tests
  // inject a fake to move time.
  std::function<int64_t()> now_ns;
  // The table of applied changes (docs/rpc.md "Retries"): a mount's record
  // is dropped once it has made this many changes since, and every record
  // once it is this old (longer than any mount retries a call).
  uint32_t call_records_per_mount = 4096;
  int64_t call_record_retention_ms = 10 * 60 * 1000;
  // Bytes of inodes, entries and share records one batch of a snapshot's
  // create or delete stages at most (estimated): well under the
  // replicated journal's 1 MiB record (store/meta/ha/etcd_meta_journal.h).
  size_t snapshot_batch_bytes = 256 << 10;
};

class Namespace {
 public:
  // Loads state from `db`, creating the root directory (inode 1) on first
  // use and deleting orphans left by a previous run. Keeps `db` and
  // `segment_servers`, which must outlive the namespace. Errors come from
  // the database.
  static absl::StatusOr<std::unique_ptr<Namespace>> Open(MetadataDb* db,
                                                         SegmentServerApi* segment_servers,
                                                         NamespaceOptions options);
  ~Namespace();

  // ---- segment servers and mounts
  // Returns the server's id. kFailedPrecondition for a server of another
  // cluster (its cluster_id is not meta's: meta lost its database, or the
  // server was pointed at the wrong meta), which must not join, and for a
  // second live process claiming a server's id.
  absl::StatusOr<uint64_t> RegisterServer(const proto::RegisterServerRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // This cluster's id (random, made at the first start, never changes).
  uint64_t cluster_id() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(const proto::HeartbeatRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<uint64_t> NewMount() ABSL_LOCKS_EXCLUDED(mu_);
  // The mount's session with meta broke (its connection closed, as when
  // the mount is killed): its leases lapse now, not after lease_timeout_ms,
  // so another mount's OpenWrite recovers its files at once. A live mount
  // that reconnects takes its leases back on its next SealSegment (CAS).
  void MountDisconnected(uint64_t mount_id) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `mount_id` live. `writing_inos` (files it holds a writer for)
  // take back a lease that lapsed from this mount, or that meta lost in a
  // restart, if nobody else holds it.
  absl::Status MountHeartbeat(uint64_t mount_id, const std::vector<uint64_t>& writing_inos = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::StatFsResponse> StatFs() ABSL_LOCKS_EXCLUDED(mu_);

  // Sizes of in-memory tables, for /metrics (store/meta/meta_metrics.cc):
  // read under mu_, no database access.
  struct Gauges {
    uint64_t inodes = 0;
    uint64_t mounts = 0;         // mounts heard from (not yet expired)
    uint64_t leases = 0;         // files open for write (writer leases)
    uint64_t lapsed_leases = 0;  // leases whose mount went silent, awaiting recovery
    uint64_t commit_groups = 0;  // MetadataDb::GroupCommitStats since Open
    uint64_t committed_changes = 0;
  };
  Gauges TableGauges() const ABSL_LOCKS_EXCLUDED(mu_);
  // Drops the pins and leases of mounts silent for lease_timeout_ms (or
  // disconnected) and deletes orphans nobody pins any more. Called
  // periodically by meta.
  absl::Status ExpireMounts() ABSL_LOCKS_EXCLUDED(mu_);
  // Files whose lease ExpireMounts dropped at least lease_recovery_delay_ms
  // ago, that still end in an open segment and that nobody holds a lease
  // on: the caller recovers each with RecoverLease(ino, true) (off meta's
  // network threads; it blocks on segment servers). A dropped lease whose
  // mount is live again (it reconnected) goes back to that mount instead.
  // Each is returned once; a caller whose recovery failed hands it back
  // with RetryLeaseRecovery.
  std::vector<uint64_t> TakeLapsedOpenFiles() ABSL_LOCKS_EXCLUDED(mu_);
  void RetryLeaseRecovery(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- namespace
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Inode> GetInode(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Attr> SetAttr(const proto::SetAttrRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Attr> Create(const proto::CreateRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Create of a regular file with request.open_for_write_mount_id() set:
  // the file is created with that mount's writer lease and pin (as
  // OpenWrite gives them) in one durable change, and the reply is the
  // inode OpenWrite would return. Create's errors; EINVAL without a mount
  // id or for another file type. A retry (same call id) gets the recorded
  // inode and takes the lease again if nobody holds it.
  absl::StatusOr<proto::Inode> CreateForWrite(const proto::CreateRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Unlink(uint64_t parent, const std::string& name, bool directory,
                      const proto::CallId& call = proto::CallId::default_instance())
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Rename(const proto::RenameRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A hard link: the entry `new_name` in directory `new_parent` for the
  // existing inode `ino` (any type but a directory), whose nlink grows by
  // one, in one durable change; returns the inode's attributes. EPERM (a
  // directory), EEXIST (the name exists), ENOENT (the inode has nlink 0:
  // unlinked, kept only while open), EMLINK (kLinkCountMax names
  // already), ESTALE (no such inode or parent), ENOTDIR, ENAMETOOLONG.
  // A file being written may be linked: one inode, one lease.
  absl::StatusOr<proto::Attr> Link(const proto::LinkRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // A metadata-only copy (namespace_clone.cc): a new regular file
  // `new_name` in `new_parent` with mode S_IFREG | request.mode() & 07777,
  // the owner given, its directory's kind, the source's replication
  // settings, and the sealed segments of `ino` (their bytes are never
  // read or written: both files list them, and meta counts who does),
  // in one durable change; returns the new file's attributes. EXDEV when
  // `ino` ends in an open segment (being written, or left by a dead
  // writer: its bytes may still change, so only a copy will do), EINVAL
  // (not a regular file), EEXIST, ESTALE, ENOTDIR, ENAMETOOLONG.
  absl::StatusOr<proto::Attr> Clone(const proto::CloneRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  // Directory snapshots (namespace_snapshot.cc, docs/snapshots.md): CREATE
  // makes `dir`/.snapshot/`name`, a read-only copy of the tree under `dir`
  // in metadata only, in one instant of the namespace (every change waits
  // meanwhile), with each file being written taken at its durable length
  // (the ack_quorum-th longest fdatasynced length its replicas answer).
  // DELETE removes one (its replicas go once nothing else lists their
  // segments); LIST answers the snapshots of `dir`, or of every directory
  // for 0, with the bytes only each holds. Errors: ENOENT, ENOTDIR,
  // EEXIST (the name, or an entry '.snapshot' of the directory's own),
  // EROFS (a directory in a snapshot), EAGAIN (too few replicas of an
  // open segment answered), EINVAL/ENAMETOOLONG (the name), EFBIG (over
  // kSnapshotInodesMax names). Blocks on segment servers while it holds
  // the mutex, one SegmentInfo per replica of each open file in the tree.
  absl::StatusOr<proto::SnapshotResponse> Snapshot(const proto::SnapshotRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // `logfs fsck`'s check of the share records against the inodes
  // (proto::CheckSharesRequest; namespace_clone.cc): one scan of every
  // inode and record under the mutex (every change waits meanwhile), and
  // with `repair` the disagreeing records rewritten from the inodes, in
  // batches. Errors from the database.
  absl::StatusOr<proto::CheckSharesResponse> CheckShares(const proto::CheckSharesRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A metadata-only copy_file_range (namespace_clone.cc): appends the
  // sealed segments of `ino` that cover exactly [offset, offset + length)
  // to the end of `dst_ino`, which both files then list (as after a
  // Clone), in one durable change; returns the destination inode (its
  // size grown by `length`). The caller holds the destination's writer
  // lease, opened with `lease_epoch` (else EBUSY), and the destination's
  // last segment is not open: meta does not know how much an open segment
  // holds, so the writer seals it first or copies bytes. A retry of an
  // applied call returns the destination as it is. EINVAL: a range that
  // does not start and end at segment boundaries of the source, reaches
  // into its open segment or is empty; `dst_offset` not the destination's
  // size; the same file twice; a segment the destination lists already;
  // another replication than the source's. EFBIG: the destination would
  // have more segments than a reply holds. ESTALE, EISDIR.
  absl::StatusOr<proto::Inode> CopyRange(const proto::CopyRangeRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> Readlink(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  // One page of directory `ino` after `start_after` (docs/rpc.md
  // "Readdir"), bounded by kReaddirPageEntriesMax and kReaddirPageBytesMax.
  // ENOENT, ENOTDIR.
  absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino, const std::string& start_after)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- xattrs (namespace_xattr.cc)
  absl::Status SetXattr(const proto::SetXattrRequest& request) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RemoveXattr(uint64_t ino, const std::string& name,
                           const proto::CallId& call = proto::CallId::default_instance())
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- exactly-once changes (namespace_call_records.cc, docs/rpc.md "Retries")
  // Create, Link, Unlink, Rename, SetAttr, SetXattr, RemoveXattr and SealSegment
  // with a call id (seq != 0) record their reply in the change's own synced
  // batch; the same call id again (a mount's retry, also after a meta
  // restart) gets that reply back and changes nothing. Failed changes are
  // not recorded: they changed nothing, so a retry runs afresh.
  // Deletes the records older than call_record_retention_ms; does the scan
  // at most once a minute (meta calls it from its expiry timer).
  absl::Status ExpireCallRecords() ABSL_LOCKS_EXCLUDED(mu_);

  // ---- open files, leases and segments (namespace_write.cc)
  absl::StatusOr<proto::Inode> Open(uint64_t ino, uint64_t mount_id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Release(uint64_t ino, uint64_t mount_id) ABSL_LOCKS_EXCLUDED(mu_);
  // May block on segment servers (recovery); the mutex is not held then.
  // `logfs recover`: revokes the writer lease of `ino` even if its holder
  // looks alive (as `hdfs debug recoverLease`), then recovers and seals the
  // open segment; the old holder's later writes and syncs fail. Returns the
  // inode. kUnavailable when too few replicas answer (nothing changes but
  // the revoked lease). May block on segment servers without the mutex.
  // With `only_if_unleased` (meta's own recovery of a lapsed lease), a file
  // that somebody holds a live lease on again is left alone.
  absl::StatusOr<proto::Inode> RecoverLease(uint64_t ino, bool only_if_unleased = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Inode> OpenWrite(const proto::OpenWriteRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::Inode> SealSegment(const proto::SealSegmentRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- bad replicas (namespace_bad_replicas.cc)
  // A reader saw the replica of `segment_id` on `server_id` fail its
  // checksum. Meta asks that server (without the mutex) and, if it confirms
  // (the replica is corrupt, failed or gone), drops the replica from the
  // sealed segment and queues its deletion, keeping the last replica. OK
  // without change if the replica is no longer listed. Errors: ENOENT (no
  // such file or segment), kFailedPrecondition (segment still open: its
  // writer rolls; the server says the replica is healthy; last replica),
  // kUnavailable (the server cannot be asked).
  absl::Status ReportBadReplica(const proto::ReportBadReplicaRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- inspection and re-replication (namespace_rereplication.cc)
  // Registered servers by id, from `start_server_id` on, with liveness and
  // reported space: one page of at most kListServersPageMax; next_server_id
  // starts the next page (0 at the end).
  absl::StatusOr<proto::ListServersResponse> ListServers(uint64_t start_server_id)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Dials the advertised address of up to `max` live servers that are due
  // (SegmentServerApi::Identify, at most kIdentifyTimeout each, without the
  // mutex), and records why for ListServers (ServerStatus.unreachable): a
  // server that registers from a NAT or with a mistyped --advertise is
  // alive to meta, but no mount can reach it. Due: not dialled since it
  // registered, not reached the last time, or reached kReachableReprobeMs
  // ago or more. Each call goes on round the servers (by id) from where
  // the last one stopped, so a server due is dialled within
  // ceil(registered servers / max) calls. Returns how many it dialled.
  // Placement puts servers found unreachable last but still uses them when
  // too few others have room (a mount may reach what meta cannot). Called
  // by the re-replication loop, once per pass.
  size_t ProbeServerAddresses(size_t max) ABSL_LOCKS_EXCLUDED(mu_);
  // The regular files among the next min(max_inodes, kListInodesMax)
  // inodes from `start_ino` (docs/rpc.md "ListSegments").
  absl::StatusOr<proto::ListSegmentsResponse> ListSegments(uint64_t start_ino, uint32_t max_inodes)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Looks at the next `max_inodes` inodes from `start_ino` and plans up to
  // `max_tasks` copies: one per missing replica of each sealed segment with
  // fewer live replicas than its file's replication (and at least one), to
  // distinct live servers not holding it; then, if room is left, up to
  // `max_spread_tasks` of the `max_tasks` that restore a spread
  // (RereplicationTask::spread): one copy of each sealed segment with
  // exactly its replication in live replicas that share a failure domain
  // they need not share (format::NeedlesslySharedDomain over the live,
  // healthy servers), to a server in a domain they do not use yet (none
  // when ServerRegistry::Place finds no such server with room). Open segments are
  // left to their writer (it places the next one spread). The plan's
  // census counts every segment of the inodes scanned, also past the room
  // for tasks. Changes nothing.
  absl::StatusOr<RereplicationPlan> PlanRereplication(uint64_t start_ino, size_t max_inodes,
                                                      size_t max_tasks, size_t max_spread_tasks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records the copy `task` made: re-reads the inode and, if the segment is
  // still there, sealed at task.length, adds the target replica; once the
  // segment has its file's replication in live replicas, replicas on dead
  // servers leave the list and are queued for deletion. If the segment
  // changed (file deleted, truncated), queues the target's copy for
  // deletion and returns kAborted. OK without change if the target is
  // already listed. A spread task's commit then drops one live replica in
  // a domain the segment's replicas share (the one on the server with the
  // least free space, then the highest id) and queues it for deletion,
  // only while more than the file's replication are live.
  absl::Status CommitReplica(const RereplicationTask& task) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- replica reports (namespace_replica_reports.cc; docs/rpc.md "Replica reports")
  struct ReconcileStats {
    size_t servers = 0;  // reports reconciled
    size_t dropped = 0;  // missing replicas dropped from their segments
    size_t strays = 0;   // stray replicas queued for deletion
  };
  // Compares every complete replica report with the segments that list
  // its server (a scan of every inode, without the mutex): a sealed
  // replica the server lacks (or has corrupt) in two reports in a row is
  // dropped from its segment, so re-replication copies it again (the last
  // replica is kept); a replica no segment lists on the server is handed
  // to it for deletion, which it does once the replica's files have been
  // unchanged for stray_replica_grace_ms. Errors from the database.
  absl::StatusOr<ReconcileStats> ReconcileReplicaReports() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class Txn;  // namespace_txn.h
  Namespace(MetadataDb* db, SegmentServerApi* segment_servers, NamespaceOptions options);
  // Create and CreateForWrite: the new inode as ReplyInode gives it (only
  // its attr for a recorded plain Create).
  absl::StatusOr<proto::Inode> CreateInode(const proto::CreateRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `decide` under the mutex (it stages its change, if any, with
  // Txn::Commit) and then, without the mutex, waits until every change
  // staged before the mutex was released is durable. Returns decide's
  // result, or the durability failure (MetadataDb::WaitDurable) in its
  // place. `decide` returns absl::Status or absl::StatusOr<T>.
  template <typename Decide>
  std::invoke_result_t<Decide&> Change(Decide&& decide) ABSL_LOCKS_EXCLUDED(mu_) {
    return DecideAndWait(std::forward<Decide>(decide), /*always=*/true);
  }
  // Change for a decision that reads only what lives in memory (pins,
  // leases) unless it stages a change itself: it waits only when it
  // staged one, so it adds no wait to a call that changed nothing durable.
  template <typename Decide>
  std::invoke_result_t<Decide&> ChangeIfStaged(Decide&& decide) ABSL_LOCKS_EXCLUDED(mu_) {
    return DecideAndWait(std::forward<Decide>(decide), /*always=*/false);
  }
  template <typename Decide>
  std::invoke_result_t<Decide&> DecideAndWait(Decide&& decide, bool always)
      ABSL_LOCKS_EXCLUDED(mu_) {
    using Result = std::invoke_result_t<Decide&>;
    std::optional<Result> result;
    uint64_t before = 0;
    uint64_t staged = 0;
    {
      absl::MutexLock lock(&mu_);
      before = db_->staged_seq();
      result.emplace(decide());
      staged = db_->staged_seq();
    }
    if (!always && staged == before) return std::move(*result);
    absl::Status durable = db_->WaitDurable(staged);
    if (!durable.ok()) return Result(durable);
    return std::move(*result);
  }
  // Waits until every change staged so far is durable (Change's wait, for
  // methods that release the mutex more than once).
  absl::Status WaitStaged() ABSL_LOCKS_EXCLUDED(mu_) { return db_->WaitDurable(db_->staged_seq()); }
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);

  int64_t NowNs() const;

  // mounts_ at NowNs().
  void TouchMount(uint64_t mount_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    mounts_.Touch(mount_id, NowNs());
  }
  // The mount holding a live lease on `ino`, or 0.
  uint64_t LiveLeaseHolder(uint64_t ino) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return mounts_.LiveHolder(ino, NowNs());
  }
  bool ServerLive(const ServerState& server) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return servers_.Live(server, NowNs());
  }
  bool ServerIdLive(uint64_t server_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return servers_.Live(server_id, NowNs());
  }

  // Effective values (stored, else the kind's defaults).
  uint32_t Replication(const proto::Inode& inode) const;
  uint32_t AckQuorum(const proto::Inode& inode) const;
  // Copies for replies: open_for_write, effective replication/ack quorum,
  // replica addresses.
  proto::Attr ReplyAttr(const proto::Inode& inode) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::Inode ReplyInode(const proto::Inode& inode) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The directory `ino` in `txn`: ENOENT, ENOTDIR.
  absl::StatusOr<proto::Inode*> GetDir(Txn& txn, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A new name's directory: GetDir's errors, EEXIST when `name` is taken.
  absl::StatusOr<proto::Inode*> DirForNewEntry(Txn& txn, uint64_t parent, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The entry `name` -> `inode` in directory `parent`, whose mtime and
  // ctime become `now_ns` (Put in `txn`).
  void AddEntry(Txn& txn, proto::Inode* parent, const std::string& name, const proto::Inode& inode,
                int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RecordCall with `inode`'s attributes (as it is at Commit) as the reply.
  void RecordAttrCall(Txn& txn, const proto::CallId& call, format::MessageType type,
                      const proto::Inode* inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the entry `name` -> `child` of `parent` and drops the child's
  // link: a directory is deleted, a file with nlink 0 is deleted or, when
  // pinned, kept as an orphan.
  absl::Status RemoveEntry(Txn& txn, proto::Inode* parent, const std::string& name,
                           proto::Inode* child) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Shared segments (namespace_clone.cc). StillShared: file `ino` lets go
  // of sealed segment `segment_id`; true if another file still lists it
  // (its replicas stay), false if none does (the caller deletes them).
  // SyncSharedReplicas: the replica list `segment` of file `ino` now has
  // is given to every other file that lists the segment (Put in `txn`).
  // IsShared: more than one file lists it (true, too, when that cannot
  // be read: a shared segment must never be changed).
  bool StillShared(Txn& txn, uint64_t ino, uint64_t segment_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncSharedReplicas(Txn& txn, uint64_t ino, const proto::Segment& segment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsShared(Txn& txn, uint64_t segment_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // CopyRange's checks of the destination `dst` (lease, open segment,
  // offset) and the source segments it appends (in `segments`).
  absl::Status CheckCopyDestination(const proto::CopyRangeRequest& request,
                                    const proto::Inode& dst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::vector<proto::Segment>> SegmentsToCopy(
      const proto::CopyRangeRequest& request, const proto::Inode& source,
      const proto::Inode& dst) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes a file's inode and queues its replicas for deletion.
  void DeleteFile(Txn& txn, const proto::Inode& inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueReplicaDeletions(Txn& txn, const proto::Inode& inode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops every segment of a WAL file (truncate to 0).
  void DropSegments(Txn& txn, proto::Inode* inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EINVAL if directory `dir` is `top` or lies below it (a rename would
  // move `top` into its own subtree); ELOOP past kDirDepthMax levels.
  absl::Status CheckOutsideSubtree(Txn& txn, uint64_t dir, uint64_t top)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SealSegment's parts: takes a lapsed lease back for the sealing writer
  // or refuses with EBUSY; seals the open last segment as asked (ESTALE if
  // it is not the one named; a recorded seal's retry is a no-op).
  absl::Status TakeSealLease(const proto::SealSegmentRequest& request, const proto::Inode& inode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ApplySeal(const proto::SealSegmentRequest& request, Txn& txn, proto::Inode* inode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes `ino` if it is an orphan (nlink 0) nobody pins and its unlink
  // grace is over.
  absl::Status MaybeDeleteOrphan(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same for many, in one synced batch.
  absl::Status DeleteOrphans(const std::vector<uint64_t>& inos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends a new open segment to `inode`, on none of `excluded_servers`
  // and on as few of `avoided_servers` as it can (ServerRegistry::Place).
  absl::Status AppendSegment(Txn& txn, proto::Inode* inode,
                             const std::vector<uint64_t>& excluded_servers,
                             const std::vector<uint64_t>& avoided_servers = {})
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SealSegmentRequest.continue_below_bytes: makes `inode`'s last segment
  // open again at its epoch + 1 (Put in `txn`) if it may be continued: a
  // WAL file's, sealed, 0 < length < `below`, with the file's replication
  // in replicas on live servers that no writer reported failing or found
  // slow (`avoided`), whose disk works and that meta can dial. False
  // (nothing changed) otherwise.
  bool ContinueLastSegment(Txn& txn, proto::Inode* inode, uint64_t below,
                           const google::protobuf::RepeatedField<uint64_t>& avoided)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The writer lease of `ino` passes to a new holder (an OpenWrite by
  // another mount, a recovery): bumps inode.lease_epoch (Put in `txn`)
  // and forgets a lapsed lease, so no earlier writer takes it back.
  void PassLease(uint64_t ino, proto::Inode* inode, Txn& txn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // OpenWrite pieces (namespace_write.cc).
  absl::StatusOr<proto::Inode> OpenWriteLocked(const proto::OpenWriteRequest& request,
                                               bool* needs_recovery, RecoveryPlan* plan)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What recovering the open segment `open` needs (addresses filled in).
  RecoveryPlan PlanRecovery(const proto::Segment& open) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<proto::Inode> FinishRecovery(const proto::OpenWriteRequest& request,
                                              const RecoveryPlan& plan,
                                              const absl::StatusOr<RecoveryResult>& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  uint64_t AllocateId(Txn& txn, MetaCounter counter) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Snapshot pieces (namespace_snapshot.cc).
  absl::StatusOr<proto::SnapshotResponse> CreateSnapshot(const proto::SnapshotRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::SnapshotResponse> DeleteSnapshot(const proto::SnapshotRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<proto::SnapshotResponse> ListSnapshots(uint64_t dir) ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `inode`'s open last segment, if it has one, the sealed prefix
  // its replicas hold durable on an ack quorum (Segment.prefix), or drops
  // it when that is empty. EAGAIN when too few replicas answer.
  absl::Status TakeDurablePrefix(proto::Inode* inode) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the tree of `record`, children first, in batches, then the
  // record.
  absl::Status DeleteSnapshotTree(const proto::SnapshotRecord& record)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // At Load: deletes what a create or delete cut short left.
  absl::Status FinishSnapshots() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Directory `dir`'s path from the root ("?" where it cannot tell).
  absl::StatusOr<std::string> PathOf(uint64_t dir) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The table of applied changes (namespace_call_records.cc). The reply recorded
  // for `call`, or nullopt: no call id, not applied, or expired.
  // kInvalidArgument when the id was recorded for another message type.
  absl::StatusOr<std::optional<std::string>> RecordedReply(const proto::CallId& call,
                                                           format::MessageType type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records `call` as applied in `txn`'s batch, with reply() (run at
  // Commit) as its reply. No-op without a call id.
  void RecordCall(Txn& txn, const proto::CallId& call, format::MessageType type,
                  std::function<std::string()> reply) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ReportBadReplica pieces (namespace_bad_replicas.cc). The reported replica's
  // segment in `txn`, checked to be sealed; nullptr when the replica is no
  // longer listed.
  absl::StatusOr<proto::Segment*> FindReportedSegment(Txn& txn,
                                                      const proto::ReportBadReplicaRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the replica once its server confirmed the report.
  absl::Status DropBadReplica(const proto::ReportBadReplicaRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Replica report pieces (namespace_replica_reports.cc), under the mutex from
  // Heartbeat: stores a report page of `request`; asks for a report in
  // `response` when one is due; hands out strays.
  void HandleReports(ServerState& server, const proto::HeartbeatRequest& request,
                     proto::HeartbeatResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the replica on `server_id` of sealed segment `segment_id` of
  // `ino` that its server's reports miss, unless it is the last one.
  // True if dropped.
  // Drops the replicas a second report in a row confirms missing (returns
  // how many); keeps the others in `reports` to confirm by a later report.
  size_t ConfirmMissingReplicas(Txn& txn, uint64_t server_id, uint64_t report_id,
                                const std::set<std::pair<uint64_t, uint64_t>>& missing,
                                ReplicaReportState& reports) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DropMissingReplica(Txn& txn, uint64_t ino, uint64_t segment_id, uint64_t server_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Re-replication pieces (namespace_rereplication.cc).
  // Adds `segment` of `inode` to `census` (open, under-replicated, lost;
  // misplaced over `live_domains` (ServerRegistry::LiveHealthyDomains) by the rule fsck
  // applies: any segment, the domains of every server it lists).
  void CountSegment(const proto::Inode& inode, const proto::Segment& segment,
                    const std::vector<std::string>& live_domains, SegmentCensus* census) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends to `tasks` up to `room` copies restoring `segment` of `inode`.
  void PlanSegment(const proto::Inode& inode, const proto::Segment& segment, size_t room,
                   std::vector<RereplicationTask>* tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The server to copy segment `segment_id` to: ServerRegistry::Place(1,
  // `excluded`, `kept`), skipping servers where the segment is pending
  // deletion or its deletion is in flight (a server back from the dead
  // would delete the new copy with a deletion queued before). kUnavailable/ENOSPC as Place,
  // or when every server it finds has the segment pending deletion.
  absl::StatusOr<uint64_t> ChooseCopyTarget(uint64_t segment_id, std::vector<uint64_t> excluded,
                                            const std::vector<uint64_t>& kept)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends to `tasks`, while it has fewer than `max_tasks`, the copies
  // that restore the spread of segments of `inodes` (PlanRereplication),
  // looking for targets for at most kSpreadSegmentsPerTask misplaced
  // segments per task it may add (each search is a placement under mu_).
  void PlanSpreads(const std::vector<proto::Inode>& inodes, size_t max_tasks,
                   std::vector<RereplicationTask>* tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends to `tasks` the copy that restores the spread of `segment` of
  // `inode` over `live_domains` (ServerRegistry::LiveHealthyDomains), if it can have one;
  // false if it needs none (no target was looked for).
  bool PlanSpread(const proto::Inode& inode, const proto::Segment& segment,
                  const std::vector<std::string>& live_domains,
                  std::vector<RereplicationTask>* tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops the excess replica of a spread task (CommitReplica) if more than
  // `wanted` of `segment`'s replicas are live.
  void DropExcessReplica(Txn& txn, proto::Segment* segment, uint32_t wanted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops replicas on dead servers once `wanted` live ones are listed.
  void DropDeadReplicas(Txn& txn, proto::Segment* segment, uint32_t wanted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  MetadataDb* const db_;
  SegmentServerApi* const segment_servers_;
  const NamespaceOptions options_;

  // Guarded by mu_.
  mutable absl::Mutex mu_;
  std::map<MetaCounter, uint64_t> next_ids_ ABSL_GUARDED_BY(mu_);
  uint64_t cluster_id_ ABSL_GUARDED_BY(mu_) = 0;  // set by Load, then constant
  uint64_t inode_count_ ABSL_GUARDED_BY(mu_) = 0;
  ServerRegistry servers_ ABSL_GUARDED_BY(mu_);
  // Mount liveness, writer leases, pins, lapsed leases and unlink grace.
  MountTable mounts_ ABSL_GUARDED_BY(mu_);
  int64_t call_records_swept_ns_ ABSL_GUARDED_BY(mu_) = 0;  // last ExpireCallRecords scan
};

}  // namespace logfs::meta
