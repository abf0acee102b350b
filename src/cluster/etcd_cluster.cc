#include "src/cluster/etcd_cluster.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "src/status/syscall_error.h"
#include "src/util/unique_fd.h"

namespace logfs::cluster {
namespace {

constexpr int kStartAttempts = 3;
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);
constexpr absl::Duration kProbeTimeout = absl::Milliseconds(300);
constexpr absl::Duration kKillTimeout = absl::Seconds(5);
constexpr absl::Duration kStopTimeout = absl::Seconds(5);

absl::StatusOr<sockaddr_in> Address(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("etcd cluster: host '", host, "' is not IPv4"));
  }
  return addr;
}

// `count` distinct ports free on `host` now: each bound (port 0) until all
// are picked, so none repeats. Another process may take one before etcd
// binds it; Start() then retries.
absl::StatusOr<std::vector<int>> PickFreePorts(const std::string& host, int count) {
  auto addr = Address(host, 0);
  if (!addr.ok()) return addr.status();
  std::vector<util::UniqueFd> held;
  std::vector<int> ports;
  for (int i = 0; i < count; ++i) {
    util::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return SyscallError(errno, "socket");
    if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
      return SyscallError(errno, absl::StrCat("bind ", host, ":0"));
    }
    sockaddr_in bound{};
    socklen_t len = sizeof(bound);
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0) {
      return SyscallError(errno, "getsockname");
    }
    ports.push_back(ntohs(bound.sin_port));
    held.push_back(std::move(fd));
  }
  return ports;
}

// A TCP connection to host:port within `timeout`, or an invalid fd.
util::UniqueFd ConnectWithin(const std::string& host, int port, absl::Duration timeout) {
  auto addr = Address(host, port);
  if (!addr.ok()) return util::UniqueFd();
  util::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return fd;
  if (connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    if (errno != EINPROGRESS) return util::UniqueFd();
    pollfd p{fd.get(), POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) != 1) {
      return util::UniqueFd();
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      return util::UniqueFd();
    }
  }
  return fd;
}

// True once `answer` holds an HTTP head and as many body bytes as its
// Content-Length says (Go's server may keep a connection open a while after
// answering even when asked to close it).
bool AnswerComplete(const std::string& answer) {
  const size_t head_end = answer.find("\r\n\r\n");
  if (head_end == std::string::npos) return false;
  const std::string head = absl::AsciiStrToLower(answer.substr(0, head_end));
  const size_t at = head.find("\r\ncontent-length:");
  if (at == std::string::npos) return false;  // read to the end of the stream
  const size_t length = std::strtoul(head.c_str() + at + 17, nullptr, 10);
  return answer.size() - (head_end + 4) >= length;
}

// The whole answer (head and body) to an HTTP `method` of `path` with
// `body` on host:port, "" on any failure or when it takes longer than
// `timeout`.
std::string HttpCall(const std::string& host, int port, const std::string& method,
                     const std::string& path, const std::string& body, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  util::UniqueFd fd = ConnectWithin(host, port, timeout);
  if (!fd.valid()) return "";
  const std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", host, ":", port,
                   "\r\nConnection: close\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return "";
  }
  std::string answer;
  char buf[4096];
  while (true) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return "";
    pollfd p{fd.get(), POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left_ms)) != 1) return "";
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n == 0) return answer;  // "Connection: close": the end of the answer
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return "";
    }
    answer.append(buf, static_cast<size_t>(n));
    if (AnswerComplete(answer)) return answer;
  }
}

// The string value of "`name`":"..." in a JSON text ("" if absent): enough
// for the flat answers of etcd's gateway, whose 64-bit numbers are strings.
std::string JsonString(absl::string_view json, absl::string_view name) {
  const std::string needle = absl::StrCat("\"", name, "\":\"");
  const size_t at = json.find(needle);
  if (at == absl::string_view::npos) return "";
  const size_t begin = at + needle.size();
  const size_t end = json.find('"', begin);
  if (end == absl::string_view::npos) return "";
  return std::string(json.substr(begin, end - begin));
}

// The state letter of /proc/<pid>/stat ('T' = stopped), or 0.
char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string stat = ss.str();
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos || paren + 2 >= stat.size()) return 0;
  return stat[paren + 2];
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdCluster>> EtcdCluster::Start(EtcdClusterOptions options) {
  if (options.members < 1 || options.dir.empty()) {
    return absl::InvalidArgumentError("etcd cluster: need members >= 1 and a dir");
  }
  std::unique_ptr<EtcdCluster> cluster(new EtcdCluster(std::move(options)));
  absl::Status status;
  for (int attempt = 1; attempt <= kStartAttempts; ++attempt) {
    status = cluster->StartOnce();
    if (status.ok()) return cluster;
    // A member that exited at start most likely lost a port to another
    // process: start from scratch on new ports. Anything else is final.
    if (status.code() != absl::StatusCode::kFailedPrecondition) break;
  }
  return status;
}

