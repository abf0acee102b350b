#include "store/meta/namespace/segd_api.h"

#include <algorithm>

namespace logfs::meta {
namespace {

absl::Status Stopping() { return absl::UnavailableError("meta is stopping"); }

}  // namespace

RpcSegmentServerApi::RpcSegmentServerApi(asio::io_context& io, absl::Duration timeout)
    : timeout_(timeout), pool_(io), segd_(pool_) {}

RpcSegmentServerApi::~RpcSegmentServerApi() { Shutdown(); }

void RpcSegmentServerApi::Shutdown() {
  shut_down_.store(true);
  pool_.ShutdownAll();
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::SegmentInfo(
    const std::string& address, uint64_t segment_id) {
  if (shut_down_.load()) return Stopping();
  return segd_.SegmentInfo(address, segment_id, timeout_);
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::Seal(const std::string& address,
                                                                     uint64_t segment_id,
                                                                     uint64_t epoch,
                                                                     uint64_t length) {
  if (shut_down_.load()) return Stopping();
  proto::SealRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  request.set_length(length);
  request.set_meta_epoch(meta_epoch_.load());
  return segd_.Seal(address, request, timeout_);
}

absl::StatusOr<proto::SegmentInfoResponse> RpcSegmentServerApi::Fence(const std::string& address,
                                                                      uint64_t segment_id,
                                                                      uint64_t epoch) {
  if (shut_down_.load()) return Stopping();
  return segd_.Fence(address, segment_id, epoch, timeout_, meta_epoch_.load());
}

absl::StatusOr<proto::ServerStatsResponse> RpcSegmentServerApi::Identify(
    const std::string& address) {
  if (shut_down_.load()) return Stopping();
  // RegisterServer asks this on one of meta's network threads: a holder
  // that does not answer within a second is taken for gone, rather than
  // holding every namespace call behind it for the whole RPC timeout.
  return segd_.ServerStats(address, std::min(timeout_, kIdentifyTimeout));
}

std::vector<absl::Status> RpcSegmentServerApi::CopySegments(
    const std::vector<RereplicationTask>& tasks, absl::Duration timeout) {
  if (shut_down_.load()) return std::vector<absl::Status>(tasks.size(), Stopping());
  const uint64_t meta_epoch = meta_epoch_.load();
  std::vector<client::CopyCall> copies(tasks.size());
  for (size_t i = 0; i < tasks.size(); ++i) {
    const RereplicationTask& task = tasks[i];
    copies[i].target_address = task.target_address;
    proto::CopySegmentRequest& request = copies[i].request;
    request.set_segment_id(task.segment_id);
    request.set_epoch(task.epoch);
    request.set_length(task.length);
    request.set_meta_epoch(meta_epoch);
    for (const auto& source : task.source_addresses) request.add_source_addresses(source);
  }
  return segd_.CopySegmentEach(copies, timeout);
}

}  // namespace logfs::meta
