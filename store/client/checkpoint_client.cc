#include "store/client/checkpoint_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/limits.h"
#include "store/format/message_type.h"

namespace logfs::client {
namespace {

// A name meta may list: a plain file name, so the file lands in `dir`.
bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

}  // namespace

CheckpointClient::CheckpointClient(absl::Duration timeout, env::FileSystem* file_system)
    : timeout_(timeout),
      file_system_(file_system),
      work_(asio::make_work_guard(io_)),
      clients_(io_),
      io_thread_([this] { io_.run(); }) {}

CheckpointClient::~CheckpointClient() {
  clients_.ShutdownAll();
  work_.reset();
  io_.stop();
  io_thread_.join();
}

absl::StatusOr<proto::CheckpointResponse> CheckpointClient::Fetch(const std::string& address,
                                                                  const std::string& dir) {
  std::shared_ptr<rpc::RpcClient> meta = clients_.Get(address);
  proto::CheckpointRequest request;  // checkpoint_id 0: a new one
  proto::CheckpointResponse listing;
  RETURN_IF_ERROR(meta->Call(format::MessageType::kCheckpoint, request, &listing, timeout_));
  if (listing.checkpoint_id() == 0) return absl::DataLossError("meta's checkpoint has no id");
  for (const proto::CheckpointFile& file : listing.files()) {
    if (!IsPlainFileName(file.name())) {
      return absl::DataLossError(absl::StrCat("meta lists a bad file name '", file.name(), "'"));
    }
    RETURN_IF_ERROR(FetchFile(*meta, listing.checkpoint_id(), file, dir + "/" + file.name()));
  }
  RETURN_IF_ERROR(file_system_->SyncDir(dir));
  return listing;
}

absl::Status CheckpointClient::FetchFile(rpc::RpcClient& meta, uint64_t checkpoint_id,
                                         const proto::CheckpointFile& file,
                                         const std::string& path) {
  env::WritableFileOptions options;
  options.create = true;
  options.truncate = true;
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> out,
                   file_system_->NewWritableFile(path, options));
  uint64_t offset = 0;
  // Each round moves at least one byte or ends: bounded by the size.
  while (offset < file.size()) {
    proto::CheckpointRequest request;
    request.set_checkpoint_id(checkpoint_id);
    request.set_file(file.name());
    request.set_offset(offset);
    request.set_length(
        static_cast<uint32_t>(std::min<uint64_t>(format::kReadBytesMax, file.size() - offset)));
    proto::ReadCheckpointResponse response;
    std::string data;
    RETURN_IF_ERROR(
        meta.Call(format::MessageType::kReadCheckpoint, request, &response, timeout_, {}, &data));
    if (data.empty() || data.size() != response.length() || data.size() > request.length()) {
      return absl::DataLossError(absl::StrCat("meta answered ", data.size(), " bytes of ",
                                              file.name(), " at ", offset, " for ",
                                              request.length(), " asked"));
    }
    RETURN_IF_ERROR(out->WriteAt(offset, data));
    offset += data.size();
  }
  RETURN_IF_ERROR(out->Sync());
  ASSIGN_OR_RETURN(uint64_t written, out->Size());
  RETURN_IF_ERROR(out->Close());
  if (written != file.size()) {
    return absl::DataLossError(
        absl::StrCat(path, " holds ", written, " bytes, meta listed ", file.size()));
  }
  return absl::OkStatus();
}

}  // namespace logfs::client
