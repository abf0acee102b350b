// `logfs status`: segment servers with their state and space, and counts
// of files, open segments and under-replicated sealed segments as meta
// sees them (live replicas on live servers fewer than the file's
// replication; `logfs fsck` asks the replicas themselves).
//
// Thread-safety: a plain function; it blocks on RPCs (timeout each).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/client/admin_client.h"
#include "store/format/logfs.pb.h"

namespace logfs::admin {

struct ClusterStatusOptions {
  std::string meta_address;   // "host:port"
  int rpc_timeout_ms = 5000;  // per call
};

struct ClusterStatus {
  proto::ListServersResponse servers;
  proto::StatFsResponse statfs;
  uint64_t files = 0;
  uint64_t segments = 0;
  uint64_t open_segments = 0;
  uint64_t under_replicated_segments = 0;
  // The re-replication backlog, from the same listing: replicas missing
  // from under-replicated sealed segments (copies still to make) and their
  // bytes (segment length per missing replica). The in-flight and copied
  // counts are meta's own (servers.rereplication_*).
  uint64_t missing_replicas = 0;
  uint64_t missing_bytes = 0;
  // Bytes of data the files list, each segment once however many files
  // and snapshots share it (`segments` counts each once too), and bytes
  // the files list more than once (clones, links' snapshots, prefixes).
  uint64_t data_bytes = 0;
  uint64_t shared_bytes = 0;
  // Every snapshot of the cluster (meta's Snapshot LIST); empty with
  // snapshots_error set when meta cannot list them (logfs 0.1).
  proto::SnapshotResponse snapshots;
  std::string snapshots_error;
  // Each meta replica's answer to MetaState (a lone meta's too).
  std::vector<client::AdminClient::ReplicaState> metas;
};

// Errors: meta unreachable (kUnavailable, kDeadlineExceeded).
absl::StatusOr<ClusterStatus> GetClusterStatus(const ClusterStatusOptions& options);

// A server's state as `logfs status` names it: "dead" (not heard from
// within --dead_server_ms), else "failed" (live, its journal failed: it
// takes no appends), else "unreachable" (live, meta cannot dial its
// advertised address), else "live".
const char* ServerStateName(const proto::ServerStatus& server);

// The failure domain a server registered with, or its host if none.
const std::string& ServerDomain(const proto::ServerStatus& server);

// Servers by state; failed and unreachable ones count as live too, as
// meta counts them. `unreported_live`: live servers meta has not heard
// from since it started (heartbeat age -1), whose space is unknown.
struct ServerCounts {
  int total = 0;
  int live = 0;
  int dead = 0;
  int failed = 0;
  int unreachable = 0;
  int unreported_live = 0;
};
ServerCounts CountServers(const proto::ListServersResponse& servers);

// A header ("servers: 5 (5 live (1 unreachable), 0 dead)": live servers
// with a failed disk or an address meta cannot dial count as live and
// are named), a server table (one line per server: id, address,
// live/failed/unreachable/dead, capacity, free, heartbeat age; "unknown"
// space and "none since meta start" for a server meta has not heard from
// since it started), the counts, and a line of re-replication progress:
// "re-replication: 2 segments left (2 copies, 8192 bytes), in flight 1
// copies (4096 bytes), done 5 copies (20480 bytes), 0 failed, since meta
// became active".
std::string FormatClusterStatus(const ClusterStatus& status);

// The same report as one JSON object on one line (and a newline), for scripts
// (`logfs status --format=json`, cluster_status_json.cc). Fields:
//   "metas": every meta replica asked (a lone meta too): {"address",
//     "reachable": true, "active", "epoch", "applied_seq", "active_address",
//     "cluster"} or {"address", "reachable": false, "error"};
//   "server_counts": {"total", "live", "dead", "failed", "unreachable"}, as
//     the text header (failed and unreachable servers count as live);
//   "servers": one object per server: {"id", "address", "host", "domain",
//     "state" (ServerStateName), "capacity_bytes", "free_bytes",
//     "heartbeat_age_ms" (these three null for a server meta has not heard
//     from since it started), "disk_failure", "unreachable" ("" if none)};
//   "space": {"usable_bytes", "free_bytes"} (after replication; null while
//     any live server is unreported), "unreported_live_servers";
//   "files", "segments": {"total", "open", "under_replicated"};
//   "rereplication": {"left_segments", "left_copies", "left_bytes",
//     "in_flight_copies", "in_flight_bytes", "done_copies", "done_bytes",
//     "failed_copies"}.
// Strings are escaped (util::JsonQuote); byte counts are plain integers.
std::string FormatClusterStatusJson(const ClusterStatus& status);

}  // namespace logfs::admin
