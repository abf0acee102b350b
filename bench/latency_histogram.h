// Latency samples and their summary (count, min, mean, stddev, p50, p75,
// p95, p98, p99, p99.9, max), as HBase's WALPerformanceEvaluation prints.
// Not thread-safe: one per thread, merged at the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace logfs::bench {

class LatencyHistogram {
 public:
  void Add(uint64_t ns) { samples_.push_back(ns); }
  void Merge(const LatencyHistogram& other);
  size_t count() const { return samples_.size(); }
  // Every sample added, in ns, in no particular order (for plots).
  const std::vector<uint64_t>& samples() const { return samples_; }
  // Percentile `p` in [0, 100] of the samples, in ns; 0 when empty.
  uint64_t Percentile(double p);
  // Multi-line report, values in ns.
  std::string Report(const std::string& name);

 private:
  void Sort();
  std::vector<uint64_t> samples_;
  bool sorted_ = false;
};

}  // namespace logfs::bench
