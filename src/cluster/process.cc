#include "src/cluster/process.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "src/status/syscall_error.h"

namespace logfs::cluster {

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                            const std::string& netns, bool close_inherited) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return SyscallError(errno, absl::StrCat("open ", log_path));
  }
  // Opened before fork: the child only calls async-signal-safe setns().
  int netns_fd = -1;
  if (!netns.empty()) {
    netns_fd = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (netns_fd < 0) {
      int err = errno;
      if (log_fd >= 0) close(log_fd);
      return SyscallError(err, absl::StrCat("open ", netns));
    }
  }
  // Read before fork: the child calls only async-signal-safe functions.
  const long open_max_found = sysconf(_SC_OPEN_MAX);
  const int open_max = open_max_found > 0 && open_max_found < (1 << 20)
                           ? static_cast<int>(open_max_found)
                           : 1024;
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    if (log_fd >= 0) close(log_fd);
    if (netns_fd >= 0) close(netns_fd);
    return SyscallError(err, "fork");
  }
  if (pid == 0) {
    if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) != 0) _exit(126);
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    if (close_inherited) {
      if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
        for (int fd = 3; fd < open_max; ++fd) close(fd);  // a kernel before 5.9
      }
    }
    // Children must not inherit a blocked signal mask from a sigwait()ing parent.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  if (log_fd >= 0) close(log_fd);
  if (netns_fd >= 0) close(netns_fd);
  return pid;
}

bool ChildRunning(pid_t pid, int* wait_status) {
  int status = 0;
  pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == 0) return true;
  if (r == pid && wait_status != nullptr) *wait_status = status;
  return false;
}

void StopChild(pid_t pid, int signal, absl::Duration timeout) {
  if (pid <= 0) return;
  if (!ChildRunning(pid)) return;
  kill(pid, signal);
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (!ChildRunning(pid)) return;
    absl::SleepFor(absl::Milliseconds(5));  // polling a child's exit
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout,
                                        pid_t pid) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      std::string s = ss.str();
      while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
      if (!s.empty()) return s;
    }
    int status = 0;
    if (pid > 0 && !ChildRunning(pid, &status)) {
      return absl::FailedPreconditionError(
          absl::StrCat("process ", pid, " exited (status ", WEXITSTATUS(status), ")"));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("timed out waiting for ", path));
    }
    absl::SleepFor(absl::Milliseconds(5));  // polling for another process's file
  }
}

std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace logfs::cluster
