// `logfs bench wal`: threads append fixed-size records to WAL files on any
// directory with ordinary write + fdatasync, so the same run can measure a
// logfs mount and a local ext4 directory. Modelled on HBase's
// WALPerformanceEvaluation.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace logfs::bench {

struct WalBenchOptions {
  std::string dir;            // where the WAL files are created
  int threads = 1;
  int files = 1;              // 1: all threads share one file (as one HBase WAL)
  uint64_t record_bytes = 512;
  uint64_t records = 1000;    // per thread
  int sync_every = 1;         // appends per fdatasync
};

struct WalBenchResult {
  std::string report;         // the printed report
  uint64_t p50_ns = 0;        // of append(+sync)
  double syncs_per_second = 0;
};

// Runs the workload and removes its files. kInvalidArgument for bad
// options; the errno of the first failing write/fdatasync otherwise.
absl::StatusOr<WalBenchResult> RunWalBench(const WalBenchOptions& options);

}  // namespace logfs::bench
