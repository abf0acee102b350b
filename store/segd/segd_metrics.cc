#include "store/segd/segd_metrics.h"

#include <sys/statvfs.h>

#include "store/segd/replica_store.h"

namespace logfs::segd {

SegdMetrics& GlobalSegdMetrics() {
  static auto* metrics = new SegdMetrics();  // never destroyed: threads may record at exit
  return *metrics;
}

namespace {

constexpr char kRegisteredHelp[] =
    "1 once the server registered with meta and serves; 0 while it starts (waits for meta).";

}  // namespace

void CollectStartingSegdMetrics(metrics::FamilyList& out) {
  out.AddGauge("logfs_segd_registered", kRegisteredHelp, 0);
}

void CollectSegdMetrics(const SegdMetricsSources& s, metrics::FamilyList& out) {
  const SegdMetrics& m = GlobalSegdMetrics();
  out.AddGauge("logfs_segd_registered", kRegisteredHelp, 1);
  out.AddCounter("logfs_segd_appends_total", "Appends accepted (written or exact resends).",
                 s.appends);
  out.AddCounter("logfs_segd_append_bytes_total", "Bytes of accepted appends.",
                 m.append_bytes.load(std::memory_order_relaxed));
  out.AddCounter("logfs_segd_fdatasyncs_total", "Replica-file fdatasyncs plus journal syncs.",
                 s.fdatasyncs);
  out.AddCounter("logfs_segd_sync_rounds_total", "Group-commit rounds that synced something.",
                 s.sync_rounds);
  out.AddHistogram("logfs_segd_sync_round_duration_seconds",
                   "Sync rounds with dirty replicas: the time their fdatasyncs took.",
                   m.sync_round.Read(), 1e-9);
  out.AddHistogram("logfs_segd_sync_round_waiters",
                   "Append and sync requests answered per sync round.", m.round_waiters.Read(), 1);
  out.AddHistogram("logfs_segd_read_duration_seconds", "Replica reads of Read requests.",
                   m.read.Read(), 1e-9);
  out.AddCounter("logfs_segd_heartbeats_total", "Heartbeats sent to meta.", s.heartbeats);
  out.AddCounter("logfs_segd_rejected_frames_total", "Frames or connections refused, by reason.",
                 s.bad_frames, {{"reason", "bad_frame"}});
  out.AddCounter("logfs_segd_rejected_frames_total", "", s.auth_failures,
                 {{"reason", "auth_failure"}});
  out.AddCounter("logfs_segd_rejected_frames_total", "", s.handshakes_refused,
                 {{"reason", "handshake_refused"}});
  out.AddCounter("logfs_segd_rpc_connections_total", "RPC connections accepted, by transport.",
                 s.tcp_connections, {{"transport", "tcp"}});
  out.AddCounter("logfs_segd_rpc_connections_total", "", s.unix_connections,
                 {{"transport", "unix"}});
  out.AddCounter("logfs_segd_rpc_requests_total", "RPC request frames read, by transport.",
                 s.tcp_requests, {{"transport", "tcp"}});
  out.AddCounter("logfs_segd_rpc_requests_total", "", s.unix_requests, {{"transport", "unix"}});
  uint64_t open = 0, sealed = 0, corrupt = 0, bytes = 0;
  for (const ReplicaInfo& r : s.store->ListReplicas()) {
    (r.corrupt ? corrupt : r.sealed ? sealed : open) += 1;
    bytes += r.length;
  }
  const char* kReplicasHelp = "Replicas held, by state.";
  out.AddGauge("logfs_segd_replicas", kReplicasHelp, open, {{"state", "open"}});
  out.AddGauge("logfs_segd_replicas", kReplicasHelp, sealed, {{"state", "sealed"}});
  out.AddGauge("logfs_segd_replicas", kReplicasHelp, corrupt, {{"state", "corrupt"}});
  out.AddGauge("logfs_segd_replica_bytes", "Bytes written to the replicas held.", bytes);
  struct statvfs fs;
  if (statvfs(s.store->data_dir().c_str(), &fs) == 0) {
    out.AddGauge("logfs_segd_disk_free_bytes",
                 "Free bytes (for unprivileged users) of the data dir's file system.",
                 static_cast<double>(fs.f_bavail) * fs.f_frsize);
    out.AddGauge("logfs_segd_disk_capacity_bytes", "Size of the data dir's file system.",
                 static_cast<double>(fs.f_blocks) * fs.f_frsize);
  }
}

}  // namespace logfs::segd
