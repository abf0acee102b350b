// The logfs client library, what a process links to use logfs (as HDFS's
// DFSClient or Ceph's libcephfs): inodes and the namespace calls, open,
// read, append, sync and close through the WAL writer (wal/), the block
// cache and short-circuit reads (cache/). One Client is one session with
// meta, which meta calls a mount (its mount id, leases and pins), whether
// it serves a FUSE mount (fuse/ is a thin adapter over it, as libfuse's
// passthrough_ll is over syscalls) or runs inside an application
// (`logfs bench wal --meta`). Errors are absl::Status with the errno
// attached (src/status/posix_error.h); fuse/errno_map.h maps them for the
// kernel.
//
// Thread-safe: callers (FUSE workers, an application's threads) call in
// concurrently. What each call blocks its caller on:
//
//   call                                    blocks the caller on
//   Connect                                 meta (NewMount, retried within connect_wait)
//   Create, Unlink, Rename, Readlink,       meta, one round trip (retried within
//     Readdir, StatFs, ListXattr,             meta_retry while meta restarts)
//     SetXattr, RemoveXattr
//   Lookup, GetAttr, SetAttr, GetXattr      meta; what waits for segment servers runs
//     (with `done`)                           on the waiting pool, and `done` there
//   Open, CreateForWrite                    meta; another open or a close of the file
//   Read                                    replicas (a remote read), written bytes
//                                             becoming durable
//   Write                                   a full replica queue or a segment roll
//   ReadAsync, WriteAsync, Sync, Flush      nothing: a wait runs on the waiting pool
//                                             (Sync and Flush: the writer's threads)
//   ReleaseAsync                            meta for a read handle; a writer's close
//                                             runs on the waiting pool
//   Release                                 the writer's close (sync, seal, lease)
//   Shutdown                                the pools' work, each within its deadline
//
// The client's own threads and what each may wait on are in executors.h;
// the waits above state theirs (Executors::CheckMayWaitOn), so a call made
// from a thread that may not wait that way fails a CHECK instead of
// deadlocking.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cache/block_cache.h"
#include "cache/file_read.h"
#include "cache/replica_cache.h"
#include "cache/segment_reader.h"
#include "fsclient/cache_coherence.h"
#include "fsclient/client_deps.h"
#include "fsclient/executors.h"
#include "fsclient/writer_table.h"
#include "src/metrics/family_list.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/stream_socket.h"
#include "wal/file_writer.h"

