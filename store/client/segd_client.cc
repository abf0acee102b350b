#include "store/client/segd_client.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/message_type.h"
#include "store/format/meta_fence_error.h"
#include "store/rpc/parallel_call.h"
#include "store/rpc/unix_socket.h"

namespace logfs::client {
namespace {

using format::MessageType;

absl::StatusOr<proto::SegmentInfoResponse> ParseInfo(absl::Status status,
                                                     const std::string& message) {
  if (!status.ok()) return status;
  proto::SegmentInfoResponse info;
  if (!info.ParseFromString(message)) return absl::InternalError("unparseable segment info");
  return info;
}

rpc::RpcClient::Callback InfoFromFrame(SegdClient::InfoCallback done) {
  return [done = std::move(done)](absl::Status status, format::Frame frame) {
    done(ParseInfo(std::move(status), frame.message));
  };
}

SegdClient::InfoResults InfoResultsOf(std::vector<rpc::CallResult> results) {
  SegdClient::InfoResults out;
  out.reserve(results.size());
  for (auto& r : results) out.push_back(ParseInfo(std::move(r.status), r.response.message));
  return out;
}

}  // namespace

void SegdClient::Route(const std::string& address, absl::Duration timeout) {
  if (routes_ != nullptr) routes_->Learn(address, timeout);
}

void SegdClient::Route(const std::vector<std::string>& addresses, absl::Duration timeout) {
  if (routes_ != nullptr) routes_->LearnEach(addresses, timeout);
}

// ------------------------------------------------------------- blocking

absl::StatusOr<proto::SegmentInfoResponse> SegdClient::CreateSegment(const std::string& address,
                                                                     uint64_t segment_id,
                                                                     uint64_t epoch,
                                                                     absl::Duration timeout,
                                                                     uint64_t meta_epoch) {
  proto::CreateSegmentRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  request.set_meta_epoch(meta_epoch);
  proto::SegmentInfoResponse response;
  Route(address, timeout);
  RETURN_IF_ERROR(
      pool_.Get(address)->Call(MessageType::kCreateSegment, request, &response, timeout));
  return response;
}

absl::StatusOr<proto::SegmentInfoResponse> SegdClient::Fence(const std::string& address,
                                                             uint64_t segment_id, uint64_t epoch,
                                                             absl::Duration timeout,
                                                             uint64_t meta_epoch) {
  auto fenced = CreateSegment(address, segment_id, epoch, timeout, meta_epoch);
  if (absl::IsFailedPrecondition(fenced.status()) && !format::IsMetaEpochFenced(fenced.status())) {
    return SegmentInfo(address, segment_id, timeout);  // sealed
  }
  return fenced;
}

absl::StatusOr<proto::SegmentInfoResponse> SegdClient::Append(const std::string& address,
                                                              const proto::AppendRequest& request,
                                                              std::string data,
                                                              absl::Duration timeout) {
  proto::SegmentInfoResponse response;
  Route(address, timeout);
  RETURN_IF_ERROR(
      pool_.Get(address)->Call(MessageType::kAppend, request, &response, timeout, std::move(data)));
  return response;
}

absl::StatusOr<proto::SegmentInfoResponse> SegdClient::Seal(const std::string& address,
                                                            const proto::SealRequest& request,
                                                            absl::Duration timeout) {
  proto::SegmentInfoResponse response;
  Route(address, timeout);
  RETURN_IF_ERROR(pool_.Get(address)->Call(MessageType::kSeal, request, &response, timeout));
  return response;
}

absl::StatusOr<proto::SegmentInfoResponse> SegdClient::SegmentInfo(const std::string& address,
                                                                   uint64_t segment_id,
                                                                   absl::Duration timeout) {
  proto::SegmentInfoRequest request;
  request.set_segment_id(segment_id);
  proto::SegmentInfoResponse response;
  Route(address, timeout);
  RETURN_IF_ERROR(pool_.Get(address)->Call(MessageType::kSegmentInfo, request, &response, timeout));
  return response;
}

absl::StatusOr<ReadReply> SegdClient::Read(const std::string& address,
                                           const proto::ReadRequest& request,
                                           absl::Duration timeout) {
  ReadReply reply;
  Route(address, timeout);
  RETURN_IF_ERROR(pool_.Get(address)->Call(MessageType::kRead, request, &reply.response, timeout,
                                           {}, &reply.data));
  return reply;
}

absl::StatusOr<proto::ServerStatsResponse> SegdClient::ServerStats(const std::string& address,
                                                                   absl::Duration timeout) {
  proto::ServerStatsResponse response;
  Route(address, timeout);
  RETURN_IF_ERROR(
      pool_.Get(address)->Call(MessageType::kServerStats, proto::Empty(), &response, timeout));
  return response;
}

absl::StatusOr<proto::ShortCircuitInfoResponse> SegdClient::ShortCircuitInfo(
    const std::string& address, absl::Duration timeout) {
  proto::ShortCircuitInfoResponse response;
  // A mount's first call to a server may be this one (a read before any
  // write): the pool's connection must be a Unix one from the start.
  Route(address, timeout);
  RETURN_IF_ERROR(
      pool_.Get(address)->Call(MessageType::kShortCircuitInfo, proto::Empty(), &response, timeout));
  return response;
}

// --------------------------------------------------------- asynchronous

void SegdClient::AsyncAppend(const std::string& address, const proto::AppendRequest& request,
                             std::shared_ptr<const std::string> data, absl::Duration timeout,
                             InfoCallback done, rpc::CallBatch* batch) {
  pool_.Get(address)->AsyncCallShared(MessageType::kAppend, request, std::move(data), timeout,
                                      InfoFromFrame(std::move(done)), batch);
}

void SegdClient::AsyncSync(const std::string& address, const proto::SyncRequest& request,
                           absl::Duration timeout, InfoCallback done, rpc::CallBatch* batch) {
  pool_.Get(address)->AsyncCall(MessageType::kSync, request, {}, timeout,
                                InfoFromFrame(std::move(done)), batch);
}

void SegdClient::AsyncSeal(const std::string& address, const proto::SealRequest& request,
                           absl::Duration timeout, InfoCallback done) {
  pool_.Get(address)->AsyncCall(MessageType::kSeal, request, {}, timeout,
                                InfoFromFrame(std::move(done)));
}

// -------------------------------------------------------------- fan-out

SegdClient::InfoResults SegdClient::CreateSegmentEach(const std::vector<std::string>& addresses,
                                                      uint64_t segment_id, uint64_t epoch,
                                                      absl::Duration timeout) {
  proto::CreateSegmentRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  Route(addresses, timeout);
  return InfoResultsOf(
      rpc::CallEach(pool_, addresses, MessageType::kCreateSegment, request, timeout));
}

SegdClient::InfoResults SegdClient::ReopenSegmentEach(const std::vector<std::string>& addresses,
                                                      uint64_t segment_id, uint64_t epoch,
                                                      uint64_t length, absl::Duration timeout) {
  proto::CreateSegmentRequest request;
  request.set_segment_id(segment_id);
  request.set_epoch(epoch);
  request.set_reopen_length(length);
  Route(addresses, timeout);
  InfoResults results =
      InfoResultsOf(rpc::CallEach(pool_, addresses, MessageType::kCreateSegment, request, timeout));
  for (auto& result : results) {
    // A server from before reopen_length only fenced the sealed replica.
    if (result.ok() && result->sealed()) {
      result = absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " stays sealed there (a server that cannot reopen)"));
    }
  }
  return results;
}

