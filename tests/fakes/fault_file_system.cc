#include "tests/fakes/fault_file_system.h"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"

namespace logfs::testing {
namespace {

constexpr char kBackupPrefix[] = ".fault-fs-backup-";

}  // namespace

bool FaultFileSystem::Fault::Matches(const std::string& path) const {
  return on && absl::StrContains(path, path_part);
}

// A file of the fake: every call takes the file system's mutex, checks
// that no crash happened since the open, injects the armed faults and
// keeps the file's crash state up to date. `writable_` is null for a file
// opened read-only (and then `state_` is too).
class FaultFileSystem::File : public env::WritableFile {
 public:
  File(FaultFileSystem* fs, std::unique_ptr<env::RandomAccessFile> base,
       env::WritableFile* writable, std::shared_ptr<FileState> state, uint64_t generation)
      : fs_(fs),
        base_(std::move(base)),
        writable_(writable),
        state_(std::move(state)),
        generation_(generation) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* scratch) const override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckLocked());
    return base_->ReadAt(offset, n, scratch);
  }

  absl::StatusOr<uint64_t> Size() const override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckLocked());
    return base_->Size();
  }

  absl::StatusOr<util::UniqueFd> ReopenReadOnlyFd() const override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckLocked());
    return base_->ReopenReadOnlyFd();
  }

  absl::Status Close() override {
    absl::MutexLock lock(&fs_->mu_);
    if (closed_) return absl::OkStatus();
    closed_ = true;
    absl::Status closed = base_->Close();
    if (closed.ok() && fs_->close_fault_.Matches(path())) {
      return fs_->InjectedLocked(EIO, "close", path());
    }
    return closed;
  }

  const std::string& path() const override { return base_->path(); }

  absl::Status WriteAt(uint64_t offset, absl::string_view data) override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckWritableLocked());
    if (absl::Status faulted = WriteFaultLocked(offset, data); !faulted.ok()) return faulted;
    RETURN_IF_ERROR(fs_->SaveOldBytesLocked(*state_, *writable_, offset, data.size()));
    return writable_->WriteAt(offset, data);
  }

  absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckWritableLocked());
    if (absl::Status faulted = WriteFaultLocked(offset, data); !faulted.ok()) return faulted;
    RETURN_IF_ERROR(fs_->SaveOldBytesLocked(*state_, *writable_, offset, data.size()));
    if (fs_->sync_fault_.Matches(path())) {
      // The bytes reach the page cache; the flush is what fails.
      RETURN_IF_ERROR(writable_->WriteAt(offset, data));
      return fs_->InjectedLocked(EIO, "pwritev2 RWF_DSYNC", path());
    }
    RETURN_IF_ERROR(writable_->WriteAtDurably(offset, data));
    MarkDurable(*state_, offset, data.size());
    ++fs_->syncs_[state_->path];
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckWritableLocked());
    if (fs_->sync_fault_.Matches(path())) return fs_->InjectedLocked(EIO, "fdatasync", path());
    RETURN_IF_ERROR(writable_->Sync());
    ASSIGN_OR_RETURN(state_->synced_size, writable_->Size());
    state_->undo.clear();
    ++fs_->syncs_[state_->path];
    return absl::OkStatus();
  }

  absl::Status Truncate(uint64_t size) override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckWritableLocked());
    if (size < state_->synced_size) {
      RETURN_IF_ERROR(fs_->SaveOldBytesLocked(*state_, *writable_, size,
                                              static_cast<size_t>(state_->synced_size - size)));
    }
    return writable_->Truncate(size);
  }

  absl::Status Allocate(uint64_t offset, uint64_t length) override {
    absl::MutexLock lock(&fs_->mu_);
    RETURN_IF_ERROR(CheckWritableLocked());
    if (fs_->write_fault_.Matches(path())) {
      return fs_->InjectedLocked(fs_->write_errno_, "fallocate", path());
    }
    return writable_->Allocate(offset, length);
  }

  void DropCache() override {
    absl::MutexLock lock(&fs_->mu_);
    if (CheckWritableLocked().ok()) writable_->DropCache();
  }

 private:
  absl::Status CheckLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(fs_->mu_) {
    if (closed_) return absl::FailedPreconditionError(absl::StrCat(path(), " is closed"));
    if (generation_ != fs_->generation_) {
      return absl::FailedPreconditionError(
          absl::StrCat(path(), ": the file system crashed since it was opened"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckWritableLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(fs_->mu_) {
    RETURN_IF_ERROR(CheckLocked());
    if (writable_ == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(path(), " is open read-only"));
    }
    return absl::OkStatus();
  }

  // An injected write error, or a torn write; OK if neither is armed for
  // this file.
  absl::Status WriteFaultLocked(uint64_t offset, absl::string_view data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(fs_->mu_) {
    if (fs_->write_fault_.Matches(path())) {
      return fs_->InjectedLocked(fs_->write_errno_, "pwrite", path());
    }
    if (!fs_->tear_fault_.Matches(path())) return absl::OkStatus();
    fs_->tear_fault_.on = false;  // once
    const size_t prefix = std::min(fs_->tear_prefix_bytes_, data.size());
    RETURN_IF_ERROR(fs_->SaveOldBytesLocked(*state_, *writable_, offset, prefix));
    RETURN_IF_ERROR(writable_->WriteAt(offset, data.substr(0, prefix)));
    // The power went out with these bytes on the platter.
    MarkDurable(*state_, offset, prefix);
    return fs_->InjectedLocked(EIO, absl::StrCat("pwrite torn after ", prefix, " bytes"), path());
  }

  FaultFileSystem* const fs_;
  const std::unique_ptr<env::RandomAccessFile> base_;
  env::WritableFile* const writable_;  // base_, or null if read-only
  const std::shared_ptr<FileState> state_;
  const uint64_t generation_;
  bool closed_ ABSL_GUARDED_BY(fs_->mu_) = false;
};

FaultFileSystem::FaultFileSystem(env::FileSystem* target) : env::FileSystemWrapper(target) {}

FaultFileSystem::~FaultFileSystem() = default;

void FaultFileSystem::FailSyncs(absl::string_view path_part) {
  absl::MutexLock lock(&mu_);
  sync_fault_ = Fault{true, std::string(path_part)};
}

void FaultFileSystem::FailWrites(int errno_value, absl::string_view path_part) {
  absl::MutexLock lock(&mu_);
  write_fault_ = Fault{true, std::string(path_part)};
  write_errno_ = errno_value;
}

void FaultFileSystem::FailCloses(absl::string_view path_part) {
  absl::MutexLock lock(&mu_);
  close_fault_ = Fault{true, std::string(path_part)};
}

void FaultFileSystem::TearNextWrite(absl::string_view path_part, size_t prefix_bytes) {
  absl::MutexLock lock(&mu_);
  tear_fault_ = Fault{true, std::string(path_part)};
  tear_prefix_bytes_ = prefix_bytes;
}

void FaultFileSystem::ClearFaults() {
  absl::MutexLock lock(&mu_);
  sync_fault_ = write_fault_ = close_fault_ = tear_fault_ = Fault{};
}

uint64_t FaultFileSystem::file_syncs(absl::string_view path_part) const {
  absl::MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [path, syncs] : syncs_) n += absl::StrContains(path, path_part) ? syncs : 0;
  return n;
}

uint64_t FaultFileSystem::faults_injected() const {
  absl::MutexLock lock(&mu_);
  return faults_injected_;
}

absl::Status FaultFileSystem::InjectedLocked(int errno_value, absl::string_view call,
                                             const std::string& path) {
  ++faults_injected_;
  return SyscallError(errno_value, absl::StrCat(call, " ", path, " (injected)"));
}

std::shared_ptr<FaultFileSystem::FileState> FaultFileSystem::StateLocked(const std::string& path,
                                                                         uint64_t size) {
  std::shared_ptr<FileState>& state = files_[path];
  if (state == nullptr) {
    state = std::make_shared<FileState>();
    state->path = path;
    state->synced_size = size;
  }
  return state;
}

absl::Status FaultFileSystem::SaveOldBytesLocked(FileState& state, env::WritableFile& file,
                                                 uint64_t offset, size_t n) {
  if (n == 0 || offset >= state.synced_size) return absl::OkStatus();
  // Bytes missing now (an unsynced truncate cut them) read as zeros; that
  // truncate saved their old value already, and is undone after this.
  std::string old(static_cast<size_t>(std::min<uint64_t>(n, state.synced_size - offset)), '\0');
  RETURN_IF_ERROR(file.ReadAt(offset, old.size(), old.data()).status());
  state.undo.push_back(FileState::Undo{offset, std::move(old)});
  return absl::OkStatus();
}

void FaultFileSystem::MarkDurable(FileState& state, uint64_t offset, size_t n) {
  const uint64_t end = offset + n;
  std::vector<FileState::Undo> kept;
  for (FileState::Undo& undo : state.undo) {
    const uint64_t undo_end = undo.offset + undo.old_bytes.size();
    if (undo_end <= offset || undo.offset >= end) {
      kept.push_back(std::move(undo));
      continue;
    }
    // Cut [offset, end) out: those bytes are durable now, whatever was there.
    if (undo.offset < offset) {
      kept.push_back({undo.offset, undo.old_bytes.substr(0, offset - undo.offset)});
    }
    if (undo_end > end) kept.push_back({end, undo.old_bytes.substr(end - undo.offset)});
  }
  if (end > state.synced_size) {
    // The file now durably reaches `end`; unsynced bytes before `offset`
    // come back as zeros (a hole).
    if (offset > state.synced_size) {
      kept.push_back({state.synced_size, std::string(offset - state.synced_size, '\0')});
    }
    state.synced_size = end;
  }
  state.undo = std::move(kept);
}

void FaultFileSystem::MoveStateLocked(const std::string& from, const std::string& to) {
  auto it = files_.find(from);
  if (it == files_.end()) return;
  std::shared_ptr<FileState> state = std::move(it->second);
  files_.erase(it);
  state->path = to;
  files_[to] = std::move(state);
}

std::string FaultFileSystem::BackupNameLocked(const std::string& path) {
  return absl::StrCat(env::Dirname(path), "/", kBackupPrefix, next_backup_++);
}

absl::StatusOr<std::unique_ptr<env::WritableFile>> FaultFileSystem::NewWritableFile(
    const std::string& path, const env::WritableFileOptions& options) {
  if (options.direct_io) {
    return SyscallError(EINVAL, absl::StrCat("open O_DIRECT ", path, " (FaultFileSystem)"));
  }
  absl::MutexLock lock(&mu_);
  absl::StatusOr<env::FileAttributes> before = target()->Stat(path);
  env::WritableFileOptions untruncated = options;
  untruncated.truncate = false;  // done below, so that a crash can undo it
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> file,
                   target()->NewWritableFile(path, untruncated));
  if (!before.ok()) name_ops_.push_back(NameOp{NameOp::kCreated, env::Dirname(path), path, "", ""});
  std::shared_ptr<FileState> state = StateLocked(path, before.ok() ? before->size_bytes : 0);
  if (options.truncate && before.ok()) {
    RETURN_IF_ERROR(SaveOldBytesLocked(*state, *file, 0, static_cast<size_t>(state->synced_size)));
    RETURN_IF_ERROR(file->Truncate(0));
  }
  env::WritableFile* writable = file.get();
  return std::make_unique<File>(this, std::move(file), writable, std::move(state), generation_);
}

absl::StatusOr<std::unique_ptr<env::RandomAccessFile>> FaultFileSystem::NewRandomAccessFile(
    const std::string& path) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::unique_ptr<env::RandomAccessFile> file,
                   target()->NewRandomAccessFile(path));
  return std::make_unique<File>(this, std::move(file), nullptr, nullptr, generation_);
}

