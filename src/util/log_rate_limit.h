// Rate limit for log lines that can repeat without bound (a create loop
// against a dead server once wrote 185 MB of one warning in 2 minutes).
//
//   LOGFS_LOG_EVERY_MS(WARNING, 1000) << "cannot create segment " << id;
//
// Each call site logs its first `kLogBurstLines` lines, then at most one
// line per `interval_ms`; a line that follows suppressed ones starts with
// "[N similar lines suppressed] ". The limit is per call site (not per
// message text), shared by every thread. glog's LOG_EVERY_N counts calls,
// which still floods when calls are many; this counts time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <glog/logging.h>

#include "absl/synchronization/mutex.h"

namespace logfs::util {

inline constexpr int kLogBurstLines = 5;

// One call site's budget. Thread-safe. `now_ms` (tests) returns a
// monotonic time in ms; null means the steady clock.
class LogRateLimiter {
 public:
  explicit LogRateLimiter(int64_t interval_ms, int burst_lines = kLogBurstLines,
                          std::function<int64_t()> now_ms = nullptr);

  // True if the caller should log now; then `*suppressed` is the number of
  // lines refused since the last allowed one (else it is left alone).
  bool Allow(uint64_t* suppressed) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const int64_t interval_ms_;
  const int burst_lines_;
  const std::function<int64_t()> now_ms_;

  absl::Mutex mu_;
  int burst_used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_ms_ ABSL_GUARDED_BY(mu_) = 0;  // when the last line past the burst was allowed
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

// "" for 0, else "[N similar lines suppressed] ".
std::string SuppressedNote(uint64_t suppressed);

}  // namespace logfs::util

// A statement, usable wherever LOG(severity) is: the for runs its body at
// most once, and the lambda's static is one limiter per call site.
#define LOGFS_LOG_EVERY_MS(severity, interval_ms)                                        \
  for (uint64_t logfs_suppressed_ = 0,                                                   \
                logfs_log_now_ = [&logfs_suppressed_]() -> uint64_t {                    \
                  static ::logfs::util::LogRateLimiter logfs_limiter_(interval_ms);      \
                  return logfs_limiter_.Allow(&logfs_suppressed_) ? 1 : 0;               \
                }();                                                                     \
       logfs_log_now_ != 0; logfs_log_now_ = 0)                                          \
  LOG(severity) << ::logfs::util::SuppressedNote(logfs_suppressed_)
