// Test support: the segment servers' ServerStats (appends, fdatasyncs,
// connections by transport) of a MountedCluster, over TCP with the
// cluster's key if it has one, from the test's own RPC client. What a test
// reads to show that a change wrote nothing to the servers (a hard link,
// a checkpoint), or which transport carried the bytes.
// Not thread-safe; one per test.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "store/client/segd_client.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/io_threads.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {

class SegdStats {
 public:
  // `mc` must outlive this.
  explicit SegdStats(MountedCluster& mc);
  ~SegdStats();
  // Each server's stats, in server order (an empty message, and a test
  // failure, for one that does not answer within 10 s).
  std::vector<proto::ServerStatsResponse> All();
  // Appends the servers accepted, summed (every replica's counts).
  uint64_t TotalAppends();

 private:
  MountedCluster& mc_;
  rpc::IoThreads io_{1};
  std::unique_ptr<rpc::ClientPool> pool_;
  std::unique_ptr<client::SegdClient> segd_;
};

}  // namespace logfs::testing