absl::Status FaultFileSystem::Rename(const std::string& from, const std::string& to) {
  if (env::Dirname(from) != env::Dirname(to)) {
    return absl::UnimplementedError("FaultFileSystem renames within one directory only");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(target()->Stat(from).status());
  std::string backup;
  if (target()->Stat(to).ok()) {
    // Kept, so that a crash before the directory's sync brings it back.
    backup = BackupNameLocked(to);
    RETURN_IF_ERROR(target()->Rename(to, backup));
    MoveStateLocked(to, backup);
  }
  if (absl::Status renamed = target()->Rename(from, to); !renamed.ok()) {
    if (!backup.empty() && target()->Rename(backup, to).ok()) MoveStateLocked(backup, to);
    return renamed;
  }
  MoveStateLocked(from, to);
  name_ops_.push_back(NameOp{NameOp::kRenamed, env::Dirname(to), to, from, backup});
  return absl::OkStatus();
}

absl::Status FaultFileSystem::Remove(const std::string& path) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(env::FileAttributes attributes, target()->Stat(path));
  if (attributes.is_directory) return target()->Remove(path);  // not undone by a crash
  const std::string backup = BackupNameLocked(path);
  RETURN_IF_ERROR(target()->Rename(path, backup));
  MoveStateLocked(path, backup);
  name_ops_.push_back(NameOp{NameOp::kRemoved, env::Dirname(path), path, "", backup});
  return absl::OkStatus();
}

