#include "store/admin/cluster_status.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "src/status/macros.h"
#include "store/client/admin_client.h"

namespace logfs::admin {
namespace {

std::string Bytes(uint64_t bytes) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  return absl::StrFormat("%.1fG", static_cast<double>(bytes) / kGiB);
}

// One line per meta replica, when meta is replicated (a lone meta shows
// none): "meta 127.0.0.1:7001: active, epoch 12, journal record 345".
std::string FormatMetaReplicas(const ClusterStatus& status) {
  bool replicated = status.metas.size() > 1;
  for (const auto& meta : status.metas) {
    if (meta.state.ok() && !meta.state->cluster().empty()) replicated = true;
  }
  if (!replicated) return "";
  std::string out;
  for (const auto& meta : status.metas) {
    if (!meta.state.ok()) {
      absl::StrAppend(&out, "meta ", meta.address, ": unreachable: ", meta.state.status().message(),
                      "\n");
      continue;
    }
    const proto::MetaStateResponse& s = *meta.state;
    absl::StrAppend(&out, "meta ", meta.address, ": ", s.active() ? "active" : "standby",
                    ", epoch ", s.meta_epoch(), ", journal record ", s.applied_seq(),
                    s.active() || s.active_address().empty()
                        ? ""
                        : absl::StrCat(", active ", s.active_address()),
                    "\n");
  }
  return out;
}

}  // namespace

absl::StatusOr<ClusterStatus> GetClusterStatus(const ClusterStatusOptions& options) {
  client::AdminClient client(options.meta_address, absl::Milliseconds(options.rpc_timeout_ms));
  ClusterStatus status;
  status.metas = client.MetaStates();
  ASSIGN_OR_RETURN(status.servers, client.ListServers());
  ASSIGN_OR_RETURN(status.statfs, client.StatFs());
  std::map<uint64_t, bool> live;
  for (const auto& server : status.servers.servers()) live[server.server_id()] = server.live();
  absl::flat_hash_map<uint64_t, uint64_t> lengths;  // segment id -> longest listing
  RETURN_IF_ERROR(client.ForEachFile([&](const proto::Inode& file) {
    ++status.files;
    for (const auto& segment : file.segments()) {
      auto [listed, first] = lengths.emplace(segment.id(), segment.length());
      if (!first) {
        // Shared (a clone, a snapshot): counted, and repaired, once.
        status.shared_bytes += segment.length();
        listed->second = std::max(listed->second, segment.length());
        continue;
      }
      ++status.segments;
      if (!segment.sealed()) {
        ++status.open_segments;
        continue;
      }
      uint32_t live_replicas = 0;
      for (const auto& replica : segment.replicas()) {
        auto it = live.find(replica.server_id());
        live_replicas += it != live.end() && it->second ? 1 : 0;
      }
      if (live_replicas < file.replication()) {
        ++status.under_replicated_segments;
        status.missing_replicas += file.replication() - live_replicas;
        status.missing_bytes += (file.replication() - live_replicas) * segment.length();
      }
    }
  }));
  for (const auto& [id, length] : lengths) status.data_bytes += length;
  absl::StatusOr<proto::SnapshotResponse> snapshots = client.Snapshot(proto::SnapshotRequest());
  if (snapshots.ok()) {
    status.snapshots = std::move(*snapshots);
  } else {
    status.snapshots_error = std::string(snapshots.status().message());
  }
  return status;
}

const char* ServerStateName(const proto::ServerStatus& server) {
  return !server.live()                   ? "dead"
         : !server.disk_failure().empty() ? "failed"
         : !server.unreachable().empty()  ? "unreachable"
                                          : "live";
}

const std::string& ServerDomain(const proto::ServerStatus& server) {
  return server.failure_domain().empty() ? server.host() : server.failure_domain();
}

ServerCounts CountServers(const proto::ListServersResponse& servers) {
  ServerCounts counts;
  for (const auto& server : servers.servers()) {
    ++counts.total;
    if (!server.live()) {
      ++counts.dead;
      continue;
    }
    ++counts.live;
    if (server.heartbeat_age_ms() < 0) ++counts.unreported_live;
    if (!server.disk_failure().empty()) {
      ++counts.failed;
    } else if (!server.unreachable().empty()) {
      ++counts.unreachable;
    }
  }
  return counts;
}

