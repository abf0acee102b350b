// Helpers for tests of meta replicas (docs/meta_ha.md): ask each replica
// what it is (MetaState), wait for an active, and an etcd to elect them.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/cluster/etcd_cluster.h"
#include "src/cluster/local_cluster.h"
#include "store/format/logfs.pb.h"

namespace logfs::testing {

// MetaState of the meta at `address` (one call, 2 s deadline).
absl::StatusOr<proto::MetaStateResponse> MetaStateOf(const std::string& address);

// Polls every replica of `cluster` until one says it is active and
// returns its index; kDeadlineExceeded after `timeout`. A replica at
// `except` (-1: none) is not asked (a stopped one would hold each poll).
absl::StatusOr<int> WaitForActiveMeta(const cluster::LocalCluster& cluster, absl::Duration timeout,
                                      int except = -1);

// A three-member etcd (cluster::EtcdCluster) in a temp dir of its own
// under /tmp, for tests of meta replicas: `etcd->...` reaches the
// cluster. Stop (and the destructor) stops the members, then removes the
// dir. Not thread-safe.
class TempEtcd {
 public:
  TempEtcd() = default;
  ~TempEtcd() { Stop(); }
  TempEtcd(const TempEtcd&) = delete;
  TempEtcd& operator=(const TempEtcd&) = delete;

  // Starts the members in a new temp dir (dir()); with `tls`, over TLS
  // with client-certificate auth (EtcdClusterOptions::tls).
  absl::Status Start(const cluster::EtcdClusterOptions::Tls& tls = {});
  const std::string& dir() const { return dir_; }
  void Stop();
  cluster::EtcdCluster* operator->() { return etcd_.get(); }

 private:
  std::string dir_;
  std::unique_ptr<cluster::EtcdCluster> etcd_;
};

}  // namespace logfs::testing
