// A fixed-bucket histogram that hot paths update without a lock: one
// relaxed fetch_add on a bucket and one on the sum per observation, as
// wal/writer_counters.h does for counters. Buckets are exponential, bound
// i = first_bound * 2^i (i < bounds), plus +Inf; a scrape reads them
// (metrics::FamilyList::AddHistogram) and converts the integer unit (ns,
// a count) into the exported one. Exponential buckets as Prometheus'
// client_golang ExponentialBuckets; the idea of keeping our own atomics and
// converting only at scrape time is Ceph's perf counters'.
//
// Thread-safe; values are monotonic from process start. A snapshot read
// while others observe may see the sum a few observations ahead of or
// behind the buckets, never a bucket going backwards.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace logfs::metrics {

class Histogram {
 public:
  static constexpr int kBoundsMax = 20;

  // `first_bound` > 0 in the histogram's unit; 1 <= `bounds` <= kBoundsMax.
  Histogram(uint64_t first_bound, int bounds);

  void Observe(uint64_t value) {
    buckets_[BucketOf(value)].fetch_add(1, std::memory_order_relaxed);
    sum_.fetch_add(value, std::memory_order_relaxed);
  }

  struct Snapshot {
    std::array<uint64_t, kBoundsMax + 1> buckets{};  // per bucket, not cumulative; [bounds] is +Inf
    int bounds = 0;
    uint64_t first_bound = 0;
    uint64_t count = 0;  // the sum of `buckets`
    uint64_t sum = 0;
    uint64_t bound(int i) const { return first_bound << i; }
  };
  Snapshot Read() const;

  // Index of the bucket `value` falls in: the first i with value <= bound(i),
  // `bounds` (+Inf) past the last.
  int BucketOf(uint64_t value) const;

 private:
  const uint64_t first_bound_;
  const int bounds_;
  std::array<std::atomic<uint64_t>, kBoundsMax + 1> buckets_{};
  std::atomic<uint64_t> sum_{0};
};

// Durations in nanoseconds, exported in seconds: 25 us * 2^k up to 13.1 s
// (a local ext4 fdatasync here takes ~100 us, a stalled replica seconds).
class LatencyHistogram : public Histogram {
 public:
  static constexpr uint64_t kFirstBoundNs = 25000;
  LatencyHistogram() : Histogram(kFirstBoundNs, kBoundsMax) {}
  void Observe(absl::Duration d) {
    Histogram::Observe(static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Nanoseconds(d))));
  }
};

// Small counts (appends per sync group or round): 1, 2, 4, ... 2048, +Inf.
class CountHistogram : public Histogram {
 public:
  CountHistogram() : Histogram(1, 12) {}
};

}  // namespace logfs::metrics
