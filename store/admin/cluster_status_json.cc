// FormatClusterStatusJson (store/admin/cluster_status.h): the report of
// `logfs status --format=json`, written by hand (no JSON library) with
// every string through util::JsonQuote.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/util/json_quote.h"
#include "store/admin/cluster_status.h"

namespace logfs::admin {
namespace {

using util::JsonQuote;

const char* Bool(bool b) { return b ? "true" : "false"; }

// `value` as a JSON number, or null when it is not `known`.
template <typename T>
std::string NumberOrNull(bool known, T value) {
  return known ? absl::StrCat(value) : "null";
}

std::string MetaJson(const client::AdminClient::ReplicaState& meta) {
  if (!meta.state.ok()) {
    return absl::StrCat("{\"address\":", JsonQuote(meta.address),
                        ",\"reachable\":false,\"error\":", JsonQuote(meta.state.status().message()),
                        "}");
  }
  const proto::MetaStateResponse& s = *meta.state;
  return absl::StrCat("{\"address\":", JsonQuote(meta.address),
                      ",\"reachable\":true,\"active\":", Bool(s.active()),
                      ",\"epoch\":", s.meta_epoch(), ",\"applied_seq\":", s.applied_seq(),
                      ",\"active_address\":", JsonQuote(s.active_address()),
                      ",\"cluster\":", JsonQuote(s.cluster()), "}");
}

std::string ServerJson(const proto::ServerStatus& s) {
  const bool reported = s.heartbeat_age_ms() >= 0;
  return absl::StrCat("{\"id\":", s.server_id(), ",\"address\":", JsonQuote(s.address()),
                      ",\"host\":", JsonQuote(s.host()), ",\"domain\":", JsonQuote(ServerDomain(s)),
                      ",\"state\":", JsonQuote(ServerStateName(s)),
                      ",\"capacity_bytes\":", NumberOrNull(reported, s.capacity_bytes()),
                      ",\"free_bytes\":", NumberOrNull(reported, s.free_bytes()),
                      ",\"heartbeat_age_ms\":", NumberOrNull(reported, s.heartbeat_age_ms()),
                      ",\"disk_failure\":", JsonQuote(s.disk_failure()),
                      ",\"unreachable\":", JsonQuote(s.unreachable()), "}");
}

}  // namespace

std::string FormatClusterStatusJson(const ClusterStatus& status) {
  const ServerCounts counts = CountServers(status.servers);
  const bool space_known = counts.unreported_live == 0;
  const proto::ListServersResponse& r = status.servers;
  std::string out = "{\"metas\":[";
  absl::StrAppend(
      &out,
      absl::StrJoin(status.metas, ",",
                    [](std::string* to, const auto& meta) { absl::StrAppend(to, MetaJson(meta)); }),
      "]");
  absl::StrAppend(&out, ",\"server_counts\":{\"total\":", counts.total, ",\"live\":", counts.live,
                  ",\"dead\":", counts.dead, ",\"failed\":", counts.failed,
                  ",\"unreachable\":", counts.unreachable, "}");
  absl::StrAppend(&out, ",\"servers\":[",
                  absl::StrJoin(r.servers(), ",",
                                [](std::string* to, const proto::ServerStatus& s) {
                                  absl::StrAppend(to, ServerJson(s));
                                }),
                  "]");
  absl::StrAppend(&out, ",\"space\":{\"usable_bytes\":",
                  NumberOrNull(space_known, status.statfs.capacity_bytes()),
                  ",\"free_bytes\":", NumberOrNull(space_known, status.statfs.free_bytes()),
                  ",\"unreported_live_servers\":", counts.unreported_live, "}");
  absl::StrAppend(&out, ",\"files\":", status.files, ",\"segments\":{\"total\":", status.segments,
                  ",\"open\":", status.open_segments,
                  ",\"under_replicated\":", status.under_replicated_segments, "}");
  absl::StrAppend(&out, ",\"data_bytes\":", status.data_bytes,
                  ",\"shared_bytes\":", status.shared_bytes, ",\"snapshots\":");
  if (!status.snapshots_error.empty()) {
    absl::StrAppend(&out, "null");
  } else {
    absl::StrAppend(
        &out, "[",
        absl::StrJoin(status.snapshots.snapshots(), ",",
                      [](std::string* to, const proto::SnapshotInfo& info) {
                        absl::StrAppend(to, "{\"directory\":", util::JsonQuote(info.dir_path()),
                                        ",\"name\":", util::JsonQuote(info.record().name()),
                                        ",\"ctime_ns\":", info.record().ctime_ns(),
                                        ",\"inodes\":", info.record().files(),
                                        ",\"bytes\":", info.record().bytes(),
                                        ",\"exclusive_bytes\":", info.exclusive_bytes(), "}");
                      }),
        "]");
  }
  absl::StrAppend(&out, ",\"rereplication\":{\"left_segments\":", status.under_replicated_segments,
                  ",\"left_copies\":", status.missing_replicas,
                  ",\"left_bytes\":", status.missing_bytes,
                  ",\"in_flight_copies\":", r.rereplication_in_flight_segments(),
                  ",\"in_flight_bytes\":", r.rereplication_in_flight_bytes(),
                  ",\"done_copies\":", r.rereplication_copied_segments(),
                  ",\"done_bytes\":", r.rereplication_copied_bytes(),
                  ",\"failed_copies\":", r.rereplication_failed_copies(), "}}\n");
  return out;
}

}  // namespace logfs::admin
