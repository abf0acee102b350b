#include "src/env/posix_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"

namespace logfs::env {
namespace {

absl::Status Error(int errno_value, absl::string_view call, const std::string& path) {
  return SyscallError(errno_value, absl::StrCat(call, " ", path));
}

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error(errno, "write", path);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string Dirname(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/" names a/b
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos) return ".";
  while (slash > 0 && path[slash - 1] == '/') --slash;
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error(errno, "open dir", dir);
  absl::Status status;
  if (::fsync(fd) != 0) status = Error(errno, "fsync dir", dir);
  ::close(fd);
  return status;
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error(errno, "open", tmp);
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = Error(errno, "fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = Error(errno, "close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = Error(errno, "rename", tmp);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // best effort; readers ignore a stale .tmp
    return status;
  }
  return SyncDir(Dirname(path));
}

absl::Status MakeDirs(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("empty directory path");
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
    }
    return absl::OkStatus();
  }
  if (errno != ENOENT) return Error(errno, "stat", dir);
  const std::string parent = Dirname(dir);
  if (parent != dir) RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno != EEXIST) return Error(errno, "mkdir", dir);
    // Created by someone else meanwhile: theirs to sync.
    if (::stat(dir.c_str(), &st) != 0) return Error(errno, "stat", dir);
    if (!S_ISDIR(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
    }
    return absl::OkStatus();
  }
  // The new entry lives in `parent`: durable once `parent` is synced.
  return SyncDir(parent);
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t bytes_max) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  std::string out;
  std::vector<char> buf(4096);
  absl::Status status;
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = SyscallError(errno, absl::StrCat("read ", path));
      break;
    }
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
    if (out.size() > bytes_max) {
      status = absl::DataLossError(absl::StrCat(path, " is larger than ", bytes_max, " bytes"));
      break;
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::Status PwriteAll(int fd, absl::string_view data, uint64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "pwrite");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return SyscallError(errno, "pread");
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  out.resize(done);
  return out;
}

}  // namespace logfs::env
