// A cluster spread over the hosts of a VirtualNetwork
// (tests/virtual_network.h): meta on host 1, segment server i on host
// 2 + i (listening on 0.0.0.0, advertising its host's address, failure
// domain rackR/host<host> with R = i % racks + 1, host id the namespace's
// name) and mount j on host 2 + segment_servers + j (a host id of its own,
// so no mount reads a replica short-circuit). The processes and mounts are
// MountedCluster's (tests/mounted_cluster.h), started through its
// per-host options. The destructor heals the network, then stops the
// mounts and processes, then removes the network, however the test ended.
// Needs root. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/mounted_cluster.h"
#include "tests/virtual_network.h"

namespace logfs::testing {

struct MultiHostClusterOptions {
  int segment_servers = 5;  // one host each
  int racks = 3;
  int mounts = 2;  // one host each
  std::vector<std::string> meta_flags;
  std::vector<std::string> segd_flags;
  std::vector<std::string> mount_flags;
  // Authenticated connections, as a cluster on a shared network runs.
  bool authenticate = true;
};

class MultiHostCluster {
 public:
  static absl::StatusOr<std::unique_ptr<MultiHostCluster>> Start(
      const MultiHostClusterOptions& options);
  ~MultiHostCluster();

  VirtualNetwork& network() { return *network_; }
  MountedCluster& mounted() { return *mounted_; }
  cluster::LocalCluster& cluster() { return mounted_->cluster(); }

  static constexpr int kMetaHost = 1;
  int SegdHost(int segd) const { return 2 + segd; }
  int MountHost(int mount) const { return 2 + options_.segment_servers + mount; }
  std::vector<int> SegdHosts() const;
  // rack<R> and rack<R>/host<H> of segment server `segd`.
  std::string Rack(int segd) const;
  std::string FailureDomain(int segd) const;
  // The segment server advertising `address` (HOST:PORT), -1 if none.
  int SegdAt(const std::string& address);

  // Runs `logfs SUBCOMMAND --meta=<meta's address> ARGS` on `host`, with
  // the cluster's secret.
  CommandResult Logfs(int host, const std::string& subcommand, const std::string& args = "") const;
  // " --cluster_secret_file=PATH" when the cluster authenticates, else "":
  // for tool command lines built by hand.
  std::string SecretFlag() const;

 private:
  explicit MultiHostCluster(const MultiHostClusterOptions& options) : options_(options) {}

  MultiHostClusterOptions options_;
  // Declared first, removed last: the processes and mounts go before it.
  std::unique_ptr<VirtualNetwork> network_;
  std::unique_ptr<MountedCluster> mounted_;
};

}  // namespace logfs::testing
