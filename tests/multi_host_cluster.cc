#include "tests/multi_host_cluster.h"

#include "absl/strings/str_cat.h"

namespace logfs::testing {

absl::StatusOr<std::unique_ptr<MultiHostCluster>> MultiHostCluster::Start(
    const MultiHostClusterOptions& options) {
  if (options.segment_servers < 1 || options.racks < 1 || options.mounts < 0) {
    return absl::InvalidArgumentError("multi-host cluster: bad sizes");
  }
  std::unique_ptr<MultiHostCluster> c(new MultiHostCluster(options));
  auto network = VirtualNetwork::Create(1 + options.segment_servers + options.mounts);
  if (!network.ok()) return network.status();
  c->network_ = std::move(*network);
  VirtualNetwork& net = *c->network_;
  MountedClusterOptions mopts;
  mopts.segment_servers = options.segment_servers;
  mopts.mounts = options.mounts;
  mopts.meta_flags = options.meta_flags;
  mopts.segd_flags = options.segd_flags;
  mopts.mount_flags = options.mount_flags;
  mopts.authenticate = options.authenticate;
  mopts.meta_host = {net.Netns(kMetaHost), net.Address(kMetaHost), {}};
  for (int i = 0; i < options.segment_servers; ++i) {
    const int host = c->SegdHost(i);
    mopts.segd_hosts.push_back(
        {net.Netns(host),
         net.Address(host),
         {"--failure_domain=" + c->FailureDomain(i), "--host_id=" + net.Name(host)}});
  }
  for (int j = 0; j < options.mounts; ++j) {
    const int host = c->MountHost(j);
    mopts.mount_hosts.push_back({net.Netns(host), "", {"--host_id=" + net.Name(host)}});
  }
  auto mounted = MountedCluster::Start(std::move(mopts));
  if (!mounted.ok()) return mounted.status();
  c->mounted_ = std::move(*mounted);
  return c;
}

MultiHostCluster::~MultiHostCluster() {
  // A cut-off mount or server would make its clean stop wait for timeouts.
  if (network_ != nullptr) network_->HealAll();
  mounted_.reset();
  network_.reset();
}

std::vector<int> MultiHostCluster::SegdHosts() const {
  std::vector<int> hosts;
  for (int i = 0; i < options_.segment_servers; ++i) hosts.push_back(SegdHost(i));
  return hosts;
}

std::string MultiHostCluster::Rack(int segd) const {
  return absl::StrCat("rack", segd % options_.racks + 1);
}

std::string MultiHostCluster::FailureDomain(int segd) const {
  return absl::StrCat(Rack(segd), "/host", SegdHost(segd));
}

int MultiHostCluster::SegdAt(const std::string& address) {
  for (int i = 0; i < cluster().segment_servers(); ++i) {
    if (cluster().segd_address(i) == address) return i;
  }
  return -1;
}

CommandResult MultiHostCluster::Logfs(int host, const std::string& subcommand,
                                      const std::string& args) const {
  return network_->Run(
      host, absl::StrCat(LogfsBinary(), " ", subcommand,
                         " --meta=", mounted_->cluster().meta_address(), SecretFlag(), " ", args));
}

std::string MultiHostCluster::SecretFlag() const {
  if (!options_.authenticate) return "";
  return " --cluster_secret_file=" + mounted_->cluster().cluster_secret_file();
}

}  // namespace logfs::testing
