#include "bench/bench_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "src/status/syscall_error.h"
#include "store/client/admin_client.h"

namespace logfs::bench {

std::map<int, double> LogfsCpuSeconds(bool include_self) {
  const long ticks = sysconf(_SC_CLK_TCK);
  const pid_t self = getpid();
  std::map<int, double> seconds;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return seconds;
  while (struct dirent* entry = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid)) continue;
    if (pid == self && !include_self) continue;
    std::ifstream in(std::string("/proc/") + entry->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;  // exited meanwhile
    // pid (comm) state ppid ... ; comm may hold spaces, so cut at the last ')'.
    size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) continue;
    // "logfs", or a copy of the binary under another name such as "logfs.new".
    if (!absl::StartsWith(line.substr(open + 1, close - open - 1), "logfs")) continue;
    std::vector<std::string> fields = absl::StrSplit(line.substr(close + 2), ' ');
    // After ") ": state is field 3 of stat(5), so utime (14) and stime (15)
    // are at indexes 11 and 12.
    uint64_t utime = 0, stime = 0;
    if (fields.size() > 12 && absl::SimpleAtoi(fields[11], &utime) &&
        absl::SimpleAtoi(fields[12], &stime)) {
      seconds[pid] = static_cast<double>(utime + stime) / ticks;
    }
  }
  closedir(proc);
  return seconds;
}

double CpuSecondsBetween(const std::map<int, double>& before, const std::map<int, double>& after) {
  double sum = 0;
  for (const auto& [pid, seconds] : after) {
    auto it = before.find(pid);
    double base = it == before.end() ? 0 : it->second;
    if (seconds > base) sum += seconds - base;
  }
  return sum;
}

std::map<std::string, uint64_t> ParseCounters(absl::string_view text) {
  std::map<std::string, uint64_t> out;
  for (absl::string_view token : absl::StrSplit(text, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(token, '=');
    uint64_t value = 0;
    if (!kv.second.empty() && absl::SimpleAtoi(kv.second, &value)) {
      out[std::string(kv.first)] = value;
    }
  }
  return out;
}

std::optional<std::string> GetXattr(const std::string& path, const std::string& name) {
  char buf[4096];
  ssize_t n = getxattr(path.c_str(), name.c_str(), buf, sizeof(buf));
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<size_t>(n));
}

absl::StatusOr<SegdSnapshot> SegdCounters(const std::string& meta_address) {
  client::AdminClient admin(meta_address, absl::Seconds(5));
  auto servers = admin.ListServers();
  if (!servers.ok()) return servers.status();
  SegdSnapshot snapshot;
  for (const auto& server : servers->servers()) {
    if (!server.live()) continue;
    auto stats = admin.ServerStats(server.address());
    if (!stats.ok()) {
      snapshot.unanswered.insert(server.server_id());
      continue;
    }
    std::map<std::string, uint64_t>& counters = snapshot.answered[server.server_id()];
    counters["appends"] = stats->appends();
    counters["fdatasyncs"] = stats->fdatasyncs();
    counters["sync_rounds"] = stats->sync_rounds();
    counters["journal_wraps"] = stats->journal_wraps();
  }
  return snapshot;
}

SegdDelta SegdCountersBetween(const SegdSnapshot& before, const SegdSnapshot& after) {
  SegdDelta delta;
  std::set<uint64_t> servers(before.unanswered.begin(), before.unanswered.end());
  servers.insert(after.unanswered.begin(), after.unanswered.end());
  for (const auto& [id, counters] : before.answered) servers.insert(id);
  for (const auto& [id, counters] : after.answered) {
    servers.insert(id);
    auto it = before.answered.find(id);
    if (it == before.answered.end()) continue;
    ++delta.answered;
    for (const auto& [key, value] : Delta(it->second, counters)) delta.sum[key] += value;
  }
  delta.servers = static_cast<int>(servers.size());
  return delta;
}

std::map<std::string, uint64_t> Delta(const std::map<std::string, uint64_t>& before,
                                      const std::map<std::string, uint64_t>& after) {
  std::map<std::string, uint64_t> out;
  for (const auto& [key, value] : after) {
    auto it = before.find(key);
    uint64_t base = it == before.end() ? 0 : it->second;
    out[key] = value >= base ? value - base : 0;
  }
  return out;
}

double Ratio(double a, double b) { return b == 0 ? 0 : a / b; }

absl::Status DropKernelCaches() {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return SyscallError(errno, "open /proc/sys/vm/drop_caches");
  ssize_t n = write(fd, "3\n", 2);
  int error = errno;
  close(fd);
  if (n != 2) return SyscallError(error, "write /proc/sys/vm/drop_caches");
  return absl::OkStatus();
}

}  // namespace logfs::bench