absl::Status FaultFileSystem::CreateDir(const std::string& path) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(target()->CreateDir(path));
  name_ops_.push_back(NameOp{NameOp::kCreated, env::Dirname(path), path, "", ""});
  return absl::OkStatus();
}

absl::Status FaultFileSystem::SyncDir(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  if (sync_fault_.Matches(dir)) return InjectedLocked(EIO, "fsync dir", dir);
  RETURN_IF_ERROR(target()->SyncDir(dir));
  ++syncs_[dir];
  std::vector<NameOp> pending;
  for (NameOp& op : name_ops_) {
    if (op.dir != dir) {
      pending.push_back(std::move(op));
    } else if (!op.backup.empty()) {
      // The replaced or removed file is gone for good.
      absl::Status removed = target()->Remove(op.backup);
      if (!removed.ok() && !absl::IsNotFound(removed)) return removed;
      files_.erase(op.backup);
    }
  }
  name_ops_ = std::move(pending);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FaultFileSystem::ListDir(const std::string& dir) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(std::vector<std::string> names, target()->ListDir(dir));
  names.erase(
      std::remove_if(names.begin(), names.end(),
                     [](const std::string& name) { return absl::StartsWith(name, kBackupPrefix); }),
      names.end());
  return names;
}

absl::Status FaultFileSystem::SimulateCrash() {
  absl::MutexLock lock(&mu_);
  ++generation_;  // every file opened so far is dead
  absl::Status status = RollBackContentsLocked();
  if (status.ok()) status = RollBackNamesLocked();
  files_.clear();
  name_ops_.clear();
  tear_fault_ = Fault{};
  return status;
}

