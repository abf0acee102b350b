#include "store/replica_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/status/macros.h"

namespace logfs::store {

std::string EncodeReplicaState(const ReplicaState& state) {
  return absl::StrCat("epoch=", state.epoch, "\nsealed=", state.sealed ? 1 : 0,
                      "\nsealed_length=", state.sealed_length, "\n");
}

absl::StatusOr<ReplicaState> DecodeReplicaState(absl::string_view text) {
  ReplicaState state;
  int fields = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '=');
    uint64_t value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) {
      return absl::DataLossError(absl::StrCat("bad state line '", line, "'"));
    }
    if (kv.first == "epoch") {
      state.epoch = value;
    } else if (kv.first == "sealed") {
      state.sealed = value != 0;
    } else if (kv.first == "sealed_length") {
      state.sealed_length = value;
    } else {
      return absl::DataLossError(absl::StrCat("unknown state field '", kv.first, "'"));
    }
    ++fields;
  }
  if (fields != 3) return absl::DataLossError("state file is missing fields");
  return state;
}

absl::Status SyscallError(int errno_value, absl::string_view what) {
  return absl::ErrnoToStatus(errno_value, what);
}

namespace {

absl::Status WriteAll(int fd, absl::string_view contents, const std::string& path) {
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, absl::StrCat("write ", path));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& dir, const std::string& name,
                                 absl::string_view contents) {
  const std::string path = absl::StrCat(dir, "/", name);
  const std::string tmp = absl::StrCat(path, ".tmp");
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", tmp));
  absl::Status status = WriteAll(fd, contents, tmp);
  if (status.ok() && ::fsync(fd) != 0) status = SyscallError(errno, absl::StrCat("fsync ", tmp));
  if (::close(fd) != 0 && status.ok()) status = SyscallError(errno, absl::StrCat("close ", tmp));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = SyscallError(errno, absl::StrCat("rename ", tmp));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());  // best effort; a stale .tmp is ignored on load
    return status;
  }
  return SyncDir(dir);
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
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
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

absl::Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open dir ", dir));
  absl::Status status;
  if (::fsync(fd) != 0) status = SyscallError(errno, absl::StrCat("fsync dir ", dir));
  ::close(fd);
  return status;
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
  if (errno != ENOENT) return SyscallError(errno, absl::StrCat("stat ", dir));
  auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) RETURN_IF_ERROR(MakeDirs(dir.substr(0, slash)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return SyscallError(errno, absl::StrCat("mkdir ", dir));
  }
  return absl::OkStatus();
}

}  // namespace logfs::store
