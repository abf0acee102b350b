// The writer's RPCs, over the typed clients of store/client/.
#include "wal/rpc_writer_deps.h"

#include <asio.hpp>
#include <chrono>

#include "absl/time/clock.h"
#include "src/util/crc32c.h"
#include "store/format/setattr_bits.h"

namespace logfs::wal {
namespace {

// A replica's answer to an Append or Sync: its durable length.
absl::StatusOr<uint64_t> DurableLength(absl::StatusOr<proto::SegmentInfoResponse> info) {
  if (!info.ok()) return info.status();
  return info->durable_length();
}

class RpcWriterDeps final : public WriterDeps {
 public:
  RpcWriterDeps(RpcWriterDepsOptions options, client::MetaClient* meta, client::SegdClient* segd)
      : options_(options), meta_(meta), segd_(segd) {}

  absl::Time Now() override { return absl::Now(); }

  void RunAfter(absl::Duration delay, std::function<void()> fn) override {
    auto timer = std::make_shared<asio::steady_timer>(
        segd_->io(), std::chrono::microseconds(absl::ToInt64Microseconds(delay)));
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
    segd_->AsyncAppend(
        address, request, std::move(data), options_.replica_timeout,
        [handler, segment_id = call.segment.id,
         replica = call.replica](absl::StatusOr<proto::SegmentInfoResponse> info) {
          handler->OnReplicaReply(segment_id, replica, false, DurableLength(std::move(info)));
        },
        batch);
  }

  void SyncReplica(const std::string& address, SegmentRef segment, size_t replica,
                   const std::shared_ptr<ReplicaReplyHandler>& handler,
                   rpc::CallBatch* batch) override {
    proto::SyncRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    segd_->AsyncSync(
        address, request, options_.replica_timeout,
        [handler, segment_id = segment.id,
         replica](absl::StatusOr<proto::SegmentInfoResponse> info) {
          handler->OnReplicaReply(segment_id, replica, true, DurableLength(std::move(info)));
        },
        batch);
  }

  void SealReplica(const std::string& address, SegmentRef segment, uint64_t length,
                   Done done) override {
    proto::SealRequest request;
    request.set_segment_id(segment.id);
    request.set_epoch(segment.epoch);
    request.set_length(length);
    segd_->AsyncSeal(address, request, options_.replica_timeout,
                     [done = std::move(done)](absl::StatusOr<proto::SegmentInfoResponse> info) {
                       done(info.status());
                     });
  }

  std::vector<absl::Status> CreateReplicas(const std::vector<std::string>& addresses,
                                           SegmentRef segment) override {
    std::vector<absl::Status> out;
    for (auto& result :
         segd_->CreateSegmentEach(addresses, segment.id, segment.epoch, options_.replica_timeout)) {
      out.push_back(result.status());
    }
    return out;
  }

  std::vector<absl::Status> ReopenReplicas(const std::vector<std::string>& addresses,
                                           SegmentRef segment, uint64_t length) override {
    std::vector<absl::Status> out;
    for (auto& result : segd_->ReopenSegmentEach(addresses, segment.id, segment.epoch, length,
                                                 options_.replica_timeout)) {
      out.push_back(result.status());
    }
    return out;
  }

  std::vector<absl::StatusOr<uint64_t>> ReplicaLengths(const std::vector<std::string>& addresses,
                                                       uint64_t segment_id) override {
    std::vector<absl::StatusOr<uint64_t>> out;
    for (auto& info : segd_->SegmentInfoEach(addresses, segment_id, options_.replica_timeout)) {
      if (info.ok()) {
        out.push_back(info->length());
      } else {
        out.push_back(info.status());
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
    return segd_->Append(address, request, std::move(data), options_.replica_timeout).status();
  }

  void SealAtMeta(const MetaSealCall& call, InodeDone done) override {
    proto::SealSegmentRequest request;
    request.set_ino(call.ino);
    request.set_mount_id(call.mount_id);
    request.set_segment_id(call.segment_id);
    request.set_sealed_length(call.sealed_length);
    request.set_close(call.close);
    request.set_unchanged(call.unchanged);
    request.set_keep_lease(call.keep_lease);
    request.set_mtime_ns(call.mtime_ns);
    for (uint64_t id : call.failed_servers) request.add_failed_servers(id);
    for (uint64_t id : call.avoid_servers) request.add_avoid_servers(id);
    request.set_sealed_file_length(call.sealed_file_length);
    request.set_lease_epoch(call.lease_epoch);
    request.set_continue_below_bytes(call.continue_below_bytes);
    if (call.call.has_value()) *request.mutable_call() = *call.call;
    meta_->AsyncSealSegment(std::move(request), std::move(done));
  }

  absl::Status TruncateAtMeta(uint64_t ino, uint64_t mount_id,
                              std::optional<proto::CallId> call) override {
    proto::SetAttrRequest request;
    request.set_ino(ino);
    request.set_mount_id(mount_id);
    request.set_to_set(format::kSetAttrSize);
    request.set_size(0);
    if (call.has_value()) *request.mutable_call() = *call;
    return meta_->SetAttr(std::move(request)).status();
  }

 private:
  const RpcWriterDepsOptions options_;
  client::MetaClient* const meta_;
  client::SegdClient* const segd_;
};

}  // namespace

std::shared_ptr<WriterDeps> NewRpcWriterDeps(RpcWriterDepsOptions options, client::MetaClient* meta,
                                             client::SegdClient* segd) {
  return std::make_shared<RpcWriterDeps>(options, meta, segd);
}

}  // namespace logfs::wal