SegdClient::InfoResults SegdClient::SealEach(const std::vector<std::string>& addresses,
                                             const proto::SealRequest& request,
                                             absl::Duration timeout) {
  Route(addresses, timeout);
  return InfoResultsOf(rpc::CallEach(pool_, addresses, MessageType::kSeal, request, timeout));
}

SegdClient::InfoResults SegdClient::SegmentInfoEach(const std::vector<std::string>& addresses,
                                                    uint64_t segment_id, absl::Duration timeout) {
  proto::SegmentInfoRequest request;
  request.set_segment_id(segment_id);
  Route(addresses, timeout);
  return InfoResultsOf(
      rpc::CallEach(pool_, addresses, MessageType::kSegmentInfo, request, timeout));
}

std::vector<absl::Status> SegdClient::CopySegmentEach(const std::vector<CopyCall>& copies,
                                                      absl::Duration timeout) {
  std::vector<rpc::Call> calls;
  calls.reserve(copies.size());
  for (const CopyCall& copy : copies) {
    calls.push_back({copy.target_address, MessageType::kCopySegment, &copy.request});
  }
  std::vector<absl::Status> out;
  out.reserve(copies.size());
  for (auto& r : rpc::CallEach(pool_, calls, timeout)) out.push_back(std::move(r.status));
  return out;
}

// ------------------------------------------------------- short-circuit

absl::StatusOr<format::ReplicaFds> ShortCircuitOpen(const std::string& socket_path,
                                                    uint64_t segment_id, absl::Duration timeout) {
  ASSIGN_OR_RETURN(util::UniqueFd socket, rpc::ConnectUnix(socket_path, timeout));
  proto::ShortCircuitOpenRequest request;
  request.set_segment_id(segment_id);
  RETURN_IF_ERROR(rpc::SendUnixFrame(socket.get(), 0, MessageType::kShortCircuitOpen, 1,
                                     request.SerializeAsString(), {}));
  ASSIGN_OR_RETURN(rpc::UnixFrame reply,
                   rpc::ReceiveUnixFrame(socket.get(), absl::Now() + timeout));
  if (reply.frame.flags & format::kFlagError) return rpc::StatusFromErrorFrame(reply.frame);
  proto::ShortCircuitOpenResponse response;
  if (!response.ParseFromString(reply.frame.message) || reply.fds.size() != 2) {
    return absl::InternalError(absl::StrCat("bad ShortCircuitOpen reply from ", socket_path));
  }
  format::ReplicaFds files;
  files.data = std::move(reply.fds[0]);
  files.crc = std::move(reply.fds[1]);
  files.length = response.length();
  return files;
}

}  // namespace logfs::client
