#include "src/metrics/histogram.h"

#include <glog/logging.h>

namespace logfs::metrics {

Histogram::Histogram(uint64_t first_bound, int bounds)
    : first_bound_(first_bound), bounds_(bounds) {
  CHECK_GT(first_bound, 0u);
  CHECK(bounds >= 1 && bounds <= kBoundsMax) << bounds;
  CHECK_LT(first_bound, (~uint64_t{0}) >> bounds) << "the last bound must not overflow";
}

int Histogram::BucketOf(uint64_t value) const {
  if (value <= first_bound_) return 0;
  // value > first_bound * 2^(i-1) and <= first_bound * 2^i  <=>  i is the
  // bit width of (value - 1) / first_bound.
  const uint64_t q = (value - 1) / first_bound_;
  const int i = 64 - __builtin_clzll(q);
  return i < bounds_ ? i : bounds_;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  s.first_bound = first_bound_;
  for (int i = 0; i <= bounds_; ++i) {
    s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    s.count += s.buckets[i];
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace logfs::metrics
