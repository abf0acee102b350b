#include "bench/meta_phase_summary.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace logfs::bench {
namespace {

WorkerReport Report(uint64_t ops, int64_t start_ns, int64_t end_ns,
                    std::vector<uint64_t> latency_ns) {
  WorkerReport report;
  report.ops = ops;
  report.start_ns = start_ns;
  report.end_ns = end_ns;
  report.latency_ns = std::move(latency_ns);
  return report;
}

TEST(MetaPhaseSummaryTest, WallClockSpansFirstStartToLastEnd) {
  // Goal: ops/s is the total over the workers divided by the phase's wall
  // clock (earliest start to latest end), not a sum of per-worker rates,
  // and the percentiles pool every worker's samples.
  // Method: two workers overlap in [1 s, 3 s]; 100 samples 1..100 µs.
  std::vector<uint64_t> first, second;
  for (uint64_t i = 1; i <= 50; ++i) first.push_back(i * 1000);
  for (uint64_t i = 51; i <= 100; ++i) second.push_back(i * 1000);
  auto summary = SummarizePhase(
      MetaPhase::kRename, {Report(50, 1'000'000'000, 2'000'000'000, first),
                           Report(50, 1'500'000'000, 3'000'000'000, second)});
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(100u, summary->ops);
  EXPECT_DOUBLE_EQ(2.0, summary->seconds);
  EXPECT_DOUBLE_EQ(50.0, summary->ops_per_second);
  EXPECT_EQ(50'000u, summary->p50_ns);
  EXPECT_EQ(99'000u, summary->p99_ns);
  EXPECT_EQ(100u, summary->samples);
  EXPECT_EQ("phase=rename ops=100 seconds=2.000000 ops_per_s=50 p50_ns=50000 p99_ns=99000\n",
            FormatPhaseLine(*summary));
  EXPECT_EQ(
      "| phase | ops | seconds | ops/s | p50 (µs) | p99 (µs) |\n"
      "|---|--:|--:|--:|--:|--:|\n"
      "| rename | 100 | 2.0000 | 50 | 50.0 | 99.0 |\n",
      FormatPhaseTable({*summary}));
}

TEST(MetaPhaseSummaryTest, NoReportsOrAFailedOneIsRefused) {
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            SummarizePhase(MetaPhase::kStat, {}).status().code());
  WorkerReport failed = Report(1, 0, 1, {1});
  failed.error = absl::NotFoundError("gone");
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            SummarizePhase(MetaPhase::kStat, {failed}).status().code());
}

TEST(MetaPhaseSummaryTest, ZeroSecondsGivesZeroRateNotInfinity) {
  auto summary = SummarizePhase(MetaPhase::kCreate, {Report(0, 5, 5, {})});
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(0.0, summary->ops_per_second);
  EXPECT_EQ(0u, summary->p50_ns);
}

TEST(MetaPhaseSummaryTest, PhasesHaveTheirNamesInOrder) {
  std::string names;
  for (MetaPhase phase : kMetaPhases) names += std::string(MetaPhaseName(phase)) + " ";
  EXPECT_EQ("create stat readdir rename unlink ", names);
}

}  // namespace
}  // namespace logfs::bench
