#include "tests/fault_row.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"

namespace logfs::testing {

int TrialSeconds() {
  const char* env = std::getenv("LOGFS_FAULT_SECONDS");
  int s = 0;
  return env != nullptr && absl::SimpleAtoi(env, &s) && s > 0 ? s : 3;
}

FaultRow RowOf(const std::string& name, const bench::WriteReport& written,
               const bench::VerifyReport& verified) {
  FaultRow row;
  row.name = name;
  row.acked_bytes = verified.acked_bytes;
  row.acked_bytes_lost = verified.acked_bytes_lost;
  row.longest_fsync = written.longest_fsync;
  row.write_errors = written.write_errors;
  row.shrinks = written.shrinks_seen;
  return row;
}

void PrintFaultRow(const FaultRow& row) {
  std::printf(
      "fault=%s acked_bytes=%lu acked_bytes_lost=%lu longest_fsync_ms=%.0f write_errors=%lu "
      "shrinks=%lu seconds_to_full_replication=%.1f%s\n",
      row.name.c_str(), static_cast<unsigned long>(row.acked_bytes),
      static_cast<unsigned long>(row.acked_bytes_lost),
      absl::ToDoubleMilliseconds(row.longest_fsync), static_cast<unsigned long>(row.write_errors),
      static_cast<unsigned long>(row.shrinks), row.seconds_to_full_replication, row.extra.c_str());
  std::fflush(stdout);
}

void ExpectDurable(const bench::WriteReport& written, const bench::VerifyReport& verified) {
  for (const auto& p : verified.problems) ADD_FAILURE() << p;
  EXPECT_GT(verified.acked_bytes, 0u);
  EXPECT_EQ(0u, verified.acked_bytes_lost);
  EXPECT_EQ(0u, verified.damaged_records);
  EXPECT_EQ(0u, verified.garbage_then_records);
  EXPECT_EQ(0u, written.shrinks_seen);
}

}  // namespace logfs::testing
