#include "src/cluster/local_cluster.h"

#include <openssl/rand.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
                                        bool close_inherited, pid_t* pid) {
  argv.insert(argv.end(), host.flags.begin(), host.flags.end());
  RETURN_IF_ERROR(env::MakeDirs(dir));
  std::string address_file = AddressFile(dir, run_dir, name);
  unlink(address_file.c_str());
  std::string log = (run_dir.empty() ? dir : run_dir) + "/" + name + ".log";
  ASSIGN_OR_RETURN(*pid, Spawn(argv, log, host.netns, close_inherited));
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
  const int metas = options.etcd_endpoints.empty() ? 1 : options.meta_replicas;
  if (metas < 1) return absl::InvalidArgumentError("meta_replicas must be at least 1");
  cluster->meta_pids_.assign(metas, -1);
  cluster->meta_addresses_.assign(metas, "");
  for (int i = 0; i < metas; ++i) RETURN_IF_ERROR(cluster->StartMeta(i));
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

std::string LocalCluster::meta_address() const { return absl::StrJoin(meta_addresses_, ","); }

std::string LocalCluster::meta_data_dir(int i) const {
  return options_.etcd_endpoints.empty() ? options_.data_dir + "/meta"
                                         : absl::StrCat(options_.data_dir, "/meta", i);
}

absl::Status LocalCluster::StartMeta(int i) {
  const std::string dir = meta_data_dir(i);
  const std::string name = options_.etcd_endpoints.empty() ? "meta" : absl::StrCat("meta", i);
  // A restarted meta comes back on the same port: segment servers keep
  // the old meta address.
  std::vector<std::string> argv = {options_.binary, "meta", "--data_dir=" + dir,
                                   "--address_file=" + AddressFile(dir, options_.run_dir, name)};
  const std::string& known = meta_addresses_[i];
  for (auto& flag : ListenFlags(options_.meta_host, known.empty() ? "0" : PortOf(known))) {
    argv.push_back(flag);
  }
  if (!options_.etcd_endpoints.empty()) {
    argv.push_back("--etcd=" + absl::StrJoin(options_.etcd_endpoints, ","));
    argv.push_back("--cluster=" + options_.meta_cluster);
  }
  for (auto& flag : CommonFlags()) argv.push_back(std::move(flag));
  argv.insert(argv.end(), options_.meta_flags.begin(), options_.meta_flags.end());
  if (static_cast<size_t>(i) < options_.meta_replica_flags.size()) {
    const auto& own = options_.meta_replica_flags[i];
    argv.insert(argv.end(), own.begin(), own.end());
  }
  ASSIGN_OR_RETURN(meta_addresses_[i], StartServer(argv, options_.meta_host, dir, options_.run_dir,
                                                   name, options_.start_timeout,
                                                   options_.close_inherited_fds, &meta_pids_[i]));
  return absl::OkStatus();
}

absl::Status LocalCluster::StartSegd(int i, const std::vector<std::string>& extra_flags) {
  std::string dir = absl::StrCat(options_.data_dir, "/segd", i);
  std::vector<std::string> argv = {
      options_.binary, "segd", "--data_dir=" + dir, "--meta=" + meta_address(),
      "--address_file=" + AddressFile(dir, options_.run_dir, absl::StrCat("segd", i))};
  for (auto& flag : ListenFlags(options_.segd_hosts[i], "0")) argv.push_back(flag);
  for (auto& flag : CommonFlags()) argv.push_back(std::move(flag));
  argv.insert(argv.end(), options_.segd_flags.begin(), options_.segd_flags.end());
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  ASSIGN_OR_RETURN(segd_addresses_[i],
                   StartServer(argv, options_.segd_hosts[i], dir, options_.run_dir,
                               absl::StrCat("segd", i), options_.start_timeout,
                               options_.close_inherited_fds, &segd_pids_[i]));
  return absl::OkStatus();
}

absl::Status LocalCluster::RestartMeta() { return RestartMeta(0); }

absl::Status LocalCluster::RestartMeta(int i) {
  StopChild(meta_pids_[i], SIGKILL, absl::Seconds(1));
  return StartMeta(i);
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

void LocalCluster::KillMeta(int i, int signal) {
  pid_t& pid = meta_pids_[i];
  if (pid <= 0) return;
  kill(pid, signal);
  if (signal == SIGKILL) {
    waitpid(pid, nullptr, 0);
    pid = -1;
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
  for (pid_t& pid : meta_pids_) {
    if (pid > 0) kill(pid, SIGCONT);  // a stopped one too
    StopChild(pid, SIGTERM, grace);
    pid = -1;
  }
}

}  // namespace logfs::cluster