absl::Status FaultFileSystem::RollBackContentsLocked() {
  for (const auto& [path, state] : files_) {
    auto file = target()->NewWritableFile(path, env::WritableFileOptions{});
    if (absl::IsNotFound(file.status())) continue;
    if (!file.ok()) return file.status();
    for (auto undo = state->undo.rbegin(); undo != state->undo.rend(); ++undo) {
      RETURN_IF_ERROR((*file)->WriteAt(undo->offset, undo->old_bytes));
    }
    RETURN_IF_ERROR((*file)->Truncate(state->synced_size));
    RETURN_IF_ERROR((*file)->Sync());
    RETURN_IF_ERROR((*file)->Close());
  }
  return absl::OkStatus();
}

absl::Status FaultFileSystem::RollBackNamesLocked() {
  std::vector<std::string> dirs;
  for (auto op = name_ops_.rbegin(); op != name_ops_.rend(); ++op) {
    absl::Status undone;
    switch (op->kind) {
      case NameOp::kCreated:
        undone = RemoveTree(op->path);
        if (absl::IsNotFound(undone)) undone = absl::OkStatus();
        break;
      case NameOp::kRenamed:
        undone = target()->Rename(op->path, op->from);
        if (undone.ok() && !op->backup.empty()) undone = target()->Rename(op->backup, op->path);
        break;
      case NameOp::kRemoved:
        undone = target()->Rename(op->backup, op->path);
        break;
    }
    RETURN_IF_ERROR(undone);
    dirs.push_back(op->dir);
  }
  // The rolled-back names are what the disk holds now.
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::unique(dirs.begin(), dirs.end()), dirs.end());
  for (const std::string& dir : dirs) {
    absl::Status synced = target()->SyncDir(dir);
    if (!synced.ok() && !absl::IsNotFound(synced)) return synced;
  }
  return absl::OkStatus();
}

absl::Status FaultFileSystem::RemoveTree(const std::string& path) {
  ASSIGN_OR_RETURN(env::FileAttributes attributes, target()->Stat(path));
  if (attributes.is_directory) {
    ASSIGN_OR_RETURN(std::vector<std::string> names, target()->ListDir(path));
    for (const std::string& name : names) RETURN_IF_ERROR(RemoveTree(path + "/" + name));
  }
  return target()->Remove(path);
}

}  // namespace logfs::testing
