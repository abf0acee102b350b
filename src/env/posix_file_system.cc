// FileSystem::Default(): the seam of src/env/file_system.h over POSIX calls.
// One syscall per call (plus retries of EINTR and short transfers): the
// journal's sync path goes through here, so no copies or allocations.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/env/file_system.h"
#include "src/status/syscall_error.h"

namespace logfs::env {
namespace {

absl::Status Error(int errno_value, absl::string_view call, const std::string& path) {
  return SyscallError(errno_value, absl::StrCat(call, " ", path));
}

absl::Status Closed(const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(path, " is closed"));
}

class PosixFile : public WritableFile {
 public:
  PosixFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixFile() override { Close().IgnoreError(); }  // the caller chose not to see it

  absl::StatusOr<size_t> ReadAt(uint64_t offset, size_t n, char* scratch) const override {
    if (fd_ < 0) return Closed(path_);
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, scratch + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return Error(errno, "pread", path_);
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  absl::StatusOr<uint64_t> Size() const override {
    if (fd_ < 0) return Closed(path_);
    struct stat st;
    if (::fstat(fd_, &st) != 0) return Error(errno, "fstat", path_);
    return static_cast<uint64_t>(st.st_size);
  }

  absl::StatusOr<util::UniqueFd> ReopenReadOnlyFd() const override {
    if (fd_ < 0) return Closed(path_);
    // Through /proc, so the new descriptor is read-only and refers to the
    // very file this one has open, whatever its path is now.
    util::UniqueFd fd(::open(absl::StrCat("/proc/self/fd/", fd_).c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return Error(errno, "reopen read-only", path_);
    return fd;
  }

  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return Error(errno, "close", path_);
    return absl::OkStatus();
  }

  const std::string& path() const override { return path_; }

  absl::Status WriteAt(uint64_t offset, absl::string_view data) override {
    if (fd_ < 0) return Closed(path_);
    for (size_t done = 0; done < data.size();) {
      ssize_t n =
          ::pwrite(fd_, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error(errno, "pwrite", path_);
      if (n == 0) return Error(EIO, "pwrite (wrote nothing)", path_);
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) override {
    if (fd_ < 0) return Closed(path_);
    for (size_t done = 0; done < data.size();) {
      struct iovec iov = {const_cast<char*>(data.data() + done), data.size() - done};
      ssize_t n = ::pwritev2(fd_, &iov, 1, static_cast<off_t>(offset + done), RWF_DSYNC);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Error(errno, "pwritev2 RWF_DSYNC", path_);
      if (n == 0) return Error(EIO, "pwritev2 RWF_DSYNC (wrote nothing)", path_);
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status Sync() override {
    if (fd_ < 0) return Closed(path_);
    if (::fdatasync(fd_) != 0) return Error(errno, "fdatasync", path_);
    return absl::OkStatus();
  }

  absl::Status Truncate(uint64_t size) override {
    if (fd_ < 0) return Closed(path_);
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return Error(errno, "ftruncate", path_);
    return absl::OkStatus();
  }

  absl::Status Allocate(uint64_t offset, uint64_t length) override {
    if (fd_ < 0) return Closed(path_);
    if (::fallocate(fd_, 0, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
      return Error(errno, "fallocate", path_);
    }
    return absl::OkStatus();
  }

  void DropCache() override {
    if (fd_ >= 0) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  }

 private:
  const std::string path_;
  int fd_;  // -1 once closed
};

class PosixFileSystem : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& options) override {
    int flags = O_RDWR | O_CLOEXEC;
    if (options.create) flags |= O_CREAT;
    if (options.truncate) flags |= O_TRUNC;
    if (options.direct_io) flags |= O_DIRECT;
    int fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return Error(errno, options.create ? "create" : "open", path);
    return std::make_unique<PosixFile>(path, fd);
  }

  absl::StatusOr<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error(errno, "open", path);
    return std::make_unique<PosixFile>(path, fd);
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Error(errno, "rename", from);
    return absl::OkStatus();
  }

  absl::Status Remove(const std::string& path) override {
    if (::remove(path.c_str()) != 0) return Error(errno, "remove", path);
    return absl::OkStatus();
  }

  absl::Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) != 0) return Error(errno, "mkdir", path);
    return absl::OkStatus();
  }

  absl::Status SyncDir(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Error(errno, "open dir", dir);
    absl::Status status;
    if (::fsync(fd) != 0) status = Error(errno, "fsync dir", dir);
    ::close(fd);
    return status;
  }

  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return Error(errno, "opendir", dir);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* entry = ::readdir(d)) {
      absl::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int error = errno;
    ::closedir(d);
    if (error != 0) return Error(error, "readdir", dir);
    return names;
  }

  absl::StatusOr<FileAttributes> Stat(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return Error(errno, "stat", path);
    FileAttributes attributes;
    attributes.size_bytes = static_cast<uint64_t>(st.st_size);
    attributes.modified = absl::TimeFromTimespec(st.st_mtim);
    attributes.is_directory = S_ISDIR(st.st_mode);
    return attributes;
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* const posix = new PosixFileSystem();  // never destroyed
  return posix;
}

absl::StatusOr<uint64_t> FileSystem::FileSize(const std::string& path) {
  absl::StatusOr<FileAttributes> attributes = Stat(path);
  if (!attributes.ok()) return attributes.status();
  return attributes->size_bytes;
}

absl::StatusOr<std::string> ReadUpTo(const RandomAccessFile& file, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  absl::StatusOr<size_t> got = file.ReadAt(offset, n, out.data());
  if (!got.ok()) return got.status();
  out.resize(*got);
  return out;
}

}  // namespace logfs::env
