// The typed client of the meta service (docs/rpc.md "Meta"): one method
// per RPC, so that no caller builds a frame type and a request by hand.
// Requests and answers are the protos of store/format/logfs.proto.
//
// Attempts. The namespace, file and inspection calls ride out a meta
// restart (store/client/meta_retry.h) when the client has a retry window:
// a transport failure is retried within the window, an answer from meta
// (any error it sends) is final. Open, Release and OpenWrite pin the inode
// in meta's memory without a call id, so an attempt of theirs that timed
// out is not sent again (a refused or broken connection still is). The
// session calls (NewMount, MountHeartbeat, RegisterServer, Heartbeat) and
// ReportBadReplica make one attempt always: their callers loop or do not
// care. Without a retry window (the admin tools) every call makes one
// attempt and returns its error as it came.
//
// Exactly once. The changes (Create, Unlink, Rename, SetAttr, SetXattr,
// RemoveXattr, SealSegment) carry a proto::CallId, the same on every
// attempt: the request's own (seq != 0), else a fresh one from
// NextCallId().
//
// Errors: kUnavailable (cannot connect, connection lost, client shut down;
// with a retry window, "meta at ADDR unreachable for D: ..." once it is
// over), kDeadlineExceeded (one attempt unanswered in time, without
// retries), or meta's answer (PosixError statuses, see docs/rpc.md per
// call; IsServerAnswer tells them apart).
//
// Thread-safe: any thread may call, except that blocking calls must not run
// on an io thread of the connection's io_context (they wait for it).
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/client/meta_endpoints.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/rpc_client.h"

namespace logfs::client {

struct MetaClientOptions {
  // Deadline of one attempt of a call.
  absl::Duration timeout = absl::Seconds(10);
  // How long after its first attempt a call that rides out a meta restart
  // still retries a failed transport (MetaRetryOptions::retry_window; zero:
  // its first failure ends it, as "unreachable"). Unset: one attempt, whose
  // error is returned as it came.
  std::optional<absl::Duration> retry_window = absl::Seconds(30);
};

class MetaClient {
 public:
  // `done` of an asynchronous call runs exactly once, on an io thread,
  // never inline.
  using StatusCallback = std::function<void(absl::Status)>;
  using InodeCallback = std::function<void(absl::StatusOr<proto::Inode>)>;

  // `meta` is the connection to meta (shared, e.g. with a ClientPool); `io`
  // runs the pauses between attempts of asynchronous calls and must outlive
  // the client (the connection's own io_context is the natural choice).
  MetaClient(asio::io_context& io, std::shared_ptr<rpc::RpcClient> meta, MetaClientOptions options);
  // The same over several meta replicas (store/client/meta_endpoints.h):
  // every call goes to the active, following standbys' redirects.
  MetaClient(asio::io_context& io, std::shared_ptr<MetaEndpoints> meta, MetaClientOptions options);

  MetaClient(const MetaClient&) = delete;
  MetaClient& operator=(const MetaClient&) = delete;

  // ------------------------------------------------ sessions: one attempt
  // A mount's id, remembered for NextCallId, Open, Release and OpenWrite.
  absl::StatusOr<uint64_t> NewMount(const std::string& host);
  // Goes on with mount `mount_id`'s session, which the daemon before this
  // one handed over (`logfs mount --takeover`): calls name that mount,
  // call ids continue after `last_call_seq` (meta's call records must
  // never see one twice), and the cache lease is what its NewMount was
  // told (ms). No call: the next MountHeartbeat makes this connection the
  // session's.
  void ResumeMount(uint64_t mount_id, uint64_t last_call_seq, uint32_t cache_lease_ms);
  absl::Status MountHeartbeat(const proto::MountHeartbeatRequest& request);
  absl::StatusOr<proto::RegisterServerResponse> RegisterServer(
      const proto::RegisterServerRequest& request);
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(const proto::HeartbeatRequest& request);
  // Asynchronous, best effort: `done` gets the call's status.
  void ReportBadReplica(const proto::ReportBadReplicaRequest& request, StatusCallback done);