namespace logfs::fsclient {

struct ClientOptions {
  std::string meta_address;  // "host:port", or a list of meta replicas "h1:p,h2:p,..."
  // Where the cluster secret this mount uses lives (empty: none), told to
  // tools as user.logfs.cluster_secret_file; the mount reads no file.
  std::string cluster_secret_file;
  // What the client authenticates with (rpc::ClusterKey::FromFile); null:
  // the process's key (rpc::ProcessClusterKey, which main sets from
  // --cluster_secret_file), which is none in a process that set none.
  rpc::ClusterKeyPtr cluster_key;
  uint64_t wal_segment_bytes = 64ull << 20;
  // A WAL file reopened for append continues its last segment while that
  // is shorter than wal_segment_bytes (wal::FileWriterOptions::
  // continue_below_bytes); false: every writer starts a new segment.
  bool continue_wal_segments = true;
  uint64_t block_segment_bytes = 256ull << 20;
  size_t block_append_bytes = 1u << 20;  // block files: bytes per append
  absl::Duration rpc_timeout = absl::Seconds(10);      // meta calls, reads
  // Meta calls whose transport fails (meta restarting or unreachable) are
  // retried this long before they fail with EIO (store/client/meta_retry.h), as
  // an NFS hard mount waits within its retrans budget; zero: at once.
  absl::Duration meta_retry = absl::Seconds(30);
  // Connect() keeps asking meta for a mount session this long while meta
  // cannot be reached or no replica is active (boot, a meta restart, an
  // election), with capped exponential backoff, logging each retry; zero:
  // its first failure is final. An attempt already sent may end up to
  // rpc_timeout past it.
  absl::Duration connect_wait = absl::ZeroDuration();
  absl::Duration replica_timeout = absl::Seconds(10);  // writer's replica calls
  absl::Duration fsync_timeout = absl::Seconds(30);
  // Coalescing of unsynced WAL appends (wal::FileWriterOptions::
  // coalesce_delay and coalesce_bytes); zero delay: off.
  absl::Duration wal_coalesce_delay = absl::Milliseconds(1);
  size_t wal_coalesce_bytes = 128u << 10;
  // Slow-replica exclusion of the mount's writers (wal/replica_lag.h);
  // slow_lag zero: off.
  wal::ReplicaLagOptions slow_replica;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  int io_threads = 1;  // network threads (replies of segment servers and meta)
  // Block cache of sealed data (cache/block_cache.h); 0 bytes disables it.
  uint64_t block_cache_bytes = 256ull << 20;
  uint32_t block_cache_block_bytes = 64u << 10;  // a multiple of 16 KiB
  // Sees every block-cache lookup (cache/block_trace.h); not owned, outlives
  // the mount; null: none.
  cache::BlockCacheTracer* block_cache_tracer = nullptr;
  // Short-circuit reads of sealed replicas on this host (cache/segment_reader.h).
  bool short_circuit = true;
  // This host's id for short-circuit reads (cache::SegmentReaderOptions);
  // empty: the boot id.
  std::string host_id;
  cache::ReplicaCacheOptions replica_cache;
  // How calls reach segment servers on this host (same host id): kUnix
  // over their RPC Unix socket (client::LocalRoutes; TCP if it fails),
  // kTcp over loopback TCP like any other server.
  rpc::Transport local_transport = rpc::Transport::kUnix;
  // How long the kernel keeps names and attributes (cache_coherence.h).
  CacheCoherenceOptions cache;
};

// One open file description (a FUSE file handle).
struct OpenFile {
  uint64_t ino = 0;
  proto::FileKind kind = proto::KIND_BLOCK;
  bool writable = false;      // opened O_WRONLY / O_RDWR
  bool write_denied = false;  // writable, but the file is a sealed block file
  bool append = false;        // O_APPEND
  std::shared_ptr<wal::FileWriter> writer;  // set on writable, not denied
  bool live = false;          // another writer may grow the file: refresh on read
  bool growing = false;       // at open: a writer holds it, or it has an open segment
  // Has a writer, and at open its mode had S_ISUID, or S_ISGID with
  // S_IXGRP: the first write (or O_TRUNC open) by a caller without
  // CAP_FSETID clears them (Client::ClearSetId). False once they are.
  // A writer with CAP_FSETID leaves it set, and its every write reads
  // /proc/TID/status.
  std::atomic<bool> set_id_at_open{false};
  absl::Mutex mu;
  proto::Inode inode ABSL_GUARDED_BY(mu);   // for reads
  // Reads of a live file ask meta for `inode` with no lock held: each ask
  // takes a ticket, and `inode` is the answer of the highest ticket stored.
  uint64_t inode_asks ABSL_GUARDED_BY(mu) = 0;
  uint64_t inode_ticket ABSL_GUARDED_BY(mu) = 0;
};

class Client {
 public:
  // Over the cluster in options.meta_address (NewRpcClientDeps).
  explicit Client(ClientOptions options);
  // Over the deps `deps` makes, on this client's executors (a unit test's
  // fake: fsclient/client_test.cc).
  using DepsFactory =
      std::function<std::unique_ptr<ClientDeps>(const ClientOptions&, Executors&)>;
  Client(ClientOptions options, const DepsFactory& deps);
  ~Client();

  // Connects to meta and gets a mount id, retrying within
  // ClientOptions::connect_wait; starts the lease heartbeat. kUnavailable
  // "cannot reach meta at ADDR ..." with the last failure if meta was not
  // reached in time; meta's own refusal (e.g. a bad cluster secret) at once.
  absl::Status Connect();