EtcdCluster::~EtcdCluster() { KillAll(); }

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (int i = 0; i < members(); ++i) out.push_back(endpoint(i));
  return out;
}

std::string EtcdCluster::endpoint(int i) const {
  return absl::StrCat(options_.host, ":", members_[i].client_port);
}

std::vector<std::string> EtcdCluster::Argv(int i) const {
  const Member& m = members_[i];
  const bool tls = !options_.tls.ca_file.empty();
  const char* scheme = tls ? "https://" : "http://";
  const std::string client_url = absl::StrCat(scheme, options_.host, ":", m.client_port);
  const std::string peer_url = absl::StrCat(scheme, options_.host, ":", m.peer_port);
  std::vector<std::string> initial;
  for (const Member& o : members_) {
    initial.push_back(absl::StrCat(o.name, "=", scheme, options_.host, ":", o.peer_port));
  }
  // On a restart etcd finds its data dir and ignores the --initial-* flags.
  std::vector<std::string> argv = {
      options_.binary,
      "--name=" + m.name,
      "--data-dir=" + m.data_dir,
      "--listen-client-urls=" + client_url,
      "--advertise-client-urls=" + client_url,
      "--listen-peer-urls=" + peer_url,
      "--initial-advertise-peer-urls=" + peer_url,
      "--initial-cluster=" + absl::StrJoin(initial, ","),
      "--initial-cluster-state=new",
      "--initial-cluster-token=" + token_,
      absl::StrCat("--heartbeat-interval=", options_.heartbeat_interval_ms),
      absl::StrCat("--election-timeout=", options_.election_timeout_ms),
      "--logger=zap",
      "--log-outputs=stderr",
  };
  if (tls) {
    const EtcdClusterOptions::Tls& t = options_.tls;
    argv.insert(argv.end(), {
        "--cert-file=" + t.cert_file, "--key-file=" + t.key_file,
        "--trusted-ca-file=" + t.ca_file, "--client-cert-auth",
        "--peer-cert-file=" + t.cert_file, "--peer-key-file=" + t.key_file,
        "--peer-trusted-ca-file=" + t.ca_file, "--peer-client-cert-auth",
        absl::StrCat("--listen-metrics-urls=http://", options_.host, ":", m.metrics_port)});
  }
  argv.insert(argv.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  return argv;
}

absl::Status EtcdCluster::Spawn(int i) {
  auto pid = cluster::Spawn(Argv(i), members_[i].log_path);
  if (!pid.ok()) return pid.status();
  members_[i].pid = *pid;
  return absl::OkStatus();
}

absl::Status EtcdCluster::StartOnce() {
  KillAll();
  auto ports = PickFreePorts(options_.host, 3 * options_.members);
  if (!ports.ok()) return ports.status();
  token_ = absl::StrCat("logfs-", getpid(), "-", absl::ToUnixNanos(absl::Now()));
  members_.assign(options_.members, Member());
  for (int i = 0; i < options_.members; ++i) {
    Member& m = members_[i];
    m.name = absl::StrCat("member", i);
    m.data_dir = absl::StrCat(options_.dir, "/", m.name);
    m.log_path = absl::StrCat(options_.dir, "/", m.name, ".log");
    m.client_port = (*ports)[3 * i];
    m.peer_port = (*ports)[3 * i + 1];
    m.metrics_port = (*ports)[3 * i + 2];
    std::error_code ignored;  // a dir left by an earlier attempt; absent is fine
    std::filesystem::remove_all(m.data_dir, ignored);
  }
  // One at a time, each once the previous one serves: a new member first
  // asks its peers whether it was bootstrapped already, and a peer that
  // listens but does not serve yet costs it a timeout (1 s at least;
  // etcdserver isMemberBootstrapped), while one that serves or refuses
  // answers at once.
  const absl::Time deadline = absl::Now() + options_.start_timeout;
  for (int i = 0; i < options_.members; ++i) {
    absl::Status s = Spawn(i);
    if (s.ok()) s = WaitServing(i, deadline);
    if (!s.ok()) {
      KillAll();
      return s;
    }
  }
  absl::Status s = WaitHealthy(deadline - absl::Now());
  if (!s.ok()) KillAll();
  return s;
}

bool EtcdCluster::Healthy(int i, absl::Duration timeout) const {
  const Member& m = members_[i];
  const int port = options_.tls.ca_file.empty() ? m.client_port : m.metrics_port;
  const std::string answer = HttpCall(options_.host, port, "GET", "/health", "", timeout);
  return absl::StartsWith(answer, "HTTP/1.1 200") &&
         absl::StrContains(answer, "\"health\":\"true\"");
}

absl::Status EtcdCluster::WaitHealthy(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<bool> healthy(members_.size(), false);
  while (true) {
    std::vector<std::string> waiting;
    for (int i = 0; i < members(); ++i) {
      Member& m = members_[i];
      if (m.pid < 0 || healthy[i]) continue;
      int wait_status = 0;
      if (!ChildRunning(m.pid, &wait_status)) {
        m.pid = -1;
        return absl::FailedPreconditionError(absl::StrCat(
            "etcd ", m.name, " exited (status ", wait_status, "): ", LastLine(m.log_path)));
      }
      healthy[i] = Healthy(i, kProbeTimeout);
      if (!healthy[i]) waiting.push_back(m.name);
    }
    if (waiting.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("etcd members not healthy after ",
                                                      absl::FormatDuration(timeout), ": ",
                                                      absl::StrJoin(waiting, ", ")));
    }
    absl::SleepFor(kPollInterval);  // polling another process's readiness
  }
}

