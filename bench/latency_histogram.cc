#include "bench/latency_histogram.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace logfs::bench {

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
  sorted_ = false;
}

void LatencyHistogram::Sort() {
  if (!sorted_) std::sort(samples_.begin(), samples_.end());
  sorted_ = true;
}

uint64_t LatencyHistogram::Percentile(double p) {
  if (samples_.empty()) return 0;
  Sort();
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * samples_.size()));
  return samples_[std::min(samples_.size() - 1, rank == 0 ? 0 : rank - 1)];
}

std::string LatencyHistogram::Report(const std::string& name) {
  Sort();
  double mean = 0;
  for (uint64_t s : samples_) mean += static_cast<double>(s);
  if (!samples_.empty()) mean /= static_cast<double>(samples_.size());
  double var = 0;
  for (uint64_t s : samples_) var += (s - mean) * (s - mean);
  if (!samples_.empty()) var /= static_cast<double>(samples_.size());
  return absl::StrFormat(
      "%s (ns): count=%d min=%d mean=%.0f stddev=%.0f p50=%d p75=%d p95=%d p98=%d p99=%d "
      "p99.9=%d max=%d\n",
      name, samples_.size(), samples_.empty() ? 0 : samples_.front(), mean, std::sqrt(var),
      Percentile(50), Percentile(75), Percentile(95), Percentile(98), Percentile(99),
      Percentile(99.9), samples_.empty() ? 0 : samples_.back());
}

}  // namespace logfs::bench
