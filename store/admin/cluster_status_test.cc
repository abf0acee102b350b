#include "store/admin/cluster_status.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace logfs::admin {
namespace {

proto::ServerStatus* AddServer(ClusterStatus* status, uint64_t id, bool live) {
  proto::ServerStatus* server = status->servers.add_servers();
  server->set_server_id(id);
  server->set_address("127.0.0.1:" + std::to_string(7100 + id));
  server->set_live(live);
  server->set_heartbeat_age_ms(100);
  return server;
}

TEST(FormatClusterStatusTest, TheHeaderCountsUnreachableAndFailedLiveServers) {
  // Goal: a live server that meta cannot dial (or whose disk failed) is
  // named in the header, not only in its row.
  ClusterStatus status;
  AddServer(&status, 1, true);
  AddServer(&status, 2, true)->set_unreachable("meta cannot dial 127.0.0.1:7102");
  AddServer(&status, 3, true);
  AddServer(&status, 4, true);
  AddServer(&status, 5, true);
  std::string out = FormatClusterStatus(status);
  EXPECT_TRUE(absl::StartsWith(out, "servers: 5 (5 live (1 unreachable), 0 dead)\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, " unreachable ")) << out;
  AddServer(&status, 6, true)->set_disk_failure("journal: EIO");
  AddServer(&status, 7, false);
  out = FormatClusterStatus(status);
  EXPECT_TRUE(absl::StartsWith(out, "servers: 7 (6 live (1 failed, 1 unreachable), 1 dead)\n"))
      << out;
}

TEST(FormatClusterStatusTest, AHealthyClusterHasThePlainHeader) {
  ClusterStatus status;
  AddServer(&status, 1, true);
  AddServer(&status, 2, false);
  std::string out = FormatClusterStatus(status);
  EXPECT_TRUE(absl::StartsWith(out, "servers: 2 (1 live, 1 dead)\n")) << out;
}

TEST(FormatClusterStatusTest, ReReplicationLineHasLeftInFlightAndDone) {
  // Goal: the backlog counted from the listing and meta's in-flight and
  // done counts appear on one line, after the existing count line.
  ClusterStatus status;
  AddServer(&status, 1, true);
  status.segments = 4;
  status.under_replicated_segments = 2;
  status.missing_replicas = 3;
  status.missing_bytes = 12288;
  status.servers.set_rereplication_in_flight_segments(1);
  status.servers.set_rereplication_in_flight_bytes(4096);
  status.servers.set_rereplication_copied_segments(5);
  status.servers.set_rereplication_copied_bytes(20480);
  std::string out = FormatClusterStatus(status);
  EXPECT_TRUE(absl::StrContains(out,
                                "files: 0, segments: 4, open: 0, under-replicated: 2\n"
                                "re-replication: 2 segments left (3 copies, 12288 bytes), in "
                                "flight 1 copies (4096 bytes), done 5 copies (20480 bytes), 0 "
                                "failed, since meta became active\n"))
      << out;
}

}  // namespace
}  // namespace logfs::admin
