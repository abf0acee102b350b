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
  std::string meta_address;  // "host:port"
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
  // Each meta replica's answer to MetaState (a lone meta's too).
  std::vector<client::AdminClient::ReplicaState> metas;
};

// Errors: meta unreachable (kUnavailable, kDeadlineExceeded).
absl::StatusOr<ClusterStatus> GetClusterStatus(const ClusterStatusOptions& options);

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

}  // namespace logfs::admin
