// The file-system seam (STYLE §5): the few file operations logfs's servers
// make, behind an interface, so that a test can hand a store a file system
// that fails a write, an fdatasync or a close, or forgets what was not
// synced (tests/fakes/fault_file_system.h). FileSystem::Default() is the
// POSIX one (src/env/posix_file_system.cc); the durable helpers built on
// top (WriteFileAtomically, MakeDirs, ...) are in src/env/posix_file.h.
//
// Errors: a failed syscall comes back as SyscallError(errno, "<call> <path>")
// (src/status/syscall_error.h), so the code follows absl::ErrnoToStatus
// (ENOENT -> kNotFound, ENOSPC -> kResourceExhausted, EIO -> kUnknown, ...)
// and AttachedErrno() gives the errno itself. No call retries a failed
// fsync or fdatasync (fsyncgate): after one fails, the file's dirty pages may
// be gone, and the caller must treat the file as lost.
//
// Thread-safety: a FileSystem may be used from any number of threads at
// once. A file object may be used from several threads at once as long as
// they do not race on Close() (ReadAt, WriteAt, Sync are positional and
// keep no cursor), as pread/pwrite on one descriptor allow.
//
// Ownership: New*File return an owned object; destroying it closes the file
// (dropping a close error: call Close() first to see it). Paths are not kept
// beyond the call except as a file's path() for messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/util/unique_fd.h"

namespace logfs::env {

// A file opened for reading at offsets.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;

  // Reads up to `n` bytes at `offset` into `scratch` (which holds at least
  // `n`), retrying short reads and EINTR. Returns the bytes read: fewer
  // than `n` only at the end of the file. Syscall errors.
  virtual absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* scratch) const = 0;

  // The file's current size in bytes (fstat). Syscall errors.
  virtual absl::StatusOr<uint64_t> Size() const = 0;

  // A new read-only descriptor of this very file (whatever its path is
  // now), owned by the caller, for handing to another process
  // (short-circuit reads pass descriptors over a Unix socket).
  // kUnimplemented where the file has no descriptor (an in-memory fake).
  virtual absl::StatusOr<util::UniqueFd> ReopenReadOnlyFd() const = 0;

  // Closes the file; every later call on it fails (kFailedPrecondition).
  // The close error, if any (on NFS and some fault cases a failed write
  // shows up only here). Calling it twice is OK (the second returns OK).
  virtual absl::Status Close() = 0;

  // The path it was opened with, for messages.
  virtual const std::string& path() const = 0;
};

// A file opened for reading and writing at offsets (pread/pwrite: no
// cursor, so "append" is a WriteAt at the caller's known end).
class WritableFile : public RandomAccessFile {
 public:
  // Writes all of `data` at `offset`, retrying short writes and EINTR.
  // On failure any prefix of `data` may have been written (the caller cuts
  // it off with Truncate if it must). kResourceExhausted for ENOSPC.
  virtual absl::Status WriteAt(uint64_t offset, absl::string_view data) = 0;

  // Writes `data` at `offset` and returns once those bytes are durable, as
  // WriteAt then Sync would for them, in one syscall (pwritev2 with
  // RWF_DSYNC; through an O_DIRECT file the block layer adds the cache
  // flush). A failure is a failed sync: never retried, the bytes may or
  // may not be on disk. Through a direct_io file, `data`, `offset` and the
  // buffer address must be multiples of kDirectIoAlignment; EINVAL or
  // EOPNOTSUPP (AttachedErrno) if the file system refuses the direct write
  // at write time.
  virtual absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) = 0;

  // fdatasync(2): every byte written so far, and the file's size, are
  // durable when it returns OK. The file's name is not: that takes a
  // SyncDir of its directory. On failure, never retry (see above).
  virtual absl::Status Sync() = 0;

  // ftruncate(2) to `size` bytes (shorter cuts, longer adds zeros). Not
  // durable until Sync.
  virtual absl::Status Truncate(uint64_t size) = 0;

  // fallocate(2) mode 0: reserves blocks for [offset, offset + length), so
  // that later writes there cannot fail for space. kResourceExhausted
  // (ENOSPC); errno EOPNOTSUPP or ENOSYS where the file system has no
  // fallocate (the caller writes zeros instead).
  virtual absl::Status Allocate(uint64_t offset, uint64_t length) = 0;

  // Hint: the file's cached pages will not be read again
  // (posix_fadvise DONTNEED). Never fails.
  virtual void DropCache() = 0;
};

