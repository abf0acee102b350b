#include "store/meta/ha/checkpoint_service.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "store/format/limits.h"
#include "store/format/message_type.h"

namespace logfs::meta {
namespace {

using format::MessageType;

// Depth of directories RemoveTree descends (a checkpoint and RocksDB's
// <dir>.tmp are flat; one more level is slack).
constexpr int kRemoveDepthMax = 2;

template <typename Message>
CheckpointService::Answer AnswerWith(Message message, std::string data = {}) {
  return {std::make_unique<Message>(std::move(message)), std::move(data)};
}

}  // namespace

bool IsCheckpointFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of(std::string("/\0", 2)) == std::string::npos;
}

absl::StatusOr<std::unique_ptr<CheckpointService>> CheckpointService::Create(
    MetadataDb* db, const CheckpointServiceOptions& options) {
  CHECK(db != nullptr);
  CHECK_GT(options.checkpoints_max, 0);
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoints need a directory");
  env::FileSystem& fs = *options.file_system;
  RETURN_IF_ERROR(env::MakeDirs(fs, options.dir));
  ASSIGN_OR_RETURN(std::vector<std::string> leftovers, fs.ListDir(options.dir));
  for (const std::string& name : leftovers) {
    LOG(INFO) << "removing leftover checkpoint " << options.dir << "/" << name;
    RETURN_IF_ERROR(env::RemoveTree(fs, options.dir + "/" + name, kRemoveDepthMax));
  }
  const uint64_t first_id = std::max<int64_t>(1, absl::ToUnixMicros(options.now()));
  return std::unique_ptr<CheckpointService>(new CheckpointService(db, options, first_id));
}

CheckpointService::CheckpointService(MetadataDb* db, const CheckpointServiceOptions& options,
                                     uint64_t first_id)
    : db_(db), options_(options), next_id_(first_id) {}

bool CheckpointService::Serves(format::MessageType type) {
  return type == MessageType::kCheckpoint || type == MessageType::kReadCheckpoint;
}

CheckpointService::Reply CheckpointService::Handle(const format::Frame& request) {
  DropIdle();
  if (!Serves(request.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("message type ", static_cast<int>(request.type), " is not a checkpoint's"));
  }
  proto::CheckpointRequest parsed;
  if (!parsed.ParseFromString(request.message)) {
    return absl::InvalidArgumentError("unparseable checkpoint request");
  }
  if (request.type == MessageType::kReadCheckpoint) return Read(parsed);
  absl::StatusOr<proto::CheckpointResponse> response =
      parsed.checkpoint_id() == 0 ? Make() : Describe(parsed.checkpoint_id());
  if (!response.ok()) return response.status();
  return AnswerWith(std::move(*response));
}

void CheckpointService::Respond(const format::Frame& request, const rpc::Responder& responder) {
  Reply reply = Handle(request);
  if (!reply.ok()) return responder.ReplyError(reply.status());
  responder.Reply(*reply->message, std::move(reply->data));
}

absl::StatusOr<proto::CheckpointResponse> CheckpointService::Make() {
  std::vector<std::string> dropped;
  uint64_t id = 0;
  std::string dir;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<uint64_t> reserved = ReserveLocked(&dropped);
    if (reserved.ok()) {
      id = *reserved;
      dir = entries_[id].dir;
    }
  }
  RemoveDirs(dropped);
  if (id == 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat(options_.checkpoints_max, " checkpoints are being read; retry later"));
  }
  absl::StatusOr<MetadataDb::CheckpointInfo> info = db_->CreateCheckpoint(dir);
  if (!info.ok()) {
    {
      absl::MutexLock lock(&mu_);
      entries_.erase(id);
    }
    RemoveDirs({dir, dir + ".tmp"});  // what RocksDB may have left
    return info.status();
  }
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  CHECK(it != entries_.end()) << "checkpoint " << id << " dropped while being made";
  Entry& entry = it->second;
  entry.ready = true;
  entry.applied_seq = info->applied_seq;
  entry.last_read = options_.now();
  proto::CheckpointResponse response;
  response.set_checkpoint_id(id);
  response.set_applied_seq(info->applied_seq);
  for (const MetadataDb::CheckpointFile& file : info->files) {
    entry.file_bytes[file.name] = file.size_bytes;
    proto::CheckpointFile* listed = response.add_files();
    listed->set_name(file.name);
    listed->set_size(file.size_bytes);
  }
  LOG(INFO) << "made checkpoint " << id << " (" << info->files.size() << " files, applied seq "
            << info->applied_seq << ") in " << dir;
  return response;
}

