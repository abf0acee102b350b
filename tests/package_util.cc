#include "tests/package_util.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"

namespace logfs::testing {
namespace {

bool IsDir(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// systemd's unescaping of a unit name's instance (unit_name_unescape):
// "\xNN" is the byte NN, '-' is '/'.
std::string Unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '-') {
      out += '/';
    } else if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      out += static_cast<char>(std::stoi(s.substr(i + 2, 2), nullptr, 16));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string SourceDir() {
  if (const char* dir = getenv("LOGFS_SOURCE_DIR"); dir != nullptr && *dir != '\0') return dir;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) != nullptr && IsDir(std::string(cwd) + "/packaging/systemd")) {
    return cwd;
  }
  const char* bin = getenv("LOGFS_BIN");
  std::string path = bin != nullptr ? bin : "build/logfs";
  for (int up = 0; up < 2; ++up) {
    size_t slash = path.rfind('/');
    path = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  return path;
}

std::vector<std::string> UnitValues(const std::string& unit, const std::string& key) {
  std::vector<std::string> values;
  for (absl::string_view line : absl::StrSplit(unit, '\n')) {
    if (absl::ConsumePrefix(&line, key + "=")) values.emplace_back(line);
  }
  return values;
}

std::vector<std::string> ExpandCommand(const std::string& value, const std::string& instance) {
  std::vector<std::string> argv;
  for (absl::string_view word : absl::StrSplit(value, absl::ByAnyChar(" \t"), absl::SkipEmpty())) {
    std::string out;
    for (size_t i = 0; i < word.size(); ++i) {
      if (word[i] != '%' || i + 1 == word.size()) {
        out += word[i];
        continue;
      }
      switch (word[++i]) {
        case 'i':
          out += instance;
          break;
        case 'I':
          out += Unescape(instance);
          break;
        case 'f':
          out += "/" + Unescape(instance);
          break;
        case '%':
          out += '%';
          break;
        default:
          out += '%';
          out += word[i];
      }
    }
    argv.push_back(out);
  }
  if (!argv.empty() && absl::StartsWith(argv[0], "-")) argv[0] = argv[0].substr(1);
  return argv;
}

NotifySocket::NotifySocket() {
  char tmpl[] = "/tmp/logfs-notify-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return;
  dir_ = tmpl;
  // The logfs user of the install test sends to it too.
  chmod(dir_.c_str(), 0755);
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::string path = dir_ + "/notify";
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return;
  chmod(path.c_str(), 0666);
  path_ = path;
}

NotifySocket::~NotifySocket() {
  CloseStored();
  if (fd_ >= 0) close(fd_);
  if (!path_.empty()) unlink(path_.c_str());
  if (!dir_.empty()) rmdir(dir_.c_str());
}

bool NotifySocket::Wait(const std::string& line, absl::Duration timeout) {
  auto has_line = [&line](const std::string& message) {
    for (absl::string_view l : absl::StrSplit(message, '\n')) {
      if (l == line) return true;
    }
    return false;
  };
  for (const std::string& m : messages_) {
    if (has_line(m)) return true;
  }
  if (path_.empty()) return false;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    pollfd p = {fd_, POLLIN, 0};
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now())) + 1;
    if (poll(&p, 1, ms) <= 0) continue;
    char buf[4096];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
    iovec iov = {buf, sizeof(buf)};
    msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) continue;
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.push_back(fd);
      }
    }
    Received(std::string(buf, n), std::move(fds));
    if (has_line(messages_.back())) return true;
  }
  return false;
}

void NotifySocket::Received(std::string message, std::vector<int> fds) {
  std::string name;
  bool store = false;
  bool remove = false;
  for (absl::string_view l : absl::StrSplit(message, '\n')) {
    if (absl::ConsumePrefix(&l, "FDNAME=")) name = std::string(l);
    store = store || l == "FDSTORE=1";
    remove = remove || l == "FDSTOREREMOVE=1";
  }
  for (int fd : fds) {
    if (store) {
      stored_.push_back(fd);
      stored_names_.push_back(name);
    } else {
      close(fd);
    }
  }
  for (size_t i = 0; remove && i < stored_.size();) {
    if (stored_names_[i] != name) {
      ++i;
      continue;
    }
    close(stored_[i]);
    stored_.erase(stored_.begin() + static_cast<std::ptrdiff_t>(i));
    stored_names_.erase(stored_names_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  messages_.push_back(std::move(message));
}

void NotifySocket::CloseStored() {
  for (int fd : stored_) close(fd);
  stored_.clear();
  stored_names_.clear();
}

int WaitExitCode(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (cluster::ChildRunning(pid, &status)) {
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));  // polling a child's exit: no fd to wait on
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool WaitMounted(const std::string& path, bool mounted, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    bool found = false;
    std::ifstream in("/proc/self/mounts");
    std::string device, dir, rest;
    while (in >> device >> dir && std::getline(in, rest)) found = found || dir == path;
    if (found == mounted) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace logfs::testing
