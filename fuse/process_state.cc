#include "fuse/process_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_split.h"

namespace logfs::fuse {
namespace {

constexpr uint64_t kPfExiting = 0x00000004;  // include/linux/sched.h

constexpr uint64_t Bit(int signal) { return uint64_t{1} << (signal - 1); }
constexpr uint64_t kSigkillBit = Bit(SIGKILL);
// Signals whose default action is not to end the process (signal(7):
// "Ign", "Cont", "Stop"); every other one ends it (with a core dump or
// not), real-time signals included.
constexpr uint64_t kNotFatalByDefault = Bit(SIGCHLD) | Bit(SIGCONT) | Bit(SIGURG) |
                                        Bit(SIGWINCH) | Bit(SIGSTOP) | Bit(SIGTSTP) |
                                        Bit(SIGTTIN) | Bit(SIGTTOU);
// /proc/TID/stat fields, counted from 1 as proc(5) does: state is 3,
// flags 9, exit_code 52. Those after the command (field 2, which may hold
// spaces and parentheses) are counted from its closing parenthesis.
constexpr int kFlagsField = 9;
constexpr int kExitCodeField = 52;

// The whole of a small /proc file; false if it cannot be opened.
bool ReadProcFile(const std::string& path, std::string* out) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
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
  uint64_t pending = 0, shared_pending = 0, blocked = 0, ignored = 0, caught = 0;
  MaskOf(status, "SigPnd", &pending);
  MaskOf(status, "ShdPnd", &shared_pending);
  const uint64_t all_pending = pending | shared_pending;
  if ((all_pending & kSigkillBit) != 0) return true;
  // A pending signal that will end it: not blocked (it interrupted the
  // wait), not ignored, not caught, and fatal by default (SIGTERM, or a
  // core-dumping one: SIGQUIT, SIGABRT, SIGSEGV sent with kill).
  if (MaskOf(status, "SigBlk", &blocked) && MaskOf(status, "SigIgn", &ignored) &&
      MaskOf(status, "SigCgt", &caught) &&
      (all_pending & ~blocked & ~ignored & ~caught & ~kNotFatalByDefault) != 0) {
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
  // A task blocked in a FUSE request exists: one this process cannot see
  // (another pid namespace, /proc mounted hidepid) is taken to live on.
  if (!ReadProcFile(dir + "/stat", &stat)) return false;
  if (!ReadProcFile(dir + "/status", &status)) return false;
  return IsDying(stat, status);
}

bool StatusInGroup(absl::string_view status, gid_t gid) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "Groups:")) continue;
    for (absl::string_view field : absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
      gid_t listed = 0;
      if (absl::SimpleAtoi(field, &listed) && listed == gid) return true;
    }
    return false;
  }
  return false;
}

bool CallerInGroup(pid_t tid, gid_t gid) {
  if (tid <= 0) return false;
  std::string status;
  if (!ReadProcFile(absl::StrCat("/proc/", tid, "/status"), &status)) return false;
  return StatusInGroup(status, gid);
}

bool StatusHasCapability(absl::string_view status, int cap) {
  uint64_t effective = 0;
  if (cap < 0 || cap > 63 || !MaskOf(status, "CapEff", &effective)) return false;
  return (effective & (uint64_t{1} << cap)) != 0;
}

bool CallerHasCapability(pid_t tid, int cap) {
  if (tid <= 0) return false;
  // capable() asks for the capability in the initial user namespace: a
  // task in another one (root of a rootless container) shows a full
  // CapEff that counts for nothing here. The mount daemon's own namespace
  // stands for the initial one (/proc/1 may be unreadable, even to root,
  // in a sandbox).
  struct stat task_ns, own_ns;
  if (stat(absl::StrCat("/proc/", tid, "/ns/user").c_str(), &task_ns) != 0 ||
      stat("/proc/self/ns/user", &own_ns) != 0 || task_ns.st_ino != own_ns.st_ino ||
      task_ns.st_dev != own_ns.st_dev) {
    return false;
  }
  std::string status;
  if (!ReadProcFile(absl::StrCat("/proc/", tid, "/status"), &status)) return false;
  return StatusHasCapability(status, cap);
}

}  // namespace logfs::fuse
