#include "src/util/log_rate_limit.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace logfs::util {
namespace {

int64_t SteadyNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

LogRateLimiter::LogRateLimiter(int64_t interval_ms, int burst_lines,
                               std::function<int64_t()> now_ms)
    : interval_ms_(interval_ms),
      burst_lines_(burst_lines),
      now_ms_(now_ms ? std::move(now_ms) : std::function<int64_t()>(SteadyNowMs)) {}

bool LogRateLimiter::Allow(uint64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  const int64_t now = now_ms_();
  bool allow = false;
  if (burst_used_ < burst_lines_) {
    ++burst_used_;
    allow = true;
    // The steady rate starts after the burst.
    if (burst_used_ == burst_lines_) last_ms_ = now;
  } else if (now - last_ms_ >= interval_ms_) {
    last_ms_ = now;
    allow = true;
  }
  if (!allow) {
    ++suppressed_;
    return false;
  }
  *suppressed = suppressed_;
  suppressed_ = 0;
  return true;
}

std::string SuppressedNote(uint64_t suppressed) {
  if (suppressed == 0) return "";
  return absl::StrCat("[", suppressed, " similar lines suppressed] ");
}

}  // namespace logfs::util
