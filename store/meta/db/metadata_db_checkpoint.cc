// MetadataDb::CreateCheckpoint (store/meta/db/metadata_db.h): RocksDB's own
// checkpoint, then the checkpoint opened read-only to learn its applied
// seq and listed.
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/utilities/checkpoint.h>

#include <algorithm>
#include <cstdarg>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/env/file_system.h"
#include "src/status/macros.h"
#include "src/util/coding.h"
#include "store/meta/db/metadata_db.h"

namespace logfs::meta {
namespace {

// Files of a checkpoint listed at most (a RocksDB directory of a few
// hundred table files is large; this bounds a damaged one).
constexpr size_t kCheckpointFilesMax = 100000;

absl::Status CheckpointError(const rocksdb::Status& s, absl::string_view what) {
  std::string message = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  return absl::InternalError(message);
}

// Opening read-only must not add an info LOG file to the checkpoint.
class DiscardLogger : public rocksdb::Logger {
 public:
  using rocksdb::Logger::Logv;
  void Logv(const char* /*format*/, va_list /*ap*/) override {}
};

// The applied seq stored in the checkpoint at `dir`, opened read-only
// (which writes nothing there). kDataLoss if it does not open.
absl::StatusOr<uint64_t> ReadAppliedSeq(const std::string& dir, const std::string& key) {
  rocksdb::Options options;
  options.paranoid_checks = true;
  options.info_log = std::make_shared<DiscardLogger>();
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, dir, &raw);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint ", dir, " does not open: ", s.ToString()));
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  std::string value;
  s = db->Get(rocksdb::ReadOptions(), key, &value);
  uint64_t seq = 0;
  if (s.ok()) {
    if (value.size() != 8) return absl::DataLossError("bad applied seq in checkpoint");
    seq = util::DecodeBigEndian64(value.data());
  } else if (!s.IsNotFound()) {
    return CheckpointError(s, "read of the checkpoint's applied seq");
  }
  db->Close().PermitUncheckedError();  // read-only: nothing to lose
  return seq;
}

// The regular files in `dir`, by name. kInternal for a subdirectory (a
// RocksDB directory is flat).
absl::StatusOr<std::vector<MetadataDb::CheckpointFile>> ListCheckpoint(const std::string& dir) {
  env::FileSystem* fs = env::FileSystem::Default();
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDir(dir));
  if (names.size() > kCheckpointFilesMax) {
    return absl::InternalError(absl::StrCat("checkpoint ", dir, " has ", names.size(), " files"));
  }
  std::sort(names.begin(), names.end());
  std::vector<MetadataDb::CheckpointFile> files;
  for (std::string& name : names) {
    ASSIGN_OR_RETURN(env::FileAttributes attributes, fs->Stat(dir + "/" + name));
    if (attributes.is_directory) {
      return absl::InternalError(absl::StrCat("checkpoint ", dir, " holds a directory: ", name));
    }
    files.push_back({std::move(name), attributes.size_bytes});
  }
  return files;
}

}  // namespace

absl::StatusOr<MetadataDb::CheckpointInfo> MetadataDb::CreateCheckpoint(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("checkpoint needs a directory");
  if (env::FileSystem::Default()->Stat(dir).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("checkpoint directory ", dir, " exists"));
  }
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(rocks_db(), &raw);
  if (!s.ok()) return CheckpointError(s, "checkpoint");
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: always flush the memtable first, so that the
  // checkpoint's state is in its table files and its WAL holds little.
  s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) {
    if (env::FileSystem::Default()->Stat(dir).ok() && s.IsInvalidArgument()) {
      return absl::AlreadyExistsError(absl::StrCat("checkpoint directory ", dir, " exists"));
    }
    return CheckpointError(s, absl::StrCat("checkpoint to ", dir));
  }
  CheckpointInfo info;
  ASSIGN_OR_RETURN(info.applied_seq,
                   ReadAppliedSeq(dir, CounterKeyForCheckpoint(MetaCounter::kAppliedSeq)));
  ASSIGN_OR_RETURN(info.files, ListCheckpoint(dir));
  return info;
}

}  // namespace logfs::meta
