#include "fuse/process_state.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace logfs::fuse {
namespace {

constexpr uint64_t kPfExiting = 0x00000004;  // include/linux/sched.h
constexpr uint64_t kSigkillBit = uint64_t{1} << (SIGKILL - 1);
// /proc/TID/stat fields, counted from 1 as proc(5) does: state is 3,
// flags 9, exit_code 52. Those after the command (field 2, which may hold
// spaces and parentheses) are counted from its closing parenthesis.
constexpr int kFlagsField = 9;
constexpr int kExitCodeField = 52;

// The whole of a small /proc file; false if it cannot be read.
bool ReadProcFile(const std::string& path, std::string* out, bool* missing) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *missing = errno == ENOENT || errno == ESRCH;
    return false;
  }
  char buf[4096];
  out->clear();
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return true;
}

// The hex mask of status line `name` ("SigPnd:\t0000000000000100").
bool MaskOf(absl::string_view status, absl::string_view name, uint64_t* mask) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (line.substr(0, name.size()) != name) continue;
    line.remove_prefix(name.size());
    while (!line.empty() && (line.front() == ':' || line.front() == '\t' || line.front() == ' ')) {
      line.remove_prefix(1);
    }
    return absl::SimpleHexAtoi(line, mask);
  }
  return false;
}

}  // namespace

bool IsDying(absl::string_view stat, absl::string_view status) {
  uint64_t pending = 0, shared_pending = 0;
  if (MaskOf(status, "SigPnd", &pending) && (pending & kSigkillBit) != 0) return true;
  if (MaskOf(status, "ShdPnd", &shared_pending) && (shared_pending & kSigkillBit) != 0) {
    return true;
  }
  const size_t paren = stat.rfind(')');
  if (paren == absl::string_view::npos) return false;
  std::vector<absl::string_view> fields =
      absl::StrSplit(stat.substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state).
  if (fields.size() < static_cast<size_t>(kExitCodeField - 2)) return false;
  uint64_t flags = 0;
  int exit_code = 0;
  if (!absl::SimpleAtoi(fields[kFlagsField - 3], &flags) ||
      !absl::SimpleAtoi(fields[kExitCodeField - 3], &exit_code)) {
    return false;
  }
  // waitpid(2)'s form: the low 7 bits are the killing signal (0: exit()).
  return (flags & kPfExiting) != 0 && (exit_code & 0x7f) != 0;
}

bool CallerIsDying(pid_t tid) {
  if (tid <= 0) return false;
  const std::string dir = absl::StrCat("/proc/", tid);
  std::string stat, status;
  bool missing = false;
  if (!ReadProcFile(dir + "/stat", &stat, &missing)) return missing;
  if (!ReadProcFile(dir + "/status", &status, &missing)) return missing;
  return IsDying(stat, status);
}

}  // namespace logfs::fuse