std::string FormatClusterStatus(const ClusterStatus& status) {
  // Live servers that take no appends (failed disk) or that meta cannot
  // dial are counted live, as meta does, and named in the header so it
  // does not look healthy while a row says otherwise.
  const ServerCounts counts = CountServers(status.servers);
  std::vector<std::string> troubled;
  if (counts.failed > 0) troubled.push_back(absl::StrCat(counts.failed, " failed"));
  if (counts.unreachable > 0) troubled.push_back(absl::StrCat(counts.unreachable, " unreachable"));
  std::string out = FormatMetaReplicas(status);
  absl::StrAppendFormat(
      &out, "servers: %d (%d live%s, %d dead)\n", counts.total, counts.live,
      troubled.empty() ? "" : absl::StrCat(" (", absl::StrJoin(troubled, ", "), ")"), counts.dead);
  absl::StrAppend(&out, absl::StrFormat("%6s  %-24s %-16s %-11s %10s %10s %s\n", "id", "address",
                                        "domain", "state", "capacity", "free", "heartbeat"));
  // A server meta has not heard from since it started (heartbeat age -1)
  // has no known space: meta counts it live for --dead_server_ms on trust,
  // so the totals are unknown too until it reports.
  for (const auto& s : status.servers.servers()) {
    const bool reported = s.heartbeat_age_ms() >= 0;
    std::string age =
        reported ? absl::StrCat(s.heartbeat_age_ms(), "ms ago") : "none since meta start";
    absl::StrAppend(&out, absl::StrFormat("%6d  %-24s %-16s %-11s %10s %10s %s\n", s.server_id(),
                                          s.address(), ServerDomain(s), ServerStateName(s),
                                          reported ? Bytes(s.capacity_bytes()) : "unknown",
                                          reported ? Bytes(s.free_bytes()) : "unknown", age));
  }
  for (const auto& s : status.servers.servers()) {
    if (s.live() && !s.disk_failure().empty()) {
      absl::StrAppend(&out, "server ", s.server_id(), " failed: ", s.disk_failure(), "\n");
    } else if (s.live() && !s.unreachable().empty()) {
      absl::StrAppend(&out, "server ", s.server_id(), " unreachable: ", s.unreachable(),
                      " (check its --advertise)\n");
    }
  }
  if (counts.unreported_live > 0) {
    absl::StrAppend(&out, "space: unknown (", counts.unreported_live,
                    " live servers not heard from since meta started)\n");
  } else {
    absl::StrAppend(&out, "space: ", Bytes(status.statfs.capacity_bytes()), " usable, ",
                    Bytes(status.statfs.free_bytes()), " free (after replication)\n");
  }
  absl::StrAppend(&out, "files: ", status.files, ", segments: ", status.segments,
                  ", open: ", status.open_segments,
                  ", under-replicated: ", status.under_replicated_segments, "\n");
  const proto::ListServersResponse& r = status.servers;
  absl::StrAppend(&out, "re-replication: ", status.under_replicated_segments, " segments left (",
                  status.missing_replicas, " copies, ", status.missing_bytes, " bytes), in flight ",
                  r.rereplication_in_flight_segments(), " copies (",
                  r.rereplication_in_flight_bytes(), " bytes), done ",
                  r.rereplication_copied_segments(), " copies (", r.rereplication_copied_bytes(),
                  " bytes), ", r.rereplication_failed_copies(),
                  " failed, since meta became active\n");
  absl::StrAppend(&out, "data: ", Bytes(status.data_bytes), " (each shared segment once; ",
                  Bytes(status.shared_bytes), " more listed by clones and snapshots)\n");
  if (!status.snapshots_error.empty()) {
    absl::StrAppend(&out, "snapshots: unknown (", status.snapshots_error, ")\n");
  } else {
    absl::StrAppend(&out, "snapshots: ", status.snapshots.snapshots_size(), "\n");
    for (const proto::SnapshotInfo& info : status.snapshots.snapshots()) {
      const proto::SnapshotRecord& record = info.record();
      absl::StrAppend(&out, "snapshot ", info.dir_path(), "/.snapshot/", record.name(), ": ",
                      record.files(), " inodes, ", Bytes(record.bytes()), ", ",
                      Bytes(info.exclusive_bytes()), " only in it\n");
    }
  }
  return out;
}

}  // namespace logfs::admin