absl::StatusOr<int> EtcdCluster::Leader() const {
  if (!options_.tls.ca_file.empty()) {
    return absl::UnimplementedError("etcd cluster: Leader() asks the plain JSON gateway");
  }
  for (int i = 0; i < members(); ++i) {
    if (members_[i].pid < 0) continue;
    // etcd's gateway to Maintenance.Status: the answering member's id in the
    // header and the leader's id.
    const std::string answer = HttpCall(options_.host, members_[i].client_port, "POST",
                                        "/v3/maintenance/status", "{}", kProbeTimeout);
    const std::string id = JsonString(answer, "member_id");
    if (!id.empty() && id == JsonString(answer, "leader")) return i;
  }
  return absl::UnavailableError("etcd cluster: no running member is the leader");
}

void EtcdCluster::Kill(int i) {
  Member& m = members_[i];
  if (m.pid < 0) return;
  StopChild(m.pid, SIGKILL, kKillTimeout);
  m.pid = -1;
}

void EtcdCluster::KillAll() {
  for (int i = 0; i < members(); ++i) Kill(i);
}

absl::Status EtcdCluster::Stop(int i) {
  const Member& m = members_[i];
  if (m.pid < 0)
    return absl::FailedPreconditionError(absl::StrCat("etcd ", m.name, " is not running"));
  if (kill(m.pid, SIGSTOP) != 0) return SyscallError(errno, absl::StrCat("SIGSTOP ", m.name));
  const absl::Time deadline = absl::Now() + kStopTimeout;
  while (ProcessState(m.pid) != 'T') {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("etcd ", m.name, " did not stop"));
    }
    absl::SleepFor(absl::Milliseconds(1));  // polling the kernel's process state
  }
  return absl::OkStatus();
}

absl::Status EtcdCluster::Continue(int i) {
  const Member& m = members_[i];
  if (m.pid < 0)
    return absl::FailedPreconditionError(absl::StrCat("etcd ", m.name, " is not running"));
  if (kill(m.pid, SIGCONT) != 0) return SyscallError(errno, absl::StrCat("SIGCONT ", m.name));
  return absl::OkStatus();
}

absl::Status EtcdCluster::Restart(int i) {
  Kill(i);
  absl::Status s = Spawn(i);
  if (!s.ok()) return s;
  return WaitServing(i, absl::Now() + options_.start_timeout);
}

absl::Status EtcdCluster::WaitServing(int i, absl::Time deadline) {
  Member& m = members_[i];
  // The peer port's GET /version answers as soon as the member runs, quorum
  // or not; the client port answers only once the member is ready (has
  // published itself through Raft, embed/serve.go).
  // With TLS, the plain metrics URL, served right after the peer URLs.
  const bool tls = !options_.tls.ca_file.empty();
  while (!absl::StartsWith(HttpCall(options_.host, tls ? m.metrics_port : m.peer_port, "GET",
                                    tls ? "/metrics" : "/version", "", kProbeTimeout),
                           "HTTP/1.1 200")) {
    int wait_status = 0;
    if (!ChildRunning(m.pid, &wait_status)) {
      m.pid = -1;
      return absl::FailedPreconditionError(absl::StrCat("etcd ", m.name, " exited (status ",
                                                        wait_status, "): ", LastLine(m.log_path)));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("etcd ", m.name, " not serving on peer port ", m.peer_port, " in time"));
    }
    absl::SleepFor(kPollInterval);  // polling another process's readiness
  }
  return absl::OkStatus();
}

}  // namespace logfs::cluster
