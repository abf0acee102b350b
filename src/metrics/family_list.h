// The metric families of one scrape, built from our own counters and
// histograms (src/metrics/histogram.h) when /metrics is asked for, in
// prometheus-cpp's MetricFamily structs, which its TextSerializer writes
// in the text format 0.0.4. Nothing here is on a hot path.
//
// Naming (checked by `promtool check metrics` in tests/metrics_test.cc):
// every name starts with logfs_, counters end in _total, durations are
// histograms in seconds (_seconds), sizes in bytes (_bytes); labels take
// bounded values only (an op name, an errno name, a reason), never a path,
// a segment id or an address.
//
// Not thread-safe: one FamilyList per scrape.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "prometheus/metric_family.h"
#include "src/metrics/histogram.h"

namespace logfs::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class FamilyList {
 public:
  // Adds one sample to family `name` (created with `help` on its first
  // sample; later samples of it must have the same type and other labels).
  void AddCounter(const std::string& name, const std::string& help, double value,
                  const Labels& labels = {});
  void AddGauge(const std::string& name, const std::string& help, double value,
                const Labels& labels = {});
  // Cumulative buckets with bounds and sum times `scale` (1e-9: a
  // LatencyHistogram's ns to seconds; 1: counts), and le="+Inf".
  void AddHistogram(const std::string& name, const std::string& help,
                    const Histogram::Snapshot& snapshot, double scale, const Labels& labels = {});

  const std::vector<prometheus::MetricFamily>& families() const { return families_; }
  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::ClientMetric& NewSample(const std::string& name, const std::string& help,
                                      prometheus::MetricType type, const Labels& labels);

  std::vector<prometheus::MetricFamily> families_;
};

// The text format of `families` (prometheus::TextSerializer).
std::string Serialize(const std::vector<prometheus::MetricFamily>& families);

}  // namespace logfs::metrics
