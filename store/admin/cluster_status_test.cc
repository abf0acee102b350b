#include "store/admin/cluster_status.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"
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

TEST(FormatClusterStatusTest, SnapshotsAndSharedBytesHaveLinesOfTheirOwn) {
  // Goal: data counted once however many files share it, and each
  // snapshot with the bytes only it holds.
  ClusterStatus status;
  AddServer(&status, 1, true);
  status.data_bytes = 3ull << 30;
  status.shared_bytes = 1ull << 30;
  proto::SnapshotInfo* snapshot = status.snapshots.add_snapshots();
  snapshot->set_dir_path("/dbs/db");
  snapshot->set_exclusive_bytes(512ull << 20);
  snapshot->mutable_record()->set_name("nightly");
  snapshot->mutable_record()->set_files(12);
  snapshot->mutable_record()->set_bytes(2ull << 30);
  std::string out = FormatClusterStatus(status);
  EXPECT_TRUE(absl::StrContains(out,
                                "data: 3.0G (each shared segment once; 1.0G more listed by clones "
                                "and snapshots)\nsnapshots: 1\n"
                                "snapshot /dbs/db/.snapshot/nightly: 12 inodes, 2.0G, 0.5G only "
                                "in it\n"))
      << out;
  status.snapshots.Clear();
  status.snapshots_error = "unknown message type";
  EXPECT_TRUE(absl::StrContains(FormatClusterStatus(status),
                                "snapshots: unknown (unknown message type)\n"));
}

TEST(FormatClusterStatusJsonTest, HoldsWhatTheTextShowsAsOneObject) {
  // Goal: every field of the text report is in the JSON object, with
  // numbers as numbers; the exact text pins the field names scripts use.
  ClusterStatus status;
  proto::MetaStateResponse active;
  active.set_active(true);
  active.set_meta_epoch(12);
  active.set_applied_seq(345);
  active.set_cluster("main");
  status.metas.push_back({"h1:7000", active});
  status.metas.push_back({"h2:7000", absl::UnavailableError("connection refused")});
  proto::ServerStatus* live = AddServer(&status, 1, true);
  live->set_host("h1");
  live->set_capacity_bytes(1000);
  live->set_free_bytes(600);
  AddServer(&status, 2, false)->set_failure_domain("rack2/h2");
  status.statfs.set_capacity_bytes(333);
  status.statfs.set_free_bytes(200);
  status.files = 2;
  status.segments = 6;
  status.open_segments = 1;
  status.under_replicated_segments = 5;
  status.missing_replicas = 5;
  status.missing_bytes = 5120;
  status.servers.set_rereplication_in_flight_segments(1);
  status.servers.set_rereplication_in_flight_bytes(1024);
  status.servers.set_rereplication_copied_segments(3);
  status.servers.set_rereplication_copied_bytes(3072);
  status.servers.set_rereplication_failed_copies(4);
  status.data_bytes = 7000;
  status.shared_bytes = 3000;
  proto::SnapshotInfo* snapshot = status.snapshots.add_snapshots();
  snapshot->set_dir_path("/dbs/db");
  snapshot->set_exclusive_bytes(100);
  snapshot->mutable_record()->set_name("nightly");
  snapshot->mutable_record()->set_ctime_ns(5);
  snapshot->mutable_record()->set_files(12);
  snapshot->mutable_record()->set_bytes(3000);
  EXPECT_EQ(
      "{\"metas\":[{\"address\":\"h1:7000\",\"reachable\":true,\"active\":true,\"epoch\":12,"
      "\"applied_seq\":345,\"active_address\":\"\",\"cluster\":\"main\"},"
      "{\"address\":\"h2:7000\",\"reachable\":false,\"error\":\"connection refused\"}],"
      "\"server_counts\":{\"total\":2,\"live\":1,\"dead\":1,\"failed\":0,\"unreachable\":0},"
      "\"servers\":[{\"id\":1,\"address\":\"127.0.0.1:7101\",\"host\":\"h1\",\"domain\":\"h1\","
      "\"state\":\"live\",\"capacity_bytes\":1000,\"free_bytes\":600,\"heartbeat_age_ms\":100,"
      "\"disk_failure\":\"\",\"unreachable\":\"\"},"
      "{\"id\":2,\"address\":\"127.0.0.1:7102\",\"host\":\"\",\"domain\":\"rack2/h2\","
      "\"state\":\"dead\",\"capacity_bytes\":0,\"free_bytes\":0,\"heartbeat_age_ms\":100,"
      "\"disk_failure\":\"\",\"unreachable\":\"\"}],"
      "\"space\":{\"usable_bytes\":333,\"free_bytes\":200,\"unreported_live_servers\":0},"
      "\"files\":2,\"segments\":{\"total\":6,\"open\":1,\"under_replicated\":5},"
      "\"data_bytes\":7000,\"shared_bytes\":3000,\"snapshots\":[{\"directory\":\"/dbs/db\","
      "\"name\":\"nightly\",\"ctime_ns\":5,\"inodes\":12,\"bytes\":3000,"
      "\"exclusive_bytes\":100}],"
      "\"rereplication\":{\"left_segments\":5,\"left_copies\":5,\"left_bytes\":5120,"
      "\"in_flight_copies\":1,\"in_flight_bytes\":1024,\"done_copies\":3,\"done_bytes\":3072,"
      "\"failed_copies\":4}}\n",
      FormatClusterStatusJson(status));
}

TEST(FormatClusterStatusJsonTest, TroubledAndUnreportedServersAndOddBytesInStrings) {
  // Goal: a failed or unreachable server has that state and its reason,
  // counted live as in the text; a server meta has not heard from has
  // null space and age, and makes the totals null; quotes, newlines and
  // bytes that are not UTF-8 in a reason still give valid JSON.
  ClusterStatus status;
  AddServer(&status, 1, true)->set_disk_failure("journal: \"EIO\"\nat \xff");
  AddServer(&status, 2, true)->set_unreachable("meta cannot dial 127.0.0.1:7102");
  AddServer(&status, 3, true)->set_heartbeat_age_ms(-1);
  const std::string out = FormatClusterStatusJson(status);
  EXPECT_TRUE(absl::StrContains(out,
                                "\"server_counts\":{\"total\":3,\"live\":3,\"dead\":0,"
                                "\"failed\":1,\"unreachable\":1}"))
      << out;
  EXPECT_TRUE(absl::StrContains(
      out,
      "\"state\":\"failed\",\"capacity_bytes\":0,\"free_bytes\":0,\"heartbeat_age_ms\":100,"
      "\"disk_failure\":\"journal: \\\"EIO\\\"\\nat \\ufffd\""))
      << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "\"state\":\"unreachable\",\"capacity_bytes\":0,\"free_bytes\":0,"
                                "\"heartbeat_age_ms\":100,\"disk_failure\":\"\","
                                "\"unreachable\":\"meta cannot dial 127.0.0.1:7102\"}"))
      << out;
  EXPECT_TRUE(absl::StrContains(out,
                                "\"state\":\"live\",\"capacity_bytes\":null,\"free_bytes\":null,"
                                "\"heartbeat_age_ms\":null,"))
      << out;
  EXPECT_TRUE(absl::StrContains(
      out, "\"space\":{\"usable_bytes\":null,\"free_bytes\":null,\"unreported_live_servers\":1}"))
      << out;
  EXPECT_EQ(out.size() - 1, out.find('\n')) << "one line, then the newline: " << out;
  EXPECT_EQ(std::string::npos, out.find('\xff')) << out;
}

}  // namespace
}  // namespace logfs::admin