// A WritableFile that forwards every call to the file it owns, for
// wrappers that change a few (a slow or gated disk in tests), as RocksDB's
// FSWritableFileWrapper. Thread-safety: that of the target.
class WritableFileWrapper : public WritableFile {
 public:
  explicit WritableFileWrapper(std::unique_ptr<WritableFile> target) : target_(std::move(target)) {}

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* scratch) const override {
    return target_->ReadAt(offset, n, scratch);
  }
  absl::StatusOr<uint64_t> Size() const override { return target_->Size(); }
  absl::StatusOr<util::UniqueFd> ReopenReadOnlyFd() const override {
    return target_->ReopenReadOnlyFd();
  }
  absl::Status Close() override { return target_->Close(); }
  const std::string& path() const override { return target_->path(); }
  absl::Status WriteAt(uint64_t offset, absl::string_view data) override {
    return target_->WriteAt(offset, data);
  }
  absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) override {
    return target_->WriteAtDurably(offset, data);
  }
  absl::Status Sync() override { return target_->Sync(); }
  absl::Status Truncate(uint64_t size) override { return target_->Truncate(size); }
  absl::Status Allocate(uint64_t offset, uint64_t length) override {
    return target_->Allocate(offset, length);
  }
  void DropCache() override { target_->DropCache(); }

  WritableFile* target() const { return target_.get(); }

 private:
  const std::unique_ptr<WritableFile> target_;
};

// O_DIRECT transfers: buffers, offsets and lengths are multiples of this.
inline constexpr size_t kDirectIoAlignment = 4096;

struct WritableFileOptions {
  bool create = false;    // create the file (mode 0644) if it is missing
  bool truncate = false;  // cut an existing file to 0 bytes
  // O_DIRECT: writes bypass the page cache (WritableFile::WriteAtDurably).
  // Opening fails with kInvalidArgument (errno EINVAL) where the file
  // system refuses it (tmpfs), and a caller falls back to the page cache.
  bool direct_io = false;
};

// What stat(2) tells about a path.
struct FileAttributes {
  uint64_t size_bytes = 0;
  absl::Time modified;  // mtime
  bool is_directory = false;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // The POSIX file system: never null, never destroyed, thread-safe.
  static FileSystem* Default();

  // Opens `path` for reading and writing. kNotFound if it is missing and
  // !options.create; kInvalidArgument if direct_io is refused; syscall
  // errors. A file it creates is durable only once its directory is
  // synced (SyncDir).
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& options) = 0;

  // Opens `path` for reading. kNotFound if missing; syscall errors.
  virtual absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) = 0;

  // rename(2): atomically replaces `to` (if any) with `from`. Durable once
  // the directory is synced. Both must be in one file system.
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;

  // Removes a file or an empty directory. kNotFound if it is missing.
  // Durable once its directory is synced.
  virtual absl::Status Remove(const std::string& path) = 0;

  // mkdir(2) with mode 0755 (parents must exist: see env::MakeDirs).
  // kAlreadyExists if `path` exists (as anything). Durable once its parent
  // is synced.
  virtual absl::Status CreateDir(const std::string& path) = 0;

  // fsyncs directory `dir`: every create, rename and remove in it before
  // the call is durable when it returns OK.
  virtual absl::Status SyncDir(const std::string& dir) = 0;

  // The names in `dir` (without "." and ".."), in no particular order.
  // kNotFound if it is missing.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) = 0;

  // stat(2) of `path` (following symlinks). kNotFound if it is missing.
  virtual absl::StatusOr<FileAttributes> Stat(const std::string& path) = 0;

  // The size of the file at `path`: Stat(path)->size_bytes.
  absl::StatusOr<uint64_t> FileSize(const std::string& path);
};

// Forwards every call to another file system (LevelDB's EnvWrapper), so a
// fake overrides only the calls it changes. Does not own `target`, which
// must outlive it. Thread-safe if `target` is.
class FileSystemWrapper : public FileSystem {
 public:
  explicit FileSystemWrapper(FileSystem* target) : target_(target) {}

  FileSystem* target() const { return target_; }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& options) override {
    return target_->NewWritableFile(path, options);
  }
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    return target_->NewRandomAccessFile(path);
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    return target_->Rename(from, to);
  }
  absl::Status Remove(const std::string& path) override { return target_->Remove(path); }
  absl::Status CreateDir(const std::string& path) override { return target_->CreateDir(path); }
  absl::Status SyncDir(const std::string& dir) override { return target_->SyncDir(dir); }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    return target_->ListDir(dir);
  }
  absl::StatusOr<FileAttributes> Stat(const std::string& path) override {
    return target_->Stat(path);
  }

 private:
  FileSystem* const target_;
};

// Reads up to `n` bytes at `offset` of `file` (fewer only at its end).
absl::StatusOr<std::string> ReadUpTo(const RandomAccessFile& file, uint64_t offset, size_t n);

}  // namespace logfs::env