absl::StatusOr<uint64_t> CheckpointService::ReserveLocked(std::vector<std::string>* dropped) {
  const absl::Time now = options_.now();
  TakeIdleLocked(now, dropped);
  if (entries_.size() >= static_cast<size_t>(options_.checkpoints_max)) {
    // The least recently read ready one, if it rests long enough.
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (!it->second.ready) continue;
      if (oldest == entries_.end() || it->second.last_read < oldest->second.last_read) oldest = it;
    }
    if (oldest == entries_.end() || now - oldest->second.last_read < options_.busy_grace) {
      return absl::ResourceExhaustedError("checkpoints busy");
    }
    LOG(INFO) << "dropping checkpoint " << oldest->first << " for a new one";
    dropped->push_back(oldest->second.dir);
    entries_.erase(oldest);
  }
  const uint64_t id = next_id_++;
  Entry& entry = entries_[id];
  entry.dir = absl::StrCat(options_.dir, "/", id);
  entry.last_read = now;
  return id;
}

void CheckpointService::TakeIdleLocked(absl::Time now, std::vector<std::string>* dropped) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.ready && now - it->second.last_read >= options_.idle_expiry) {
      LOG(INFO) << "dropping checkpoint " << it->first << ", unread for "
                << (now - it->second.last_read);
      dropped->push_back(it->second.dir);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

void CheckpointService::DropIdle() {
  std::vector<std::string> dropped;
  {
    absl::MutexLock lock(&mu_);
    TakeIdleLocked(options_.now(), &dropped);
  }
  RemoveDirs(dropped);
}

void CheckpointService::RemoveDirs(const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs) {
    absl::Status removed = env::RemoveTree(*options_.file_system, dir, kRemoveDepthMax);
    if (!removed.ok()) LOG(WARNING) << "cannot remove checkpoint " << dir << ": " << removed;
  }
}

absl::StatusOr<proto::CheckpointResponse> CheckpointService::Describe(uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(id);
  if (it == entries_.end() || !it->second.ready) {
    return absl::NotFoundError(absl::StrCat("no checkpoint ", id, " (dropped, or never made)"));
  }
  it->second.last_read = options_.now();
  proto::CheckpointResponse response;
  response.set_checkpoint_id(id);
  response.set_applied_seq(it->second.applied_seq);
  for (const auto& [name, bytes] : it->second.file_bytes) {
    proto::CheckpointFile* file = response.add_files();
    file->set_name(name);
    file->set_size(bytes);
  }
  return response;
}

CheckpointService::Reply CheckpointService::Read(const proto::CheckpointRequest& request) {
  if (!IsCheckpointFileName(request.file())) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad checkpoint file name '", request.file(), "'"));
  }
  std::string path;
  uint64_t file_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(request.checkpoint_id());
    if (it == entries_.end() || !it->second.ready) {
      return absl::NotFoundError(
          absl::StrCat("no checkpoint ", request.checkpoint_id(), " (dropped, or never made)"));
    }
    auto file = it->second.file_bytes.find(request.file());
    if (file == it->second.file_bytes.end()) {
      return absl::NotFoundError(absl::StrCat("checkpoint ", request.checkpoint_id(),
                                              " has no file '", request.file(), "'"));
    }
    it->second.last_read = options_.now();
    path = it->second.dir + "/" + request.file();
    file_bytes = file->second;
  }
  if (request.offset() > file_bytes) {
    return absl::OutOfRangeError(absl::StrCat("offset ", request.offset(), " is past the end of ",
                                              request.file(), " (", file_bytes, " bytes)"));
  }
  uint64_t length = request.length() == 0 ? format::kReadBytesMax : request.length();
  length = std::min<uint64_t>({length, format::kReadBytesMax, file_bytes - request.offset()});
  absl::StatusOr<std::unique_ptr<env::RandomAccessFile>> file =
      options_.file_system->NewRandomAccessFile(path);
  if (absl::IsNotFound(file.status())) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint ", request.checkpoint_id(), " was dropped"));
  }
  RETURN_IF_ERROR(file.status());
  ASSIGN_OR_RETURN(std::string data, env::ReadUpTo(**file, request.offset(), length));
  if (data.size() != length) {
    return absl::DataLossError(
        absl::StrCat(path, " is shorter than the ", file_bytes, " bytes the checkpoint listed"));
  }
  proto::ReadCheckpointResponse response;
  response.set_length(data.size());
  return AnswerWith(std::move(response), std::move(data));
}

std::vector<uint64_t> CheckpointService::TEST_Ids() {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  for (const auto& [id, entry] : entries_) ids.push_back(id);
  return ids;
}

}  // namespace logfs::meta
