#include "store/admin/meta_backup.h"

#include <fcntl.h>
#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"
#include "src/util/unique_fd.h"
#include "store/client/checkpoint_client.h"

namespace logfs::admin {
namespace {

// Depth RemoveTree descends: a database directory is flat.
constexpr int kRemoveDepthMax = 2;
// Names metadb.old-<time>[-N] tried at most.
constexpr int kAsideNamesMax = 100;

absl::Status RemoveContents(env::FileSystem& fs, const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(dir));
  for (const std::string& name : names) {
    RETURN_IF_ERROR(env::RemoveTree(fs, dir + "/" + name, kRemoveDepthMax));
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const MetaBackupOptions& options, const std::string& dir) {
  if (options.meta_addresses.empty()) {
    return absl::InvalidArgumentError("no meta address given");
  }
  if (dir.empty()) return absl::InvalidArgumentError("no directory given");
  return absl::OkStatus();
}

// A whole checkpoint from the first replica that serves one, into `dir`
// (existing, empty): the last error if none does.
absl::StatusOr<MetaBackupResult> FetchFromAny(const MetaBackupOptions& options,
                                              const std::string& dir) {
  env::FileSystem& fs = *options.file_system;
  client::CheckpointClient client(absl::Milliseconds(options.rpc_timeout_ms), &fs);
  absl::Status last;
  for (const std::string& address : options.meta_addresses) {
    absl::StatusOr<proto::CheckpointResponse> listing = client.Fetch(address, dir);
    if (listing.ok()) {
      MetaBackupResult result;
      result.meta_address = address;
      result.checkpoint_id = listing->checkpoint_id();
      result.applied_seq = listing->applied_seq();
      result.files = listing->files_size();
      for (const auto& file : listing->files()) result.bytes += file.size();
      return result;
    }
    last = absl::Status(listing.status().code(),
                        absl::StrCat("meta at ", address, ": ", listing.status().message()));
    RETURN_IF_ERROR(RemoveContents(fs, dir));
  }
  return last;
}

// kFailedPrecondition while another process holds the RocksDB lock of the
// database at `db_dir` (fcntl F_GETLK on its LOCK file, the lock RocksDB's
// PosixFileSystem::LockFile takes).
absl::Status CheckNotLocked(const std::string& db_dir) {
  const std::string lock_path = db_dir + "/LOCK";
  util::UniqueFd fd(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return absl::OkStatus();
    return SyscallError(errno, absl::StrCat("open ", lock_path));
  }
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  if (::fcntl(fd.get(), F_GETLK, &lock) != 0) {
    return SyscallError(errno, absl::StrCat("fcntl F_GETLK ", lock_path));
  }
  if (lock.l_type == F_UNLCK) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(db_dir, " is in use by process ", lock.l_pid,
                                                    " (is logfs meta running on this data dir?)"));
}

// A free name <metadb>.old-<UTC time>[-N].
absl::StatusOr<std::string> AsideName(env::FileSystem& fs, const std::string& metadb) {
  const std::string base = absl::StrCat(
      metadb, ".old-", absl::FormatTime("%Y%m%dT%H%M%SZ", absl::Now(), absl::UTCTimeZone()));
  for (int i = 0; i < kAsideNamesMax; ++i) {
    std::string name = i == 0 ? base : absl::StrCat(base, "-", i);
    if (absl::IsNotFound(fs.Stat(name).status())) return name;
  }
  return absl::FailedPreconditionError(absl::StrCat("too many ", base, "* directories"));
}

}  // namespace

absl::StatusOr<MetaBackupResult> Backup(const MetaBackupOptions& options, const std::string& dir) {
  RETURN_IF_ERROR(CheckOptions(options, dir));
  env::FileSystem& fs = *options.file_system;
  absl::StatusOr<env::FileAttributes> attributes = fs.Stat(dir);
  if (attributes.ok()) {
    if (!attributes->is_directory) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
    }
    ASSIGN_OR_RETURN(std::vector<std::string> names, fs.ListDir(dir));
    if (!names.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is not empty (", names.size(), " entries); give a new or empty one"));
    }
  } else if (absl::IsNotFound(attributes.status())) {
    RETURN_IF_ERROR(env::MakeDirs(fs, dir));
  } else {
    return attributes.status();
  }
  return FetchFromAny(options, dir);
}

absl::StatusOr<MetaBackupResult> Bootstrap(const MetaBackupOptions& options,
                                           const std::string& data_dir, bool force) {
  RETURN_IF_ERROR(CheckOptions(options, data_dir));
  CHECK(options.open_applied_seq != nullptr) << "Bootstrap needs open_applied_seq";
  env::FileSystem& fs = *options.file_system;
  RETURN_IF_ERROR(env::MakeDirs(fs, data_dir));
  const std::string metadb = absl::StrCat(data_dir, "/", kMetadataDbDirName);
  absl::StatusOr<env::FileAttributes> existing = fs.Stat(metadb);
  if (!existing.ok() && !absl::IsNotFound(existing.status())) return existing.status();
  if (existing.ok()) {
    if (!force) {
      return absl::FailedPreconditionError(absl::StrCat(
          metadb, " exists; --force moves it aside (to ", kMetadataDbDirName, ".old-<time>)"));
    }
    RETURN_IF_ERROR(CheckNotLocked(metadb));
  }
  const std::string staging = metadb + ".bootstrap";
  RETURN_IF_ERROR(env::RemoveTree(fs, staging, kRemoveDepthMax));
  RETURN_IF_ERROR(fs.CreateDir(staging));
  ASSIGN_OR_RETURN(MetaBackupResult result, FetchFromAny(options, staging));
  ASSIGN_OR_RETURN(uint64_t applied_seq, options.open_applied_seq(staging));
  if (applied_seq != result.applied_seq) {
    return absl::DataLossError(absl::StrCat("the downloaded database holds applied seq ",
                                            applied_seq, ", meta listed ", result.applied_seq));
  }
  if (existing.ok()) {
    RETURN_IF_ERROR(CheckNotLocked(metadb));  // again: a meta may have started meanwhile
    ASSIGN_OR_RETURN(result.moved_aside, AsideName(fs, metadb));
    RETURN_IF_ERROR(fs.Rename(metadb, result.moved_aside));
  }
  RETURN_IF_ERROR(fs.Rename(staging, metadb));
  RETURN_IF_ERROR(fs.SyncDir(data_dir));
  return result;
}

}  // namespace logfs::admin
