// `logfs bench wal`: threads append fixed-size records to WAL files and
// fdatasync every `sync_every` appends, modelled on HBase's
// WALPerformanceEvaluation. Two targets:
//   --dir=PATH        ordinary open/write/fdatasync in any directory, so one
//                     tool measures ext4, a FUSE passthrough and a logfs
//                     mount alike;
//   --meta=HOST:PORT  straight through the logfs client library (the
//                     mount's code without FUSE), in a new directory of
//                     kind wal under the root.
// The report: latency histogram of append(+sync) in ns, time between
// syncs, appends/s, syncs/s, append bytes/s, the client's group commit
// (appends and fsyncs per acked-length advance, from user.logfs.stats or
// the library's counters), the segment servers' (appends per fdatasync,
// from each segd's ServerStats) and the CPU seconds all processes named
// `logfs` used per 1000 synced appends.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace logfs::bench {

struct WalBenchOptions {
  std::string dir;            // exactly one of dir and meta
  std::string meta;
  int threads = 1;
  int files = 1;              // 1: all threads share one file (as one HBase WAL)
  uint64_t record_bytes = 512;
  uint64_t records = 0;       // per thread; 0 with seconds == 0: 1000
  double seconds = 0;         // run this long instead of `records`
  int sync_every = 1;         // appends per fdatasync
  // Non-empty: also write the append(+sync) latency chart (histogram and
  // CDF, bench/svg_plot.h) as SVG to this path.
  std::string plot;
};

struct WalBenchResult {
  std::string report;         // the printed report
  uint64_t p50_ns = 0;        // of append(+sync)
  double syncs_per_second = 0;
};

// Runs the workload and removes its files. kInvalidArgument for bad
// options; the errno of the first failing write/fdatasync otherwise;
// kUnavailable if --meta cannot be reached; the errno of writing `plot`.
absl::StatusOr<WalBenchResult> RunWalBench(const WalBenchOptions& options);

}  // namespace logfs::bench
