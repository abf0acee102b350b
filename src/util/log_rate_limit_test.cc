#include "src/util/log_rate_limit.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace logfs::util {
namespace {

TEST(LogRateLimiterTest, BurstThenOneLinePerIntervalWithSuppressedCount) {
  // Goal: a site logs its burst, then one line per interval, and the line
  // after a quiet stretch says how many were dropped. Method: a fake clock.
  int64_t now = 1000;
  LogRateLimiter limiter(100, 3, [&] { return now; });
  uint64_t suppressed = 99;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(limiter.Allow(&suppressed)) << i;
    EXPECT_EQ(0u, suppressed);
  }
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(limiter.Allow(&suppressed)) << i;
  now += 99;
  EXPECT_FALSE(limiter.Allow(&suppressed));
  now += 1;
  ASSERT_TRUE(limiter.Allow(&suppressed));
  EXPECT_EQ(51u, suppressed);
  EXPECT_FALSE(limiter.Allow(&suppressed));
  now += 1000;
  ASSERT_TRUE(limiter.Allow(&suppressed));
  EXPECT_EQ(1u, suppressed);
  EXPECT_EQ("", SuppressedNote(0));
  EXPECT_EQ("[7 similar lines suppressed] ", SuppressedNote(7));
}

TEST(LogRateLimiterTest, ManyThreadsShareOneSiteBudget) {
  // Goal: the limit holds across threads (one site, one budget).
  LogRateLimiter limiter(1000000, 4);
  std::atomic<int> allowed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      uint64_t suppressed = 0;
      for (int i = 0; i < 1000; ++i) allowed += limiter.Allow(&suppressed) ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(4, allowed.load());
}

TEST(LogRateLimiterTest, MacroLogsAtMostTheBurstInATightLoop) {
  // Goal: the macro is one statement (safe under an unbraced if) with one
  // limiter per call site.
  int evaluated = 0;
  for (int i = 0; i < 1000; ++i) {
    if (i >= 0) LOGFS_LOG_EVERY_MS(INFO, 3600 * 1000) << "line " << ++evaluated;
  }
  EXPECT_EQ(kLogBurstLines, evaluated);
}

}  // namespace
}  // namespace logfs::util
