// Process-wide counters of every FileWriter in this process (a mount, or a
// program using the client library), for `logfs bench wal` and the
// user.logfs.stats xattr. They show group commit on the client side: how
// many appends and fsyncs each replica sync round (block files) or each
// acked-length advance that released fsyncs (WAL files) covered.
//
// Thread-safe (relaxed atomics); monotonic from process start.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "src/metrics/histogram.h"

namespace logfs::wal {

struct WriterCounters {
  std::atomic<uint64_t> appends{0};       // Append RPCs fanned out (one per chunk, all replicas)
  std::atomic<uint64_t> append_bytes{0};  // bytes in them
  std::atomic<uint64_t> syncs{0};         // Sync calls (fsync, fdatasync, close)
  std::atomic<uint64_t> sync_rounds{0};   // Sync RPC rounds sent to the replicas
  // Times the acked length advanced and released waiting syncs at once:
  // one group commit each.
  std::atomic<uint64_t> sync_groups{0};
  std::atomic<uint64_t> synced_waiters{0};  // syncs released by those groups
  // Eager Append RPC fan-outs (one per chunk) sent while nothing else of
  // the mount was in flight: only the first ack quorum of replicas was
  // asked to sync them at once (FileWriter::EagerSync).
  std::atomic<uint64_t> quorum_synced_appends{0};
  // Rolls away from a replica found slow (wal/replica_lag.h).
  std::atomic<uint64_t> slow_replica_rolls{0};
  // Exported on /metrics only (not in user.logfs.stats, whose keys tests and
  // bench parse):
  std::atomic<uint64_t> rolls{0};           // segments rolled (full, slow replica, ...)
  std::atomic<uint64_t> recoveries{0};      // replica failures recovered by rolling away
  std::atomic<uint64_t> fsync_timeouts{0};  // writers failed: no ack quorum within fsync_timeout
  // Syncs released per group commit (one observation per sync_groups).
  metrics::CountHistogram sync_group_waiters;
};

WriterCounters& GlobalWriterCounters();

// "appends=N append_bytes=N syncs=N sync_rounds=N sync_groups=N
// synced_waiters=N quorum_synced_appends=N slow_replica_rolls=N\n": the
// value of the
// user.logfs.stats xattr.
std::string FormatWriterCounters();

}  // namespace logfs::wal
