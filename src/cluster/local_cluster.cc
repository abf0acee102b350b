#include "src/cluster/local_cluster.h"

#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/cluster/process.h"
#include "src/env/posix_file.h"
#include "src/env/secret_file.h"
#include "src/status/macros.h"

namespace logfs::cluster {
namespace {

std::string AddressFile(const std::string& dir, const std::string& run_dir,
                        const std::string& name) {
  return run_dir.empty() ? dir + "/address" : absl::StrCat(run_dir, "/", name, ".address");
}

// The listen flags of a server on `host`; `port` 0 picks one.
std::vector<std::string> ListenFlags(const ServerHost& host, const std::string& port) {
  if (host.address.empty()) return {"--listen=127.0.0.1:" + port};
  return {"--listen=0.0.0.0:" + port, "--advertise=" + host.address};
}

std::string PortOf(const std::string& address) { return address.substr(address.rfind(':') + 1); }

// Starts one server process on `host` and waits until it has written its
// address.
absl::StatusOr<std::string> StartServer(std::vector<std::string> argv, const ServerHost& host,
                                        const std::string& dir, const std::string& run_dir,
                                        const std::string& name, absl::Duration timeout,
                                        pid_t* pid) {
  argv.insert(argv.end(), host.flags.begin(), host.flags.end());
  RETURN_IF_ERROR(env::MakeDirs(dir));
  std::string address_file = AddressFile(dir, run_dir, name);
  unlink(address_file.c_str());
  std::string log = (run_dir.empty() ? dir : run_dir) + "/" + name + ".log";
  ASSIGN_OR_RETURN(*pid, Spawn(argv, log, host.netns));
  auto address = WaitForFile(address_file, timeout, *pid);
  if (!address.ok()) {
    StopChild(*pid, SIGKILL, absl::Seconds(1));
    *pid = -1;
    return absl::FailedPreconditionError(absl::StrCat(name, " did not start: ", LastLine(log),
                                                      " (", address.status().message(), ")"));
  }
  return address;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(
    const LocalClusterOptions& options) {
  if (!options.segd_hosts.empty() &&
      static_cast<int>(options.segd_hosts.size()) != options.segment_servers) {
    return absl::InvalidArgumentError("segd_hosts needs one host per segment server");
  }
  std::unique_ptr<LocalCluster> cluster(new LocalCluster(options));
  cluster->options_.segd_hosts.resize(options.segment_servers);  // loopback by default
  RETURN_IF_ERROR(env::MakeDirs(options.data_dir));
  if (!options.run_dir.empty()) RETURN_IF_ERROR(env::MakeDirs(options.run_dir));
  if (options.authenticate) RETURN_IF_ERROR(cluster->MakeSecretFile());
  RETURN_IF_ERROR(cluster->StartMeta());
  cluster->segd_pids_.assign(options.segment_servers, -1);
  cluster->segd_addresses_.assign(options.segment_servers, "");
  for (int i = 0; i < options.segment_servers; ++i) {
    RETURN_IF_ERROR(cluster->StartSegd(i));
  }
  return cluster;
}

LocalCluster::~LocalCluster() { Stop(); }

absl::Status LocalCluster::MakeSecretFile() {
  if (!options_.cluster_secret_file.empty()) return absl::OkStatus();  // the caller's
  options_.cluster_secret_file = options_.data_dir + "/cluster.secret";
  struct stat st;
  if (::stat(options_.cluster_secret_file.c_str(), &st) == 0) return absl::OkStatus();
  unsigned char random[env::kSecretBytesMin];
  if (RAND_bytes(random, sizeof(random)) != 1) {
    return absl::InternalError("RAND_bytes failed: cannot make a cluster secret");
  }
  const std::string hex =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(random), sizeof(random)));
  return env::CreateSecretFile(options_.cluster_secret_file, hex + "\n");
}

std::vector<std::string> LocalCluster::CommonFlags() const {
  if (!options_.authenticate) return {};
  return {"--cluster_secret_file=" + options_.cluster_secret_file};
}

absl::Status LocalCluster::StartMeta() {
  std::string dir = options_.data_dir + "/meta";
  // A restarted meta comes back on the same port: segment servers keep
  // the old meta address.
  std::vector<std::string> argv = {options_.binary, "meta", "--data_dir=" + dir,
                                   "--address_file=" + AddressFile(dir, options_.run_dir, "meta")};
  for (auto& flag :
       ListenFlags(options_.meta_host, meta_address_.empty() ? "0" : PortOf(meta_address_))) {
    argv.push_back(flag);
  }
  for (auto& flag : CommonFlags()) argv.push_back(std::move(flag));
  argv.insert(argv.end(), options_.meta_flags.begin(), options_.meta_flags.end());
  ASSIGN_OR_RETURN(meta_address_, StartServer(argv, options_.meta_host, dir, options_.run_dir,
                                              "meta", options_.start_timeout, &meta_pid_));
  return absl::OkStatus();
}

absl::Status LocalCluster::StartSegd(int i, const std::vector<std::string>& extra_flags) {
  std::string dir = absl::StrCat(options_.data_dir, "/segd", i);
  std::vector<std::string> argv = {
      options_.binary, "segd", "--data_dir=" + dir, "--meta=" + meta_address_,
      "--address_file=" + AddressFile(dir, options_.run_dir, absl::StrCat("segd", i))};
  for (auto& flag : ListenFlags(options_.segd_hosts[i], "0")) argv.push_back(flag);
  for (auto& flag : CommonFlags()) argv.push_back(std::move(flag));
  argv.insert(argv.end(), options_.segd_flags.begin(), options_.segd_flags.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  ASSIGN_OR_RETURN(segd_addresses_[i],
                   StartServer(argv, options_.segd_hosts[i], dir, options_.run_dir,
                               absl::StrCat("segd", i), options_.start_timeout, &segd_pids_[i]));
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartMeta() {
  StopChild(meta_pid_, SIGKILL, absl::Seconds(1));
  return StartMeta();
}

absl::Status LocalCluster::RestartMeta(const std::vector<std::string>& meta_flags) {
  options_.meta_flags = meta_flags;
  return RestartMeta();
}

absl::Status LocalCluster::RestartSegd(int i, const std::vector<std::string>& extra_flags) {
  StopChild(segd_pids_[i], SIGKILL, absl::Seconds(1));
  return StartSegd(i, extra_flags);
}

void LocalCluster::KillSegd(int i, int signal) {
  if (segd_pids_[i] <= 0) return;
  kill(segd_pids_[i], signal);
  if (signal == SIGKILL) {
    waitpid(segd_pids_[i], nullptr, 0);
    segd_pids_[i] = -1;
  }
}

void LocalCluster::KillMeta(int signal) {
  if (meta_pid_ <= 0) return;
  kill(meta_pid_, signal);
  if (signal == SIGKILL) {
    waitpid(meta_pid_, nullptr, 0);
    meta_pid_ = -1;
  }
}

void LocalCluster::Stop(absl::Duration grace) {
  // Segment servers first, so none re-registers with a dying meta.
  for (pid_t& pid : segd_pids_) {
    if (pid > 0) kill(pid, SIGTERM);
  }
  for (pid_t& pid : segd_pids_) {
    StopChild(pid, SIGTERM, grace);
    pid = -1;
  }
  StopChild(meta_pid_, SIGTERM, grace);
  meta_pid_ = -1;
}

}  // namespace logfs::cluster
