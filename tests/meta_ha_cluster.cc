#include "tests/meta_ha_cluster.h"

#include <stdlib.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/format/message_type.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"

namespace logfs::testing {

absl::StatusOr<proto::MetaStateResponse> MetaStateOf(const std::string& address) {
  rpc::IoThreads io(1);
  auto client = rpc::RpcClient::Create(io.io(), address, nullptr);
  proto::MetaStateResponse state;
  absl::Status s =
      client->Call(format::MessageType::kMetaState, proto::Empty(), &state, absl::Seconds(2));
  client->Shutdown();
  io.Join();
  if (!s.ok()) return s;
  return state;
}

absl::StatusOr<int> WaitForActiveMeta(const cluster::LocalCluster& cluster, absl::Duration timeout,
                                      int except) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no replica answered";
  while (absl::Now() < deadline) {
    for (int i = 0; i < cluster.meta_replicas(); ++i) {
      if (i == except || cluster.meta_pid(i) <= 0) continue;
      auto state = MetaStateOf(cluster.meta_address(i));
      if (state.ok() && state->active()) return i;
      last = state.ok() ? absl::StrCat("replica ", i, " is a standby") : state.status().ToString();
    }
    absl::SleepFor(absl::Milliseconds(50));  // poll period
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no meta replica active after ", absl::FormatDuration(timeout), ": ", last));
}

absl::Status TempEtcd::Start(const cluster::EtcdClusterOptions::Tls& tls) {
  char tmpl[] = "/tmp/logfs-etcd-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp /tmp/logfs-etcd-XXXXXX failed");
  dir_ = tmpl;
  cluster::EtcdClusterOptions options;
  options.dir = dir_;
  options.tls = tls;
  auto etcd = cluster::EtcdCluster::Start(options);
  if (!etcd.ok()) return etcd.status();
  etcd_ = std::move(*etcd);
  return absl::OkStatus();
}

void TempEtcd::Stop() {
  etcd_.reset();
  if (dir_.empty()) return;
  std::error_code error;
  std::filesystem::remove_all(dir_, error);
  dir_.clear();
}

}  // namespace logfs::testing
