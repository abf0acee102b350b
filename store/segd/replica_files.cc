#include "store/segd/replica_files.h"

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

namespace logfs::segd {

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

}  // namespace logfs::segd
