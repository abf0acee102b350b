// `logfs bench meta`: its phases, and a phase's figures over all workers
// as the bench prints them: a markdown table for people and one
// "phase=NAME ops=N seconds=S ops_per_s=X p50_ns=N p99_ns=N" line per
// phase for scripts (bench/compare.sh).
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/meta_worker_report.h"

namespace logfs::bench {

// In the order they run; each phase works on what the one before left.
enum class MetaPhase : uint8_t { kCreate = 0, kStat, kReaddir, kRename, kUnlink };
inline constexpr MetaPhase kMetaPhases[] = {MetaPhase::kCreate, MetaPhase::kStat,
                                            MetaPhase::kReaddir, MetaPhase::kRename,
                                            MetaPhase::kUnlink};

// "create", "stat", "readdir", "rename", "unlink".
const char* MetaPhaseName(MetaPhase phase);

struct PhaseSummary {
  MetaPhase phase = MetaPhase::kCreate;
  uint64_t ops = 0;      // over all workers
  double seconds = 0;    // wall clock: first worker's start to last one's end
  double ops_per_second = 0;
  uint64_t p50_ns = 0;   // of every worker's samples together
  uint64_t p99_ns = 0;
  uint64_t samples = 0;  // latency samples (readdir: one per listing)
};

// Adds up one phase's reports, one per worker. kInvalidArgument if there
// are none or one carries an error (the caller reports those first).
absl::StatusOr<PhaseSummary> SummarizePhase(MetaPhase phase,
                                            const std::vector<WorkerReport>& reports);

// The table: a header, then a row per phase (latencies in µs).
std::string FormatPhaseTable(const std::vector<PhaseSummary>& phases);

// "phase=create ops=2000 seconds=0.123000 ops_per_s=16260 p50_ns=51234
// p99_ns=180345" and a newline.
std::string FormatPhaseLine(const PhaseSummary& phase);

}  // namespace logfs::bench