  // ---- handing the mount to a successor daemon (`logfs mount --takeover`,
  // a restart of logfs-mount@; docs/OPERATIONS.md "Restarting a mount").
  // The session a successor continues: what HandOff returns and Resume
  // takes.
  struct Session {
    uint64_t mount_id = 0;
    uint64_t last_call_seq = 0;   // call ids go on after it
    uint32_t cache_lease_ms = 0;  // NewMount's answer
  };
  // Prepares this client's session to be continued by another process,
  // once no call runs any more (the FUSE layer drained its requests):
  // syncs and seals every writer, as close(2) does, keeping its lease
  // (the successor's writers start new segments), then tells meta that
  // the session outlives this connection (MountHeartbeatRequest.
  // handing_off). Blocks on the writers (each within fsync_timeout) and
  // meta. Errors: a writer's (EIO: its written bytes are not durable, and
  // the handoff must not go on, or that error would be lost), meta's.
  // After it, only Shutdown; a failed one leaves the client usable.
  absl::StatusOr<Session> HandOff();
  // After a HandOff whose successor did not take over: the session ends
  // with this connection again (a heartbeat says so). Best effort.
  void CancelHandOff();
  // Connect's counterpart in the successor: continues `session` (no
  // NewMount; the mount id, leases and pins stay), telling meta with a
  // heartbeat, retried within connect_wait; starts the heartbeat.
  // Errors: as Connect's.
  absl::Status Resume(const Session& session);
  // The OpenFile of a file handle the predecessor had open (what
  // HandedOffFile says of it), without a meta Open or OpenWrite: the
  // predecessor's pin and lease are this mount's still, and a Release of
  // the new handle gives them back. A writer's writer starts a new
  // segment at its first write. Call after Resume, before requests.
  // Errors: meta's GetInode.
  absl::StatusOr<std::unique_ptr<OpenFile>> Adopt(const proto::HandedOffFile& handed);
  // What Adopt needs of `file`, an open handle of this client's.
  static proto::HandedOffFile Describe(const OpenFile& file);
  // Stops the heartbeat; waits for the calls on the waiting pool and the
  // writers' recoveries, each within its deadline; then closes the
  // connections and stops the io threads. Idempotent (the destructor
  // calls it too).
  void Shutdown();

  // The kernel cache's timeouts and meta's invalidations (FUSE mounts call
  // coherence().Start once the session exists); Lookup and GetAttr carry
  // its session. Stopped by Shutdown.
  CacheCoherence& coherence() { return *coherence_; }

  // Namespace. Attr sizes are the durable length, live (DESIGN §2): on the
  // writing mount every byte whose write() returned, once durable (a stat
  // of bytes not durable yet waits for them on the waiting pool; after a
  // writer failure, its acked length); else the acked length of a file
  // with an open segment (written by another mount, or left by a dead
  // writer). Calls naming an inode meta no longer has fail with ESTALE.
  // Lookup, GetAttr and SetAttr ask meta on the caller's thread (they
  // were LookupAsync, GetAttrAsync and SetAttrAsync, but a meta round trip
  // is a wait); what waits for segment servers they never do there (DESIGN
  // §2): the acked length of an open segment of a file this mount does not
  // write (asked of meta and its replicas), the wait for this mount's
  // written bytes to become durable, and SetAttr's emptying of a WAL
  // file this mount writes (it waits for a roll or recovery in progress)
  // run on a thread of the waiting pool, and `done` runs there; otherwise
  // inline. Errors: meta's, EPERM from SetAttr for a size
  // change a logfs file cannot take, the writer's error for an emptying.
  using AttrDone = std::function<void(absl::StatusOr<proto::Attr>)>;
  void Lookup(uint64_t parent, const std::string& name, AttrDone done);
  void GetAttr(uint64_t ino, AttrDone done);
  void SetAttr(const proto::SetAttrRequest& request, AttrDone done);
  // Clears S_ISUID, and S_ISGID if S_IXGRP is set, of `file`'s inode at
  // meta (SetAttrRequest.clear_set_id, from the mode meta has, not a copy):
  // what ext4 does on a write by a caller without CAP_FSETID. The FUSE
  // layer calls it before such a write while file.set_id_at_open holds;
  // a chmod that sets the bits on a file already open for write is not
  // seen by that descriptor's writes (docs/POSIX.md). One meta round trip
  // on the caller's thread. Errors: meta's (ESTALE for a removed inode,
  // EIO when meta is unreachable).
  absl::Status ClearSetId(OpenFile& file);
  // A new inode of the type in `mode` (S_IFMT | permission bits, umask
  // applied): a regular file, directory, symlink (to `symlink_target`) or
  // special file (FIFO, socket, device node with device number `rdev`).
  // Errors: meta's Create (EEXIST, ENOENT, ENOTDIR, EINVAL for another
  // type or an rdev on a type without one, ENAMETOOLONG).
  absl::StatusOr<proto::Attr> Create(uint64_t parent, const std::string& name, uint32_t mode,
                                     uid_t uid, gid_t gid, const std::string& symlink_target,
                                     uint64_t rdev);
  absl::Status Unlink(uint64_t parent, const std::string& name, bool directory);
  absl::Status Rename(uint64_t parent, const std::string& name, uint64_t new_parent,
                      const std::string& new_name, uint32_t flags);
  // A hard link: `new_name` in `new_parent` names inode `ino` too; returns
  // its attributes (nlink counts the new name). One meta round trip.
  // Errors: meta's Link (EPERM for a directory, EEXIST, ENOENT, EMLINK),
  // EXDEV from a meta that has no links.
  absl::StatusOr<proto::Attr> Link(uint64_t ino, uint64_t new_parent, const std::string& new_name);
  absl::StatusOr<std::string> Readlink(uint64_t ino) { return deps_->Readlink(ino); }
  // One page of directory `ino` after `start_after` ("" for the first),
  // as meta's Readdir returns it (bounded; `more` says if others follow).
  absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino, const std::string& start_after) {
    return deps_->Readdir(ino, start_after);
  }
  absl::StatusOr<proto::StatFsResponse> StatFs() { return deps_->StatFs(); }

