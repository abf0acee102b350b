#include "store/client/admin_client.h"

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/message_type.h"

namespace logfs::client {

AdminClient::AdminClient(std::string meta_address, absl::Duration timeout)
    : meta_address_(std::move(meta_address)),
      timeout_(timeout),
      work_(asio::make_work_guard(io_)),
      clients_(io_),
      io_thread_([this] { io_.run(); }) {}

AdminClient::~AdminClient() {
  clients_.ShutdownAll();
  work_.reset();
  io_.stop();
  io_thread_.join();
}

absl::StatusOr<proto::ListServersResponse> AdminClient::ListServers() {
  proto::ListServersResponse all;
  proto::ListServersRequest request;
  for (size_t page = 0; page < kAdminPagesMax; ++page) {
    proto::ListServersResponse response;
    RETURN_IF_ERROR(clients_.Get(meta_address_)
                        ->Call(format::MessageType::kListServers, request, &response, timeout_));
    for (auto& server : *response.mutable_servers()) *all.add_servers() = std::move(server);
    if (response.next_server_id() == 0) return all;
    if (response.next_server_id() <= request.start_server_id()) {
      return absl::InternalError("ListServers went backwards");
    }
    request.set_start_server_id(response.next_server_id());
  }
  return absl::ResourceExhaustedError(absl::StrCat("more than ", kAdminPagesMax, " pages"));
}

absl::StatusOr<proto::StatFsResponse> AdminClient::StatFs() {
  proto::StatFsResponse response;
  RETURN_IF_ERROR(clients_.Get(meta_address_)
                      ->Call(format::MessageType::kStatFs, proto::Empty(), &response, timeout_));
  return response;
}

absl::StatusOr<proto::Inode> AdminClient::RecoverLease(uint64_t ino) {
  proto::RecoverLeaseRequest request;
  request.set_ino(ino);
  proto::InodeResponse response;
  RETURN_IF_ERROR(clients_.Get(meta_address_)
                      ->Call(format::MessageType::kRecoverLease, request, &response, timeout_));
  return std::move(*response.mutable_inode());
}

absl::Status AdminClient::ForEachFile(const std::function<void(const proto::Inode&)>& fn) {
  uint64_t start_ino = 0;
  for (size_t page = 0; page < kAdminPagesMax; ++page) {
    proto::ListSegmentsRequest request;
    request.set_start_ino(start_ino);
    proto::ListSegmentsResponse response;
    RETURN_IF_ERROR(clients_.Get(meta_address_)
                        ->Call(format::MessageType::kListSegments, request, &response, timeout_));
    for (const auto& file : response.files()) fn(file);
    if (response.next_ino() == 0) return absl::OkStatus();
    if (response.next_ino() <= start_ino) return absl::InternalError("ListSegments went backwards");
    start_ino = response.next_ino();
  }
  return absl::ResourceExhaustedError(absl::StrCat("more than ", kAdminPagesMax, " pages"));
}

absl::StatusOr<proto::SegmentInfoResponse> AdminClient::SegmentInfo(const std::string& address,
                                                                    uint64_t segment_id) {
  proto::SegmentInfoRequest request;
  request.set_segment_id(segment_id);
  proto::SegmentInfoResponse response;
  RETURN_IF_ERROR(
      clients_.Get(address)->Call(format::MessageType::kSegmentInfo, request, &response, timeout_));
  return response;
}

absl::StatusOr<proto::ServerStatsResponse> AdminClient::ServerStats(const std::string& address) {
  proto::ServerStatsResponse response;
  RETURN_IF_ERROR(clients_.Get(address)->Call(format::MessageType::kServerStats, proto::Empty(),
                                              &response, timeout_));
  return response;
}

}  // namespace logfs::client
