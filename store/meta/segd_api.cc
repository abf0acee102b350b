#include "store/meta/segd_api.h"

#include <algorithm>

#include "absl/synchronization/blocking_counter.h"
#include "store/format/message_type.h"

namespace logfs::meta {

RpcSegmentServerApi::RpcSegmentServerApi(asio::io_context& io, absl::Duration timeout)
    : io_(io), timeout_(timeout) {}

RpcSegmentServerApi::~RpcSegmentServerApi() { Shutdown(); }

void RpcSegmentServerApi::Shutdown() {
  std::map<std::string, std::shared_ptr<rpc::RpcClient>> clients;
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
    clients.swap(clients_);
  }
  for (auto& [address, client] : clients) client->Shutdown();
}

std::shared_ptr<rpc::RpcClient> RpcSegmentServerApi::ClientFor(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (shutdown_) return nullptr;
  auto& client = clients_[address];
  if (client == nullptr) client = rpc::RpcClient::Create(io_, address);
  return client;
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::SegmentInfo(
    const std::string& address, uint64_t segment_id) {
  proto::SegmentInfoRequest request;
  request.set_segment_id(segment_id);
  auto client = ClientFor(address);
  if (client == nullptr) return absl::UnavailableError("meta is stopping");
  proto::SegmentInfoResponse response;
  absl::Status s = client->Call(format::MessageType::kSegmentInfo, request, &response, timeout_);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::Seal(const std::string& address,
                                                                     uint64_t segment_id,
                                                                     uint64_t epoch,
                                                                     uint64_t length) {
  proto::SealRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  request.set_length(length);
  auto client = ClientFor(address);
  if (client == nullptr) return absl::UnavailableError("meta is stopping");
  proto::SegmentInfoResponse response;
  absl::Status s = client->Call(format::MessageType::kSeal, request, &response, timeout_);
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::Fence(const std::string& address,
                                                                      uint64_t segment_id,
                                                                      uint64_t epoch) {
  proto::CreateSegmentRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  auto client = ClientFor(address);
  if (client == nullptr) return absl::UnavailableError("meta is stopping");
  proto::SegmentInfoResponse response;
  absl::Status s = client->Call(format::MessageType::kCreateSegment, request, &response, timeout_);
  if (absl::IsFailedPrecondition(s)) return SegmentInfo(address, segment_id);  // sealed
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<proto::ServerStatsResponse> RpcSegmentServerApi::Identify(
    const std::string& address) {
  auto client = ClientFor(address);
  if (client == nullptr) return absl::UnavailableError("meta is stopping");
  proto::ServerStatsResponse response;
  // RegisterServer asks this on one of meta's network threads: a holder
  // that does not answer within a second is taken for gone, rather than
  // holding every namespace call behind it for the whole RPC timeout.
  absl::Status s = client->Call(format::MessageType::kServerStats, proto::Empty(), &response,
                                std::min(timeout_, kIdentifyTimeout));
  if (!s.ok()) return s;
  return response;
}

std::vector<absl::Status> RpcSegmentServerApi::CopySegments(
    const std::vector<RereplicationTask>& tasks, absl::Duration timeout) {
  std::vector<absl::Status> results(tasks.size());
  absl::BlockingCounter pending(static_cast<int>(tasks.size()));
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RereplicationTask& task = tasks[i];
    auto client = ClientFor(task.target_address);
    if (client == nullptr) {
      results[i] = absl::UnavailableError("meta is stopping");
      pending.DecrementCount();
      continue;
    }
    proto::CopySegmentRequest request;
    request.set_segment_id(task.segment_id);
    request.set_epoch(task.epoch);
    request.set_length(task.length);
    for (const auto& source : task.source_addresses) request.add_source_addresses(source);
    client->AsyncCall(format::MessageType::kCopySegment, request, {}, timeout,
                      [&results, &pending, i](absl::Status status, format::Frame) {
                        results[i] = std::move(status);
                        pending.DecrementCount();
                      });
  }
  pending.Wait();
  return results;
}

}  // namespace logfs::meta
