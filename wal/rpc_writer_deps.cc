// The writer's RPCs. Every request FileWriter makes is built here, so that
// this file alone changes when they move to typed clients.
#include "wal/rpc_writer_deps.h"

#include <asio.hpp>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/util/crc32c.h"
#include "store/format/message_type.h"
#include "store/rpc/parallel_call.h"

namespace logfs::wal {
namespace {

// FUSE_SET_ATTR_SIZE, the bit of SetAttrRequest.to_set that sets the size.
constexpr uint32_t kSetAttrSize = 1 << 3;

// A replica's answer to an Append or Sync: its durable length.
absl::StatusOr<uint64_t> DurableLength(absl::Status status, const format::Frame& frame) {
  if (!status.ok()) return status;
  proto::SegmentInfoResponse info;
  if (!info.ParseFromString(frame.message)) return absl::InternalError("unparseable segment info");
  return info.durable_length();
}

class RpcWriterDeps final : public WriterDeps {
 public:
  RpcWriterDeps(RpcWriterDepsOptions options, std::shared_ptr<rpc::RpcClient> meta,
                rpc::ClientPool* pool)
      : options_(options), meta_(std::move(meta)), pool_(pool) {}

  absl::Time Now() override { return absl::Now(); }

  void RunAfter(absl::Duration delay, std::function<void()> fn) override {
    auto timer = std::make_shared<asio::steady_timer>(
        pool_->io(), std::chrono::microseconds(absl::ToInt64Microseconds(delay)));
    timer->async_wait([timer, fn = std::move(fn)](asio::error_code) { fn(); });
  }

  void Append(const std::string& address, const AppendCall& call,
              std::shared_ptr<const std::string> data,
              const std::shared_ptr<ReplicaReplyHandler>& handler, rpc::CallBatch* batch) override {
    proto::AppendRequest request;
    request.set_segment_id(call.segment.id);
    request.set_epoch(call.segment.epoch);
    request.set_offset(call.offset);
    request.set_crc32c(call.crc32c);
    request.set_sync(call.sync);
    pool_->Get(address)->AsyncCallShared(
        format::MessageType::kAppend, request, std::move(data), options_.replica_timeout,
        [handler, segment_id = call.segment.id, replica = call.replica](absl::Status s,
                                                                        format::Frame f) {
          handler->OnReplicaReply(segment_id, replica, false, DurableLength(std::move(s), f));
        },
        batch);
  }

  void SyncReplica(const std::string& address, SegmentRef segment, size_t replica,
                   const std::shared_ptr<ReplicaReplyHandler>& handler,
                   rpc::CallBatch* batch) override {
    proto::SyncRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    pool_->Get(address)->AsyncCall(
        format::MessageType::kSync, request, {}, options_.replica_timeout,
        [handler, segment_id = segment.id, replica](absl::Status s, format::Frame f) {
          handler->OnReplicaReply(segment_id, replica, true, DurableLength(std::move(s), f));
        },
        batch);
  }

  void SealReplica(const std::string& address, SegmentRef segment, uint64_t length,
                   Done done) override {
    proto::SealRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    request.set_length(length);
    pool_->Get(address)->AsyncCall(
        format::MessageType::kSeal, request, {}, options_.replica_timeout,
        [done = std::move(done)](absl::Status s, format::Frame) { done(std::move(s)); });
  }

  std::vector<absl::Status> CreateReplicas(const std::vector<std::string>& addresses,
                                           SegmentRef segment) override {
    proto::CreateSegmentRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    std::vector<absl::Status> out;
    for (auto& result : rpc::CallEach(*pool_, addresses, format::MessageType::kCreateSegment,
                                      request, options_.replica_timeout)) {
      out.push_back(std::move(result.status));
    }
    return out;
  }

  std::vector<absl::StatusOr<uint64_t>> ReplicaLengths(const std::vector<std::string>& addresses,
                                                       uint64_t segment_id) override {
    proto::SegmentInfoRequest request;
    request.set_segment_id(segment_id);
    std::vector<absl::StatusOr<uint64_t>> out;
    for (auto& result : rpc::CallEach(*pool_, addresses, format::MessageType::kSegmentInfo, request,
                                      options_.replica_timeout)) {
      proto::SegmentInfoResponse info;
      if (!result.status.ok()) {
        out.push_back(std::move(result.status));
      } else if (!info.ParseFromString(result.response.message)) {
        out.push_back(absl::InternalError("unparseable segment info"));
      } else {
        out.push_back(info.length());
      }
    }
    return out;
  }

  absl::Status FillReplica(const std::string& address, SegmentRef segment, uint64_t offset,
                           std::string data) override {
    proto::AppendRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    request.set_offset(offset);
    request.set_sync(true);
    request.set_crc32c(util::Crc32c(data.data(), data.size()));
    proto::SegmentInfoResponse ignored;
    return pool_->Get(address)->Call(format::MessageType::kAppend, request, &ignored,
                                     options_.replica_timeout, std::move(data));
  }

  void SealAtMeta(const MetaSealCall& call, InodeDone done) override {
    proto::SealSegmentRequest request;
    request.set_ino(call.ino);
    request.set_mount_id(call.mount_id);
    request.set_segment_id(call.segment_id);
    request.set_sealed_length(call.sealed_length);
    request.set_close(call.close);
    request.set_keep_lease(call.keep_lease);
    request.set_mtime_ns(call.mtime_ns);
    for (uint64_t id : call.failed_servers) request.add_failed_servers(id);
    request.set_sealed_file_length(call.sealed_file_length);
    if (call.call.has_value()) *request.mutable_call() = *call.call;
    client::AsyncCallMeta(pool_->io(), meta_, format::MessageType::kSealSegment, request,
                          options_.meta_retry,
                          [done = std::move(done)](absl::Status s, format::Frame frame) {
                            proto::InodeResponse response;
                            if (s.ok() && !response.ParseFromString(frame.message)) {
                              s = absl::InternalError("unparseable inode from meta");
                            }
                            if (!s.ok()) return done(std::move(s));
                            done(std::move(*response.mutable_inode()));
                          });
  }

  absl::Status TruncateAtMeta(uint64_t ino, uint64_t mount_id,
                              std::optional<proto::CallId> call) override {
    proto::SetAttrRequest request;
    request.set_ino(ino);
    request.set_mount_id(mount_id);
    request.set_to_set(kSetAttrSize);
    request.set_size(0);
    if (call.has_value()) *request.mutable_call() = *call;
    proto::AttrResponse response;
    return client::CallMeta(*meta_, format::MessageType::kSetAttr, request, &response,
                            options_.meta_retry);
  }

 private:
  const RpcWriterDepsOptions options_;
  const std::shared_ptr<rpc::RpcClient> meta_;
  rpc::ClientPool* const pool_;
};

}  // namespace

std::shared_ptr<WriterDeps> NewRpcWriterDeps(RpcWriterDepsOptions options,
                                             std::shared_ptr<rpc::RpcClient> meta,
                                             rpc::ClientPool* pool) {
  return std::make_shared<RpcWriterDeps>(options, std::move(meta), pool);
}

}  // namespace logfs::wal
