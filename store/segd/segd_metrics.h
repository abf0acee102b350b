// Process-wide counters and histograms of this segment server's hot paths
// (append, sync round, read), in relaxed atomics like wal/writer_counters.h,
// and the collector that turns them and the server's state into /metrics
// families at scrape time (CollectSegdMetrics, store/segd/segd_metrics.cc).
//
// Thread-safe; monotonic from process start.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "src/metrics/family_list.h"
#include "src/metrics/histogram.h"

namespace logfs::segd {

class ReplicaStore;

struct SegdMetrics {
  std::atomic<uint64_t> append_bytes{0};  // bytes of accepted appends
  // A sync round that had dirty replicas: its fdatasyncs (journal or
  // replica files), from the start of the round to the last sync.
  metrics::LatencyHistogram sync_round;
  metrics::CountHistogram round_waiters;  // append and sync waiters answered per round
  metrics::LatencyHistogram read;         // a Read RPC's replica read, on the read pool
};

SegdMetrics& GlobalSegdMetrics();

// What the scrape reads besides the globals; the pointers are borrowed.
struct SegdMetricsSources {
  const ReplicaStore* store = nullptr;
  uint64_t appends = 0, fdatasyncs = 0, sync_rounds = 0, heartbeats = 0;
  uint64_t bad_frames = 0, auth_failures = 0, handshakes_refused = 0;
  uint64_t tcp_connections = 0, unix_connections = 0, tcp_requests = 0, unix_requests = 0;
};

// Adds the server's families, logfs_segd_registered 1 among them. Lists
// the replicas (takes the store's lock briefly) and statvfs()es the data
// dir: scrape time only.
void CollectSegdMetrics(const SegdMetricsSources& sources, metrics::FamilyList& out);

// What a segment server serves before it serves (SegmentServer::Start
// still opening its data dir or waiting for meta, --register_wait_ms):
// logfs_segd_registered 0, so a server stuck waiting is seen, not dark.
void CollectStartingSegdMetrics(metrics::FamilyList& out);

}  // namespace logfs::segd