  // Xattrs; user.logfs.segments / durable_length / mount_pid / stats /
  // meta_address / cluster_secret_file are answered here; setting
  // user.logfs.drop_block_cache empties the block cache (the caller checks
  // that it is root).
  // GetXattr: the value to `done`, inline but for segments and
  // durable_length of a file with an open segment that this mount does not
  // write: its acked length comes from the replicas, on the waiting pool
  // (DESIGN §2). Errors: meta's (ENODATA for a name not set), ENODATA for
  // segments or durable_length of a file that is not regular.
  using XattrDone = std::function<void(absl::StatusOr<std::string>)>;
  void GetXattr(uint64_t ino, const std::string& name, XattrDone done);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino) {
    return deps_->ListXattr(ino);
  }
  absl::Status SetXattr(uint64_t ino, const std::string& name, const std::string& value,
                        int flags);
  absl::Status RemoveXattr(uint64_t ino, const std::string& name);

  // Files. Open takes the writer lease for writable handles (EBUSY if
  // another mount writes the file); O_TRUNC of a sealed block file: EPERM.
  absl::StatusOr<std::unique_ptr<OpenFile>> Open(uint64_t ino, int flags);
  // open(O_CREAT) without O_EXCL whose create found `name` taken (another
  // mount or process created it since the kernel's lookup): opens the
  // file that is there now with `flags`, as the VFS's open path would
  // have had it found the name, after `may_open(attr)` (the caller's
  // permission check: an errno, or 0) allows it. Its attr goes to *attr.
  // Errors: ENOENT (the name went away again: the caller may create once
  // more), EISDIR (a directory), EEXIST (another type of file), the
  // errno of may_open, Open's errors (EBUSY while the winner writes it).
  absl::StatusOr<std::unique_ptr<OpenFile>> OpenCreated(
      uint64_t parent, const std::string& name, int flags,
      const std::function<int(const proto::Attr&)>& may_open, proto::Attr* attr);
  // A new regular file `name` in `parent`, open with `flags` (write
  // access): created with this mount's writer lease in one meta change
  // (MetaClient::CreateForWrite), so that open(O_CREAT) + close of a new
  // file costs one durable change at meta. Its attr goes to *attr.
  // `kind`, if set, is the file's kind instead of its directory's
  // (CreateRequest.kind). Create's errors.
  absl::StatusOr<std::unique_ptr<OpenFile>> CreateForWrite(
      uint64_t parent, const std::string& name, uint32_t mode, uid_t uid, gid_t gid, int flags,
      proto::Attr* attr, std::optional<proto::FileKind> kind = std::nullopt);
  // Bytes [offset, offset + size) (fewer at end of file), sealed segments
  // through the block cache. EIO when no replica can serve a segment.
  absl::StatusOr<cache::ReadBuffer> Read(OpenFile& file, uint64_t offset, uint64_t size);
  absl::Status Write(OpenFile& file, uint64_t offset, const char* data, size_t size);

  // The FUSE layer's calls: they never park their thread on a replica
  // (DESIGN §2). Each does its work inline when that needs no wait for a
  // segment server, else hands it to the mount's waiting pool, and `done`
  // runs there. `file` must live until `done` has run (ReadAsync keeps a
  // share of it itself).
  // ReadAsync: inline when every byte is in the block cache or in a
  // replica this host already has open (short-circuit), else from the pool
  // (a remote read, a replica's first open, written bytes not yet durable,
  // a read of a live file past its known length or while it has an open
  // segment: its length comes from meta and the open segment's replicas).
  // A job on the pool keeps its share of `file`: the kernel may release
  // the handle before the job ends (a dying reader's read is answered at
  // once, fuse/request.h).
  using ReadDone = std::function<void(absl::StatusOr<cache::ReadBuffer>)>;
  void ReadAsync(std::shared_ptr<OpenFile> file, uint64_t offset, uint64_t size, ReadDone done);
  // WriteAsync: wal::FileWriter::WriteAsync (a full queue or a roll waits
  // on its run_waiting thread, the pool's).
  void WriteAsync(OpenFile& file, uint64_t offset, const char* data, size_t size,
                  std::function<void(absl::Status)> done);
  // ReleaseAsync: Release; the last handle of a writer closes it on the
  // pool.
  void ReleaseAsync(std::shared_ptr<OpenFile> file, std::function<void(absl::Status)> done);
  void Sync(OpenFile& file, std::function<void(absl::Status)> done);
  // close(2) of a descriptor: sync and seal, so the length is final when
  // close returns; a later write through another descriptor of the same
  // file description opens a new segment.
  void Flush(OpenFile& file, std::function<void(absl::Status)> done);
  // Last handle of a writer: sync, seal, release the lease.
  absl::Status Release(std::shared_ptr<OpenFile> file);

  // copy_file_range(2) without bytes (copy_range.cc): appends the run of
  // whole sealed segments of `source`'s file that starts at `offset` and
  // ends within `length` bytes of it (as many as fit) to the end of `dst`,
  // a handle of this mount open for write, at `dst_offset`, through meta's
  // CopyRange (both files then list them; no byte is read or written).
  // Returns the bytes appended (> 0), which may be fewer than `length`:
  // the caller copies the rest, or calls again. Applies only when the
  // destination's writer has no open segment and nothing in flight (a new
  // file that `cp` creates, or one flushed since its last write), and
  // `dst_offset` is its length. One meta round trip for the source's
  // segments and one for the copy, on the caller's thread; never waits
  // for a segment server. Errors: EOPNOTSUPP when it does not apply (a
  // read-only or other mount's destination, a range that starts inside a
  // segment or in the open one, meta's refusal): nothing changed, copy
  // bytes instead. EIO (the writer's sticky error) when meta's answer was
  // lost: the segments may have been appended, and the file ends as meta
  // has it when the writer closes.
  absl::StatusOr<uint64_t> CopyRange(OpenFile& source, uint64_t offset, OpenFile& dst,
                                     uint64_t dst_offset, uint64_t length);

  uint64_t mount_id() const { return deps_->mount_id(); }

  // This client's metrics for /metrics (client_metrics.cc): the writers'
  // counters and the read path's, from the same counters user.logfs.stats
  // reads. Thread-safe (a scrape thread calls it).
  void CollectMetrics(metrics::FamilyList& out) const;

 private:
  // A handle that reads `file` (kind and ino set) from `inode`, as Open
  // got it from meta: whether it may grow, and the inode reads start from.
  void SetReadState(OpenFile& file, proto::Inode inode) ABSL_LOCKS_EXCLUDED(mu_);
  // Meta's NewMount, retried as Connect() says.
  absl::StatusOr<uint64_t> NewMountWithin(const std::string& host);
  // `attr` from meta with the size a reader on this mount sees, to `done`:
  // the local writer's length (inline), else for a file with an open
  // segment its acked length, asked of meta and the replicas on the
  // waiting pool.
  // With `wait_durable` false, this mount's writer's acked length, at once
  // (Lookup: the kernel holds the directory's lock).
  void WithLiveSizeAsync(absl::StatusOr<proto::Attr> attr, bool wait_durable, AttrDone done);
  absl::StatusOr<std::shared_ptr<wal::FileWriter>> AcquireWriter(uint64_t ino, bool truncate)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The writer of the file meta opened for this mount as `opened` (its
  // lease held), with one handle, in writers_.
  std::shared_ptr<wal::FileWriter> NewWriterLocked(proto::Inode opened)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<wal::FileWriter> FindWriter(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  void WaitUntilNotClosing(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  // Closes `writer` of `ino`, whose last handle went (WriterTable::Release
  // said so): seals it and releases the lease on the waiting pool, drops
  // it from writers_, then runs `done` and the calls queued after the close
  // there.
  void CloseWriter(uint64_t ino, std::shared_ptr<wal::FileWriter> writer,
                   std::function<void(absl::Status)> done) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until every byte written to `writer` so far is durable on its
  // ack quorum (a Sync); the writer's sticky error (EIO) otherwise.
  absl::Status WaitUntilDurable(wal::FileWriter& writer);
  // Read's work; with mode kCachedOnly it never waits for a segment server
  // nor asks meta, and returns cache::RemoteReadNeeded() where it would.
  absl::StatusOr<cache::ReadBuffer> ReadInternal(OpenFile& file, uint64_t offset, uint64_t size,
                                                 cache::ReadMode mode);
  // Length and readable segments of a file another mount may be writing:
  // the open segment's length becomes what readers may see, its acked
  // length for a WAL file, none of a block file's (its writer may still
  // cut it short: FileWriter::CutTo).
  uint64_t LiveLength(proto::Inode& inode);
  // user.logfs.segments (`page` -1) or its page `page`
  // (format::kSegmentsXattrBytesMax); ENODATA past the last page.
  absl::StatusOr<std::string> FormatSegments(const proto::Inode& inode, int64_t page);
  // user.logfs.stats: writer counters, then the read path's (short-circuit,
  // replica cache, block cache).
  std::string FormatStats();
  void HeartbeatLoop();

  // Immutable after construction / Connect.
  const ClientOptions options_;
  // Every thread of the client (executors.h): the io threads, the waiting
  // pool (what callers hand over instead of waiting for a segment server:
  // ReadAsync, WriteAsync, ReleaseAsync, and the live sizes of
  // Lookup, GetAttr and GetXattr), the writers'
  // recoveries and the heartbeat. Shutdown joins the pools before deps_
  // closes its connections, then stops the io threads.
  Executors executors_;
  // Meta, the segment servers and new writers (client_deps.h); its
  // connections close in Shutdown, after the pools are joined.
  std::unique_ptr<ClientDeps> deps_;
  std::unique_ptr<CacheCoherence> coherence_;  // polls on its own thread
  std::unique_ptr<cache::BlockCache> block_cache_;  // null when disabled
  absl::Notification stopping_;
  // Between HandOff and CancelHandOff (or the end): every heartbeat says
  // the session is being handed off.
  std::atomic<bool> handing_off_{false};
  // Held across reading handing_off_ and sending the heartbeat that says
  // it, so that meta hears the last value last.
  absl::Mutex heartbeat_mu_;
  // Servers the mount's writers found slow: their new segments avoid them.
  const std::shared_ptr<wal::SlowServers> slow_servers_ = std::make_shared<wal::SlowServers>();

  absl::Mutex mu_;
  WriterTable<wal::FileWriter> writers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::fsclient
