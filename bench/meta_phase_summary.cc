#include "bench/meta_phase_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "bench/latency_histogram.h"

namespace logfs::bench {

const char* MetaPhaseName(MetaPhase phase) {
  switch (phase) {
    case MetaPhase::kCreate: return "create";
    case MetaPhase::kStat: return "stat";
    case MetaPhase::kReaddir: return "readdir";
    case MetaPhase::kRename: return "rename";
    case MetaPhase::kUnlink: return "unlink";
  }
  return "?";
}

absl::StatusOr<PhaseSummary> SummarizePhase(MetaPhase phase,
                                            const std::vector<WorkerReport>& reports) {
  if (reports.empty()) return absl::InvalidArgumentError("no worker reports to summarize");
  PhaseSummary summary;
  summary.phase = phase;
  int64_t start_ns = reports.front().start_ns;
  int64_t end_ns = reports.front().end_ns;
  LatencyHistogram latency;
  for (const WorkerReport& report : reports) {
    if (!report.error.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a failed worker report: ", report.error.message()));
    }
    summary.ops += report.ops;
    start_ns = std::min(start_ns, report.start_ns);
    end_ns = std::max(end_ns, report.end_ns);
    for (uint64_t ns : report.latency_ns) latency.Add(ns);
  }
  summary.seconds = static_cast<double>(std::max<int64_t>(end_ns - start_ns, 0)) / 1e9;
  summary.ops_per_second = Ratio(static_cast<double>(summary.ops), summary.seconds);
  summary.samples = latency.count();
  summary.p50_ns = latency.Percentile(50);
  summary.p99_ns = latency.Percentile(99);
  return summary;
}

std::string FormatPhaseTable(const std::vector<PhaseSummary>& phases) {
  std::string out =
      "| phase | ops | seconds | ops/s | p50 (µs) | p99 (µs) |\n"
      "|---|--:|--:|--:|--:|--:|\n";
  for (const PhaseSummary& p : phases) {
    absl::StrAppendFormat(&out, "| %s | %d | %.4f | %.0f | %.1f | %.1f |\n", MetaPhaseName(p.phase),
                          p.ops, p.seconds, p.ops_per_second, p.p50_ns / 1e3, p.p99_ns / 1e3);
  }
  return out;
}

std::string FormatPhaseLine(const PhaseSummary& p) {
  return absl::StrFormat("phase=%s ops=%d seconds=%.6f ops_per_s=%.0f p50_ns=%d p99_ns=%d\n",
                         MetaPhaseName(p.phase), p.ops, p.seconds, p.ops_per_second, p.p50_ns,
                         p.p99_ns);
}

}  // namespace logfs::bench
