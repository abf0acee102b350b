#include "store/client/meta_client.h"

#include <glog/logging.h>

#include <cerrno>
#include <utility>

#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/client/meta_retry.h"
#include "store/format/wire_version.h"

namespace logfs::client {

using format::MessageType;

MetaClient::MetaClient(asio::io_context& io, std::shared_ptr<rpc::RpcClient> meta,
                       MetaClientOptions options)
    : MetaClient(io, MetaEndpoints::Single(std::move(meta)), std::move(options)) {}

MetaClient::MetaClient(asio::io_context& io, std::shared_ptr<MetaEndpoints> meta,
                       MetaClientOptions options)
    : io_(io), meta_(std::move(meta)), options_(std::move(options)) {
  CHECK(meta_ != nullptr);
}

absl::Status MetaClient::Call(MessageType type, const google::protobuf::MessageLite& request,
                              google::protobuf::MessageLite* response, Attempts attempts) {
  if (attempts == Attempts::kOne || !options_.retry_window.has_value()) {
    return CallMetaOnce(*meta_, type, request, response, options_.timeout);
  }
  MetaRetryOptions retry;
  retry.attempt_timeout = options_.timeout;
  retry.retry_window = *options_.retry_window;
  retry.retry_timeouts = attempts == Attempts::kRetry;
  return CallMeta(*meta_, type, request, response, retry);
}

void MetaClient::AsyncCall(MessageType type, const google::protobuf::MessageLite& request,
                           Attempts attempts,
                           std::function<void(absl::Status, format::Frame)> on_answer) {
  if (attempts == Attempts::kOne || !options_.retry_window.has_value()) {
    MetaRetryOptions once;
    once.attempt_timeout = options_.timeout;
    once.one_attempt = true;
    AsyncCallMeta(io_, meta_, type, request, once, std::move(on_answer));
    return;
  }
  MetaRetryOptions retry;
  retry.attempt_timeout = options_.timeout;
  retry.retry_window = *options_.retry_window;
  retry.retry_timeouts = attempts == Attempts::kRetry;
  AsyncCallMeta(io_, meta_, type, request, retry, std::move(on_answer));
}

proto::CallId MetaClient::NextCallId() {
  proto::CallId call;
  call.set_mount_id(mount_id_.load());
  call.set_seq(last_call_seq_.fetch_add(1) + 1);
  return call;
}

void MetaClient::StampCall(proto::CallId* call) {
  // A session without a mount id (a tool's: `logfs clone`) has no ids
  // unique to it: its changes go without one, as before retries existed.
  if (call->seq() == 0 && mount_id_.load() != 0) *call = NextCallId();
}

// ------------------------------------------------------------- sessions

void MetaClient::ResumeMount(uint64_t mount_id, uint64_t last_call_seq, uint32_t cache_lease_ms) {
  mount_id_.store(mount_id);
  last_call_seq_.store(last_call_seq);
  cache_lease_ms_.store(cache_lease_ms);
}

absl::StatusOr<uint64_t> MetaClient::NewMount(const std::string& host) {
  proto::NewMountRequest request;
  request.set_host(host);
  *request.mutable_version() = format::OwnVersion("mount");
  proto::NewMountResponse response;
  RETURN_IF_ERROR(Call(MessageType::kNewMount, request, &response, Attempts::kOne));
  if (absl::Status shared = format::CheckPeerVersion(
          request.version(), format::PeerVersion(response.has_version(), response.version(), "meta"),
          address());
      !shared.ok()) {
    LOG(ERROR) << "refused: " << shared.message();
    return shared;
  }
  mount_id_.store(response.mount_id());
  cache_lease_ms_.store(response.cache_lease_ms());
  meta_wire_max_.store(
      format::PeerVersion(response.has_version(), response.version(), "meta").wire_max());
  return response.mount_id();
}

absl::Status MetaClient::MountHeartbeat(const proto::MountHeartbeatRequest& request) {
  proto::Empty response;
  return Call(MessageType::kMountHeartbeat, request, &response, Attempts::kOne);
}

absl::StatusOr<proto::RegisterServerResponse> MetaClient::RegisterServer(
    const proto::RegisterServerRequest& request) {
  proto::RegisterServerResponse response;
  RETURN_IF_ERROR(Call(MessageType::kRegisterServer, request, &response, Attempts::kOne));
  return response;
}

absl::StatusOr<proto::HeartbeatResponse> MetaClient::Heartbeat(
    const proto::HeartbeatRequest& request) {
  proto::HeartbeatResponse response;
  RETURN_IF_ERROR(Call(MessageType::kHeartbeat, request, &response, Attempts::kOne));
  return response;
}

void MetaClient::ReportBadReplica(const proto::ReportBadReplicaRequest& request,
                                  StatusCallback done) {
  AsyncCall(MessageType::kReportBadReplica, request, Attempts::kOne,
            [done = std::move(done)](absl::Status s, format::Frame) { done(std::move(s)); });
}

// ------------------------------------------------------------ namespace

absl::StatusOr<proto::Attr> MetaClient::Lookup(uint64_t parent, const std::string& name) {
  return Lookup(parent, name, proto::CacheSession());
}

absl::StatusOr<proto::Attr> MetaClient::Lookup(uint64_t parent, const std::string& name,
                                               const proto::CacheSession& cache) {
  proto::LookupRequest request;
  request.set_parent(parent);
  request.set_name(name);
  if (cache.mount_id() != 0) *request.mutable_cache() = cache;
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kLookup, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::Attr> MetaClient::GetAttr(uint64_t ino) {
  return GetAttr(ino, proto::CacheSession());
}

absl::StatusOr<proto::Attr> MetaClient::GetAttr(uint64_t ino, const proto::CacheSession& cache) {
  proto::GetAttrRequest request;
  request.set_ino(ino);
  if (cache.mount_id() != 0) *request.mutable_cache() = cache;
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kGetAttr, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::WatchCacheResponse> MetaClient::WatchCache(
    const proto::WatchCacheRequest& request, absl::Duration timeout) {
  proto::WatchCacheResponse response;
  RETURN_IF_ERROR(CallMetaOnce(*meta_, MessageType::kWatchCache, request, &response, timeout));
  return response;
}

absl::StatusOr<proto::Inode> MetaClient::GetInode(uint64_t ino) {
  proto::GetAttrRequest request;
  request.set_ino(ino);
  proto::InodeResponse response;
  RETURN_IF_ERROR(Call(MessageType::kGetInode, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_inode());
}

absl::StatusOr<proto::Attr> MetaClient::SetAttr(proto::SetAttrRequest request) {
  StampCall(request.mutable_call());
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kSetAttr, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::Attr> MetaClient::Create(proto::CreateRequest request) {
  StampCall(request.mutable_call());
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kCreate, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::Inode> MetaClient::CreateForWrite(proto::CreateRequest request) {
  StampCall(request.mutable_call());
  request.set_open_for_write_mount_id(mount_id());
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kCreate, request, &response, Attempts::kRetry));
  if (!response.has_inode()) {
    // A meta from before open_for_write_mount_id created the file without
    // the lease: take it as before.
    return OpenWrite(response.attr().ino(), /*truncate=*/false);
  }
  return std::move(*response.mutable_inode());
}

absl::Status MetaClient::Unlink(proto::UnlinkRequest request) {
  StampCall(request.mutable_call());
  proto::Empty response;
  return Call(MessageType::kUnlink, request, &response, Attempts::kRetry);
}

absl::Status MetaClient::Rename(proto::RenameRequest request) {
  StampCall(request.mutable_call());
  proto::Empty response;
  return Call(MessageType::kRename, request, &response, Attempts::kRetry);
}

absl::StatusOr<proto::Attr> MetaClient::Link(proto::LinkRequest request) {
  if (meta_wire_max_.load() == 1) return PosixError(EXDEV, "this meta (logfs 0.1) has no hard links");
  StampCall(request.mutable_call());
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kLink, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::Attr> MetaClient::Clone(proto::CloneRequest request) {
  if (meta_wire_max_.load() == 1) return PosixError(EXDEV, "this meta (logfs 0.1) has no clones");
  StampCall(request.mutable_call());
  proto::AttrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kClone, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_attr());
}

absl::StatusOr<proto::SnapshotResponse> MetaClient::Snapshot(proto::SnapshotRequest request) {
  if (meta_wire_max_.load() == 1) return PosixError(EOPNOTSUPP, "this meta (logfs 0.1) has no snapshots");
  if (request.op() != proto::SnapshotRequest::LIST) StampCall(request.mutable_call());
  proto::SnapshotResponse response;
  // A create or delete is not repeated: its retry would answer EEXIST or
  // ENOENT for what the first attempt did.
  RETURN_IF_ERROR(Call(MessageType::kSnapshot, request, &response,
                       request.op() == proto::SnapshotRequest::LIST ? Attempts::kRetry
                                                                    : Attempts::kRetryButTimeouts));
  return response;
}

absl::StatusOr<proto::CheckSharesResponse> MetaClient::CheckShares(bool repair) {
  if (meta_wire_max_.load() == 1) return PosixError(EOPNOTSUPP, "this meta (logfs 0.1) has no shares");
  proto::CheckSharesRequest request;
  request.set_repair(repair);
  proto::CheckSharesResponse response;
  RETURN_IF_ERROR(Call(MessageType::kCheckShares, request, &response, Attempts::kRetry));
  return response;
}

absl::StatusOr<proto::Inode> MetaClient::CopyRange(proto::CopyRangeRequest request) {
  if (meta_wire_max_.load() == 1) {
    return PosixError(EXDEV, "this meta (logfs 0.1) has no metadata-only copies");
  }
  StampCall(request.mutable_call());
  request.set_mount_id(mount_id());
  proto::InodeResponse response;
  RETURN_IF_ERROR(Call(MessageType::kCopyRange, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_inode());
}

absl::StatusOr<std::string> MetaClient::Readlink(uint64_t ino) {
  proto::GetAttrRequest request;
  request.set_ino(ino);
  proto::ReadlinkResponse response;
  RETURN_IF_ERROR(Call(MessageType::kReadlink, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_target());
}

absl::StatusOr<proto::ReaddirResponse> MetaClient::Readdir(uint64_t ino,
                                                           const std::string& start_after) {
  proto::ReaddirRequest request;
  request.set_ino(ino);
  request.set_start_after(start_after);
  proto::ReaddirResponse response;
  RETURN_IF_ERROR(Call(MessageType::kReaddir, request, &response, Attempts::kRetry));
  return response;
}

absl::StatusOr<proto::StatFsResponse> MetaClient::StatFs() {
  proto::StatFsResponse response;
  RETURN_IF_ERROR(Call(MessageType::kStatFs, proto::Empty(), &response, Attempts::kRetry));
  return response;
}

absl::StatusOr<std::string> MetaClient::GetXattr(uint64_t ino, const std::string& name) {
  return GetXattr(ino, name, proto::CacheSession());
}

absl::StatusOr<std::string> MetaClient::GetXattr(uint64_t ino, const std::string& name,
                                                 const proto::CacheSession& cache) {
  proto::GetXattrRequest request;
  request.set_ino(ino);
  request.set_name(name);
  if (cache.mount_id() != 0) *request.mutable_cache() = cache;
  proto::GetXattrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kGetXattr, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_value());
}

absl::StatusOr<std::vector<std::string>> MetaClient::ListXattr(uint64_t ino) {
  proto::GetAttrRequest request;
  request.set_ino(ino);
  proto::ListXattrResponse response;
  RETURN_IF_ERROR(Call(MessageType::kListXattr, request, &response, Attempts::kRetry));
  return std::vector<std::string>(response.names().begin(), response.names().end());
}

absl::Status MetaClient::SetXattr(proto::SetXattrRequest request) {
  StampCall(request.mutable_call());
  proto::Empty response;
  return Call(MessageType::kSetXattr, request, &response, Attempts::kRetry);
}

absl::Status MetaClient::RemoveXattr(uint64_t ino, const std::string& name) {
  proto::GetXattrRequest request;
  request.set_ino(ino);
  request.set_name(name);
  StampCall(request.mutable_call());
  proto::Empty response;
  return Call(MessageType::kRemoveXattr, request, &response, Attempts::kRetry);
}

// ---------------------------------------------------------------- files

// Open, Release and OpenWrite pin the inode (and take the lease) in meta's
// memory and carry no call id: one that timed out may have been applied,
// and a second would pin twice, or unpin another descriptor's pin.

absl::StatusOr<proto::Inode> MetaClient::Open(uint64_t ino) {
  proto::OpenRequest request;
  request.set_ino(ino);
  request.set_mount_id(mount_id());
  proto::InodeResponse response;
  RETURN_IF_ERROR(Call(MessageType::kOpen, request, &response, Attempts::kRetryButTimeouts));
  return std::move(*response.mutable_inode());
}

absl::Status MetaClient::Release(uint64_t ino) {
  proto::ReleaseRequest request;
  request.set_ino(ino);
  request.set_mount_id(mount_id());
  proto::Empty response;
  return Call(MessageType::kRelease, request, &response, Attempts::kRetryButTimeouts);
}

absl::StatusOr<proto::Inode> MetaClient::OpenWrite(uint64_t ino, bool truncate) {
  proto::OpenWriteRequest request;
  request.set_ino(ino);
  request.set_mount_id(mount_id());
  request.set_truncate(truncate);
  proto::InodeResponse response;
  RETURN_IF_ERROR(Call(MessageType::kOpenWrite, request, &response, Attempts::kRetryButTimeouts));
  return std::move(*response.mutable_inode());
}

absl::StatusOr<proto::Inode> MetaClient::SealSegment(proto::SealSegmentRequest request) {
  StampCall(request.mutable_call());
  proto::InodeResponse response;
  RETURN_IF_ERROR(Call(MessageType::kSealSegment, request, &response, Attempts::kRetry));
  return std::move(*response.mutable_inode());
}

void MetaClient::AsyncSealSegment(proto::SealSegmentRequest request, InodeCallback done) {
  StampCall(request.mutable_call());
  AsyncCall(MessageType::kSealSegment, request, Attempts::kRetry,
            [done = std::move(done)](absl::Status s, format::Frame frame) {
              proto::InodeResponse response;
              if (s.ok() && !response.ParseFromString(frame.message)) {
                s = absl::InternalError("unparseable inode from meta");
              }
              if (!s.ok()) return done(std::move(s));
              done(std::move(*response.mutable_inode()));
            });
}

// ----------------------------------------------------------- inspection

absl::StatusOr<proto::ListServersResponse> MetaClient::ListServers(uint64_t start_server_id) {
  proto::ListServersRequest request;
  request.set_start_server_id(start_server_id);
  proto::ListServersResponse response;
  RETURN_IF_ERROR(Call(MessageType::kListServers, request, &response, Attempts::kRetry));
  return response;
}

absl::StatusOr<proto::ListSegmentsResponse> MetaClient::ListSegments(uint64_t start_ino) {
  proto::ListSegmentsRequest request;
  request.set_start_ino(start_ino);
  proto::ListSegmentsResponse response;
  RETURN_IF_ERROR(Call(MessageType::kListSegments, request, &response, Attempts::kRetry));
  return response;
}

absl::StatusOr<proto::Inode> MetaClient::RecoverLease(uint64_t ino) {
  proto::RecoverLeaseRequest request;
  request.set_ino(ino);
  proto::InodeResponse response;
  RETURN_IF_ERROR(
      Call(MessageType::kRecoverLease, request, &response, Attempts::kRetryButTimeouts));
  return std::move(*response.mutable_inode());
}

}  // namespace logfs::client
