#include "src/metrics/family_list.h"

#include <glog/logging.h>

#include <limits>

#include "prometheus/text_serializer.h"

namespace logfs::metrics {

prometheus::ClientMetric& FamilyList::NewSample(const std::string& name, const std::string& help,
                                                prometheus::MetricType type, const Labels& labels) {
  // A scrape has a few dozen families: a linear search is cheaper than a map.
  prometheus::MetricFamily* family = nullptr;
  for (auto& f : families_) {
    if (f.name == name) family = &f;
  }
  if (family == nullptr) {
    families_.emplace_back();
    family = &families_.back();
    family->name = name;
    family->help = help;
    family->type = type;
  }
  CHECK(family->type == type) << name << " added with two types";
  family->metric.emplace_back();
  prometheus::ClientMetric& sample = family->metric.back();
  for (const auto& [label, value] : labels) sample.label.push_back({label, value});
  return sample;
}

void FamilyList::AddCounter(const std::string& name, const std::string& help, double value,
                            const Labels& labels) {
  NewSample(name, help, prometheus::MetricType::Counter, labels).counter.value = value;
}

void FamilyList::AddGauge(const std::string& name, const std::string& help, double value,
                          const Labels& labels) {
  NewSample(name, help, prometheus::MetricType::Gauge, labels).gauge.value = value;
}

void FamilyList::AddHistogram(const std::string& name, const std::string& help,
                              const Histogram::Snapshot& snapshot, double scale,
                              const Labels& labels) {
  auto& h = NewSample(name, help, prometheus::MetricType::Histogram, labels).histogram;
  h.sample_count = snapshot.count;
  h.sample_sum = static_cast<double>(snapshot.sum) * scale;
  uint64_t cumulative = 0;
  for (int i = 0; i < snapshot.bounds; ++i) {
    cumulative += snapshot.buckets[i];
    h.bucket.push_back({cumulative, static_cast<double>(snapshot.bound(i)) * scale});
  }
  h.bucket.push_back({snapshot.count, std::numeric_limits<double>::infinity()});
}

std::string Serialize(const std::vector<prometheus::MetricFamily>& families) {
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace logfs::metrics
