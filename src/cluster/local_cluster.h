// A local logfs cluster: one `logfs meta` (or several replicas of an
// elected meta, docs/meta_ha.md) and N `logfs segd` processes on loopback,
// state under one directory. Used by the embedded default of
// `logfs mount` and by the integration tests (as LogDevice's
// IntegrationTestUtils Cluster). Stops its processes by PID on Stop() and
// on destruction. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace logfs::cluster {

// Where one server runs. The default is this process's network namespace
// on 127.0.0.1; multi-host tests put each server in a network namespace of
// its own that stands in for a host (tests/multi_host_cluster.h).
struct ServerHost {
  std::string netns;               // network namespace file the server joins, "" = ours
  std::string address;             // "" = listen on 127.0.0.1; else listen on 0.0.0.0
                                   // and advertise this host address (no port)
  std::vector<std::string> flags;  // extra flags for this server alone
};

struct LocalClusterOptions {
  std::string binary;    // path of the logfs binary
  // Servers close the descriptors they would inherit (Spawn's
  // close_inherited): for a test whose files on a mount must not outlive
  // it in a server; not with a lone meta (Spawn says why).
  bool close_inherited_fds = false;
  std::string data_dir;  // meta/ and segd<i>/ go below it
  // Logs and address files (<name>.log, <name>.address); "" = each in its
  // server's data dir (log <name>.log, address file "address").
  std::string run_dir;
  int segment_servers = 3;
  std::vector<std::string> meta_flags;  // extra flags, e.g. "--dead_server_ms=500"
  std::vector<std::string> segd_flags;
  ServerHost meta_host;
  std::vector<ServerHost> segd_hosts;  // empty, or one per segment server
  // Run every process with --cluster_secret_file (README "Authentication"):
  // `cluster_secret_file`, or "" for <data_dir>/cluster.secret, made with 32
  // random bytes (hex, mode 0600) on the first start.
  bool authenticate = false;
  std::string cluster_secret_file;
  absl::Duration start_timeout = absl::Seconds(20);
  // Nonempty: run `meta_replicas` meta replicas (data dirs meta0, meta1,
  // ...) elected through these etcd members ("host:port"), with
  // --cluster=`meta_cluster`; segment servers get the list of all of them.
  // Empty: one lone meta in meta/.
  std::vector<std::string> etcd_endpoints;
  int meta_replicas = 3;
  std::string meta_cluster = "test";
  // Extra flags of replica i alone (after meta_flags, so they win), e.g. a
  // --etcd naming one member only; empty, or one entry per replica.
  std::vector<std::vector<std::string>> meta_replica_flags;
};

class LocalCluster {
 public:
  // Makes the secret file if needed, then starts meta, then every segment
  // server, each once the previous one is listening. Errors: kFailedPrecondition with the failing
  // process's last log line, kDeadlineExceeded if one does not come up in time.
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const LocalClusterOptions& options);
  ~LocalCluster();

  // The lone meta's address, or every replica's, comma-separated (what
  // --meta takes).
  std::string meta_address() const;
  pid_t meta_pid() const { return meta_pids_[0]; }
  // Meta replicas (1 for a lone meta), each one's pid (-1 when stopped)
  // and address.
  int meta_replicas() const { return static_cast<int>(meta_pids_.size()); }
  pid_t meta_pid(int i) const { return meta_pids_[i]; }
  const std::string& meta_address(int i) const { return meta_addresses_[i]; }
  std::string meta_data_dir(int i) const;
  int segment_servers() const { return static_cast<int>(segd_pids_.size()); }
  pid_t segd_pid(int i) const { return segd_pids_[i]; }
  const std::string& segd_address(int i) const { return segd_addresses_[i]; }
  // The secret every process was given; "" unless `authenticate`.
  const std::string& cluster_secret_file() const { return options_.cluster_secret_file; }

  // Restarts meta or segment server `i` (after it was stopped or killed);
  // `extra_flags` are added to this start of the segment server only
  // (e.g. "--server_id=3" after its data dir was wiped).
  absl::Status RestartMeta();
  // The same with `meta_flags` in place of the extra meta flags, for this
  // and every later start of meta.
  absl::Status RestartMeta(const std::vector<std::string>& meta_flags);
  absl::Status RestartSegd(int i, const std::vector<std::string>& extra_flags = {});
  // Restarts meta replica `i` (after it was stopped or killed) on its port.
  absl::Status RestartMeta(int i);

  // The logfs binary of every later start and restart of meta and segment
  // servers (a rolling upgrade or downgrade, one process at a time).
  void set_binary(std::string binary) { options_.binary = std::move(binary); }
  const std::string& binary() const { return options_.binary; }

  // Stops every process: SIGTERM, then SIGKILL after `grace`.
  void Stop(absl::Duration grace = absl::Seconds(5));

  // Kills one process with `signal` (e.g. SIGKILL) and reaps it if it dies.
  void KillSegd(int i, int signal);
  void KillMeta(int signal) { KillMeta(0, signal); }
  void KillMeta(int i, int signal);

 private:
  explicit LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}
  absl::Status StartMeta(int i);
  absl::Status StartSegd(int i, const std::vector<std::string>& extra_flags = {});
  // Creates <data_dir>/cluster.secret if it is missing.
  absl::Status MakeSecretFile();
  // The flags every process gets (the secret file's).
  std::vector<std::string> CommonFlags() const;

  LocalClusterOptions options_;
  std::vector<std::string> meta_addresses_;
  std::vector<pid_t> meta_pids_;
  std::vector<pid_t> segd_pids_;
  std::vector<std::string> segd_addresses_;
};

}  // namespace logfs::cluster