  // ---------------------------------------------------------- namespace
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name);
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino);
  // The same for a mount's kernel cache: meta records what the answer lets
  // `cache`'s mount keep, and invalidates it (docs/coherence.md).
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name,
                                     const proto::CacheSession& cache);
  absl::StatusOr<proto::Attr> GetAttr(uint64_t ino, const proto::CacheSession& cache);
  // One cache poll (MountCaches::Watch), a single attempt within
  // `timeout`. Errors: kUnavailable (meta unreachable, or not the active:
  // the next call goes to the active it named), kDeadlineExceeded.
  absl::StatusOr<proto::WatchCacheResponse> WatchCache(const proto::WatchCacheRequest& request,
                                                       absl::Duration timeout);
  // The cache lease meta's NewMount answer gave (ms); 0 before NewMount or
  // from a meta that sends no invalidations.
  uint32_t cache_lease_ms() const { return cache_lease_ms_.load(); }
  // The whole inode with its segments (no xattrs).
  absl::StatusOr<proto::Inode> GetInode(uint64_t ino);
  absl::StatusOr<proto::Attr> SetAttr(proto::SetAttrRequest request);
  absl::StatusOr<proto::Attr> Create(proto::CreateRequest request);
  // A regular file created with this mount's writer lease
  // (CreateRequest.open_for_write_mount_id): the inode as OpenWrite
  // returns it, from one durable change (from a Create and an OpenWrite
  // with a meta that predates the field). Create's and OpenWrite's errors.
  absl::StatusOr<proto::Inode> CreateForWrite(proto::CreateRequest request);
  absl::Status Unlink(proto::UnlinkRequest request);
  absl::Status Rename(proto::RenameRequest request);
  // A hard link (Namespace::Link's errors). EXDEV from a meta whose
  // NewMount answer stated no wire version 2 (logfs 0.1 has no Link and
  // would close the connection on it): EXDEV is what makes link(2)'s
  // callers (RocksDB, cp -l) fall back to copying.
  absl::StatusOr<proto::Attr> Link(proto::LinkRequest request);
  // A metadata-only copy (Namespace::Clone's errors); EXDEV from a meta
  // of logfs 0.1, as Link.
  absl::StatusOr<proto::Attr> Clone(proto::CloneRequest request);
  // Directory snapshots: create, delete, list (Namespace::Snapshot's
  // errors). EOPNOTSUPP from a meta of logfs 0.1.
  absl::StatusOr<proto::SnapshotResponse> Snapshot(proto::SnapshotRequest request);
  // Meta's check (and with `repair`, rewrite) of its share records against
  // the inodes (Namespace::CheckShares); EOPNOTSUPP from logfs 0.1.
  absl::StatusOr<proto::CheckSharesResponse> CheckShares(bool repair);
  // A metadata-only copy_file_range into a file this mount writes
  // (Namespace::CopyRange's errors): the destination inode after it;
  // mount_id and the call id are stamped here. EXDEV from a meta of logfs
  // 0.1, as Link; a 0.2 meta from before the call refuses it as an unknown
  // type (kInvalidArgument). Either way the caller copies bytes.
  absl::StatusOr<proto::Inode> CopyRange(proto::CopyRangeRequest request);
  absl::StatusOr<std::string> Readlink(uint64_t ino);
  // One page of directory `ino` after `start_after` ("" for the first).
  absl::StatusOr<proto::ReaddirResponse> Readdir(uint64_t ino, const std::string& start_after);
  absl::StatusOr<proto::StatFsResponse> StatFs();
  absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, const std::string& name,
                                       const proto::CacheSession& cache);
  absl::StatusOr<std::vector<std::string>> ListXattr(uint64_t ino);
  absl::Status SetXattr(proto::SetXattrRequest request);
  absl::Status RemoveXattr(uint64_t ino, const std::string& name);

  // -------------------------------------------------------------- files
  // Open, Release and OpenWrite name this client's mount (NewMount).
  absl::StatusOr<proto::Inode> Open(uint64_t ino);
  absl::Status Release(uint64_t ino);
  // Takes the writer lease. EBUSY when another mount holds it.
  absl::StatusOr<proto::Inode> OpenWrite(uint64_t ino, bool truncate);
  // Records a sealed segment and opens the next, closes, or only seals
  // (docs/rpc.md "SealSegment"); the inode after it.
  absl::StatusOr<proto::Inode> SealSegment(proto::SealSegmentRequest request);
  // The same, asynchronously (the writer's roll, flush and close).
  void AsyncSealSegment(proto::SealSegmentRequest request, InodeCallback done);

  // --------------------------------------------------------- inspection
  // One page of the segment servers from `start_server_id`.
  absl::StatusOr<proto::ListServersResponse> ListServers(uint64_t start_server_id);
  // One page of the regular files from `start_ino`.
  absl::StatusOr<proto::ListSegmentsResponse> ListSegments(uint64_t start_ino);
  // Revokes the writer lease of `ino` and recovers its open segment (no
  // call id: a timed-out attempt is final).
  absl::StatusOr<proto::Inode> RecoverLease(uint64_t ino);

  // A fresh id for one change (this mount's id, sequence numbers from 1).
  proto::CallId NextCallId();
  uint64_t mount_id() const { return mount_id_.load(); }
  // The seq of the last call id NextCallId gave (0 before any).
  uint64_t last_call_seq() const { return last_call_seq_.load(); }
  // The replica calls go to now.
  std::string address() const { return meta_->Current()->address(); }
  // Every replica, comma-separated.
  std::string addresses() const { return meta_->Describe(); }
  // Later calls go to the replica at `address` if it is listed
  // (MetaEndpoints::MoveTo).
  bool UseReplica(const std::string& address) { return meta_->MoveTo(address); }
  const MetaClientOptions& options() const { return options_; }

  // Closes the connection: calls in flight and later fail with
  // kUnavailable.
  void Shutdown() { meta_->Shutdown(); }

 private:
  enum class Attempts {
    kOne,               // always a single attempt
    kRetry,             // MetaRetryOptions within the window
    kRetryButTimeouts,  // the same, but a timed-out attempt is final
  };

  absl::Status Call(format::MessageType type, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, Attempts attempts);
  // `done` gets the status and the answer's frame (empty on failure).
  void AsyncCall(format::MessageType type, const google::protobuf::MessageLite& request,
                 Attempts attempts, std::function<void(absl::Status, format::Frame)> done);
  // A fresh call id unless the change has one.
  void StampCall(proto::CallId* call);

  // Immutable after construction.
  asio::io_context& io_;
  const std::shared_ptr<MetaEndpoints> meta_;
  const MetaClientOptions options_;

  std::atomic<uint64_t> mount_id_{0};
  std::atomic<uint32_t> cache_lease_ms_{0};
  // The newest wire version meta stated in NewMount's answer (1 for a meta
  // that stated none); 0 before NewMount.
  std::atomic<uint32_t> meta_wire_max_{0};
  std::atomic<uint64_t> last_call_seq_{0};
};

}  // namespace logfs::client
