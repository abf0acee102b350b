#include "tests/segd_stats.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "src/env/secret_file.h"
#include "store/rpc/frame_auth.h"

namespace logfs::testing {

SegdStats::SegdStats(MountedCluster& mc) : mc_(mc) {
  rpc::ClusterKeyPtr key;
  if (!mc.cluster().cluster_secret_file().empty()) {
    auto secret = env::ReadSecretFile(mc.cluster().cluster_secret_file());
    CHECK(secret.ok()) << secret.status();
    key = *rpc::ClusterKey::Create(*secret, "segd_stats");
  }
  pool_ = std::make_unique<rpc::ClientPool>(io_.io(), key);
  segd_ = std::make_unique<client::SegdClient>(*pool_);
}

SegdStats::~SegdStats() {
  pool_->ShutdownAll();
  io_.Join();
}

std::vector<proto::ServerStatsResponse> SegdStats::All() {
  std::vector<proto::ServerStatsResponse> out;
  for (int i = 0; i < mc_.cluster().segment_servers(); ++i) {
    auto stats = segd_->ServerStats(mc_.cluster().segd_address(i), absl::Seconds(10));
    EXPECT_TRUE(stats.ok()) << stats.status();
    out.push_back(stats.ok() ? *stats : proto::ServerStatsResponse());
  }
  return out;
}

uint64_t SegdStats::TotalAppends() {
  uint64_t total = 0;
  for (const proto::ServerStatsResponse& server : All()) total += server.appends();
  return total;
}

}  // namespace logfs::testing
