// Helpers for tests of meta replicas (docs/meta_ha.md): ask each replica
// what it is (MetaState) and wait for an active.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
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

}  // namespace logfs::testing
