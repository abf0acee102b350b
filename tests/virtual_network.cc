#include "tests/virtual_network.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"

namespace logfs::testing {
namespace {

constexpr char kPrefix[] = "lfsnet";  // lfsnet<pid>.<n>-{sw,h<k>}
constexpr char kBlackHole[] = "lladdr 00:00:00:00:00:00 nud permanent dev eth0";

std::string ShellQuote(const std::string& s) {
  return "'" + absl::StrReplaceAll(s, {{"'", "'\\''"}}) + "'";
}

std::vector<std::string> NamespaceNames() {
  std::vector<std::string> names;
  DIR* dir = opendir("/run/netns");
  if (dir == nullptr) return names;
  while (struct dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(dir);
  return names;
}

// The arguments of process `pid` ("" if it is gone).
std::vector<std::string> Cmdline(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"));
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return absl::StrSplit(all, '\0', absl::SkipEmpty());
}

std::vector<pid_t> PidsIn(const std::string& name) {
  std::vector<pid_t> pids;
  CommandResult r = RunCommand("ip netns pids " + name);
  for (absl::string_view line : absl::StrSplit(r.output, '\n', absl::SkipEmpty())) {
    pid_t pid = 0;
    if (absl::SimpleAtoi(line, &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

// Kills every process in namespace `name` (lazily unmounting the mount of
// a `logfs mount` daemon among them) and deletes the namespace.
void RemoveNamespace(const std::string& name) {
  for (int round = 0; round < 100; ++round) {
    std::vector<pid_t> pids = PidsIn(name);
    if (pids.empty()) break;
    for (pid_t pid : pids) {
      std::vector<std::string> args = Cmdline(pid);
      kill(pid, SIGKILL);
      if (args.size() > 2 && args[1] == "mount") RunCommand("fusermount3 -uz " + args.back());
    }
    absl::SleepFor(absl::Milliseconds(20));  // poll: killed processes leave the namespace
  }
  RunCommand("ip netns del " + name);
}

// Whether some namespace (ours or another test's) has an address or route
// in 10.A.B.0/24 (`subnet` = "10.A.B.").
bool SubnetInUse(const std::string& subnet) {
  std::string script = "ip -o -4 addr; ip -4 route";
  for (const auto& name : NamespaceNames())
    absl::StrAppend(&script, "; ip -n ", name, " -o -4 addr");
  CommandResult r = RunCommand(script);
  return absl::StrContains(r.output, " " + subnet);
}

// Runs `body` on a thread of its own inside the network namespace `netns`.
// False if the thread could not join it.
bool InNamespace(const std::string& netns, const std::function<void()>& body) {
  bool joined = false;
  std::thread t([&] {
    int fd = open(netns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    joined = setns(fd, CLONE_NEWNET) == 0;
    close(fd);
    if (joined) body();
  });
  t.join();
  return joined;
}

}  // namespace

CommandShell::~CommandShell() {
  if (in_ >= 0) close(in_);  // end of input: the shell exits
  if (out_ >= 0) close(out_);
  if (pid_ > 0) cluster::StopChild(pid_, SIGTERM, absl::Seconds(5));
}

bool CommandShell::Start() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return false;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return false;
  }
  pid_ = fork();
  if (pid_ == 0) {
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    execl("/bin/sh", "sh", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  in_ = in[1];
  out_ = out[0];
  return pid_ > 0;
}

CommandResult CommandShell::Run(const std::string& command, absl::Duration timeout) {
  CommandResult result;
  if (pid_ <= 0 || !cluster::ChildRunning(pid_)) return result;
  const std::string marker = absl::StrCat("\n__lfs_done_", ++commands_, " ");
  const std::string input = absl::StrCat("( ", command, "\n) </dev/null 2>&1; printf '\\n",
                                         marker.substr(1), "%d\\n' $?\n");
  if (write(in_, input.data(), input.size()) != static_cast<ssize_t>(input.size())) return result;
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const size_t at = out.find(marker);
    const size_t code = at == std::string::npos ? at : at + marker.size();
    const size_t end = code == std::string::npos ? code : out.find('\n', code);
    if (end != std::string::npos) {
      if (!absl::SimpleAtoi(out.substr(code, end - code), &result.exit_code)) {
        result.exit_code = -1;  // not the shell's status line
      }
      result.output = out.substr(0, at);
      return result;
    }
    pollfd p{out_, POLLIN, 0};
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    char buf[4096];
    ssize_t n = left_ms > 0 && poll(&p, 1, static_cast<int>(left_ms)) == 1
                    ? read(out_, buf, sizeof(buf))
                    : -1;
    if (n <= 0) break;
    out.append(buf, n);
  }
  // Timed out or the shell died: it is of no further use.
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  result.output = out + "\n(command shell: no answer in time)";
  return result;
}

absl::StatusOr<std::unique_ptr<VirtualNetwork>> VirtualNetwork::Create(int hosts) {
  if (hosts < 1 || hosts > 200) return absl::InvalidArgumentError("1..200 hosts");
  RemoveLeftovers();
  static std::atomic<int> networks{0};
  const int n = networks.fetch_add(1);
  std::unique_ptr<VirtualNetwork> net(new VirtualNetwork());
  net->prefix_ = absl::StrCat(kPrefix, getpid(), ".", n, "-");
  if (!net->shell_.Start()) return absl::InternalError("cannot start a shell");
  absl::Status built = net->Build(hosts);
  if (!built.ok()) return built;  // the destructor removes what was made
  return net;
}

absl::Status VirtualNetwork::Build(int hosts) {
  std::string subnet;
  const uint32_t base = static_cast<uint32_t>(getpid()) * 17;
  for (uint32_t attempt = 0; attempt < 64 && subnet.empty(); ++attempt) {
    const uint32_t v = (base + attempt * 257) & 0xffff;
    std::string candidate = absl::StrCat("10.", v >> 8, ".", v & 0xff, ".");
    if (!SubnetInUse(candidate)) subnet = candidate;
  }
  if (subnet.empty()) return absl::FailedPreconditionError("no unused 10.x.y.0/24");
  const std::string sw = SwitchName();
  std::string script =
      absl::StrCat("ip netns add ", sw, "; ip -n ", sw, " link set lo up; ip -n ", sw,
                   " link add br0 type bridge; ip -n ", sw, " link set br0 up");
  for (int k = 1; k <= hosts; ++k) {
    addresses_.push_back(absl::StrCat(subnet, k));
    const std::string h = Name(k);
    absl::StrAppend(&script, "; ip netns add ", h, "; ip -n ", h, " link set lo up",
                    "; ip link add eth0 netns ", h, " type veth peer name p", k, " netns ", sw,
                    "; ip -n ", sw, " link set p", k, " master br0 up", "; ip -n ", h, " addr add ",
                    addresses_.back(), "/24 dev eth0; ip -n ", h, " link set eth0 up");
  }
  partitions_.assign(hosts, {});
  disconnected_.assign(hosts, false);
  listener_fds_.assign(hosts, -1);
  listener_ports_.assign(hosts, 0);
  if (absl::Status s = Shell(script); !s.ok()) return s;
  // Bridge ports without STP forward at once once their carrier is up.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (true) {
    CommandResult r = Command("bridge -n " + sw + " link");
    int forwarding = 0;
    for (absl::string_view line : absl::StrSplit(r.output, '\n')) {
      forwarding += absl::StrContains(line, "state forwarding") ? 1 : 0;
    }
    if (forwarding == hosts) return absl::OkStatus();
    if (absl::Now() > deadline) return absl::DeadlineExceededError("bridge ports: " + r.output);
    absl::SleepFor(absl::Milliseconds(10));  // poll: links come up asynchronously
  }
}

VirtualNetwork::~VirtualNetwork() {
  for (int fd : listener_fds_) {
    if (fd >= 0) close(fd);
  }
  for (const auto& name : NamespaceNames()) {
    if (absl::StartsWith(name, prefix_)) RemoveNamespace(name);
  }
}

void VirtualNetwork::RemoveLeftovers() {
  for (const auto& name : NamespaceNames()) {
    if (!absl::StartsWith(name, kPrefix)) continue;
    std::vector<std::string> parts = absl::StrSplit(name.substr(sizeof(kPrefix) - 1), '.');
    pid_t pid = 0;
    if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &pid)) continue;
    if (pid == getpid() || kill(pid, 0) == 0 || errno == EPERM) continue;  // still running
    RemoveNamespace(name);
  }
}

std::string VirtualNetwork::Name(int host) const { return absl::StrCat(prefix_, "h", host); }

std::string VirtualNetwork::Ip(int host) const {
  return absl::StrCat("nsenter --net=", Netns(host), " ip");
}

CommandResult VirtualNetwork::Command(const std::string& command) const {
  return shell_.Run(command, absl::Seconds(60));
}

absl::Status VirtualNetwork::Shell(const std::string& script) const {
  CommandResult r = Command("set -e; " + script);
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat("network: ", r.output, " (", script, ")"));
  }
  return absl::OkStatus();
}

CommandResult VirtualNetwork::Run(int host, const std::string& command) const {
  return Command(absl::StrCat("nsenter --net=", Netns(host), " -- sh -c ", ShellQuote(command)));
}

absl::Status VirtualNetwork::Disconnect(int host) {
  disconnected_[host - 1] = true;
  return Shell(absl::StrCat("ip -n ", SwitchName(), " link set p", host, " down"));
}

absl::Status VirtualNetwork::Reconnect(int host) {
  if (absl::Status s = Shell(absl::StrCat("ip -n ", SwitchName(), " link set p", host, " up"));
      !s.ok()) {
    return s;
  }
  disconnected_[host - 1] = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (true) {
    CommandResult r = Command(absl::StrCat("bridge -n ", SwitchName(), " link show dev p", host));
    if (absl::StrContains(r.output, "state forwarding")) return absl::OkStatus();
    if (absl::Now() > deadline) return absl::DeadlineExceededError("bridge port: " + r.output);
    absl::SleepFor(absl::Milliseconds(10));  // poll: the port comes up asynchronously
  }
}

absl::Status VirtualNetwork::Partition(int host, const std::vector<int>& peers) {
  std::string script = "true";
  for (int p : peers) {
    absl::StrAppend(&script, "; ", Ip(host), " neigh replace ", Address(p), " ", kBlackHole, "; ",
                    Ip(p), " neigh replace ", Address(host), " ", kBlackHole);
    partitions_[host - 1].push_back(p);
  }
  return Shell(script);
}

absl::Status VirtualNetwork::Heal(int host, const std::vector<int>& peers) {
  std::string script = "true";
  auto& cut = partitions_[host - 1];
  for (int p : peers) {
    // Deleted, the entries are learnt again by ARP.
    absl::StrAppend(&script, "; ", Ip(host), " neigh del ", Address(p), " dev eth0; ", Ip(p),
                    " neigh del ", Address(host), " dev eth0");
    cut.erase(std::remove(cut.begin(), cut.end(), p), cut.end());
  }
  return Shell(script);
}

void VirtualNetwork::HealAll() {
  for (int host = 1; host <= hosts(); ++host) {
    if (disconnected_[host - 1]) Reconnect(host).IgnoreError();
    if (!partitions_[host - 1].empty()) Heal(host, partitions_[host - 1]).IgnoreError();
  }
}

bool VirtualNetwork::Reaches(int from, int to, absl::Duration timeout) {
  int& listener = listener_fds_[to - 1];
  if (listener < 0) {
    InNamespace(Netns(to), [&] {
      int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      socklen_t len = sizeof(addr);
      if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          listen(fd, 64) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
        listener = fd;
        listener_ports_[to - 1] = ntohs(addr.sin_port);
      } else if (fd >= 0) {
        close(fd);
      }
    });
    if (listener < 0) return false;
  }
  bool connected = false;
  InNamespace(Netns(from), [&] {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(listener_ports_[to - 1]));
    inet_pton(AF_INET, Address(to).c_str(), &addr.sin_addr);
    int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof(err);
      rc = poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 1 &&
                   getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0
               ? 0
               : -1;
    }
    connected = rc == 0;
    close(fd);
  });
  // Keep the listener's backlog empty for later probes.
  while (true) {
    int c = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) break;
    close(c);
  }
  return connected;
}

}  // namespace logfs::testing
