// SyncWaiters: waiters leave in target order once the acked length passes
// their target; TakeAll empties the set; the oldest start is the deadline's.
#include "wal/sync_waiters.h"

#include <gtest/gtest.h>

#include <string>

namespace logfs::wal {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

// A callback that appends `name` and its status code to `*log`.
SyncWaiters::Callback Record(std::string name, std::vector<std::string>* log) {
  return [name, log](absl::Status s) {
    log->push_back(name + ":" + std::string(absl::StatusCodeToString(s.code())));
  };
}

void RunAll(std::vector<SyncWaiters::Callback> callbacks, absl::Status status) {
  for (auto& cb : callbacks) cb(status);
}

TEST(SyncWaitersTest, TakeReadyTakesTargetsUpToTheAckedLengthInOrder) {
  SyncWaiters waiters;
  std::vector<std::string> log;
  waiters.Add(30, kT0, Record("c", &log));
  waiters.Add(10, kT0, Record("a", &log));
  waiters.Add(20, kT0, Record("b", &log));
  waiters.Add(20, kT0, Record("b2", &log));
  RunAll(waiters.TakeReady(19), absl::OkStatus());
  EXPECT_EQ((std::vector<std::string>{"a:OK"}), log);
  RunAll(waiters.TakeReady(20), absl::OkStatus());
  EXPECT_EQ((std::vector<std::string>{"a:OK", "b:OK", "b2:OK"}), log)
      << "a target equal to the acked length is ready; equal targets keep their order";
  EXPECT_EQ(1u, waiters.size());
  EXPECT_TRUE(waiters.TakeReady(29).empty());
}

TEST(SyncWaitersTest, TakeAllFailsEveryWaiter) {
  SyncWaiters waiters;
  std::vector<std::string> log;
  waiters.Add(5, kT0, Record("a", &log));
  waiters.Add(9, kT0, Record("b", &log));
  std::vector<SyncWaiters::Callback> failed;
  waiters.TakeAll(&failed);
  EXPECT_TRUE(waiters.empty());
  RunAll(std::move(failed), absl::InternalError("x"));
  EXPECT_EQ((std::vector<std::string>{"a:INTERNAL", "b:INTERNAL"}), log);
}

TEST(SyncWaitersTest, OldestSinceIsTheEarliestStartWhateverTheTarget) {
  SyncWaiters waiters;
  EXPECT_EQ(std::nullopt, waiters.OldestSince());
  waiters.Add(100, kT0 + absl::Seconds(5), [](absl::Status) {});
  waiters.Add(200, kT0 + absl::Seconds(1), [](absl::Status) {});
  waiters.Add(50, kT0 + absl::Seconds(3), [](absl::Status) {});
  EXPECT_EQ(kT0 + absl::Seconds(1), waiters.OldestSince());
  waiters.TakeReady(100);
  EXPECT_EQ(kT0 + absl::Seconds(1), waiters.OldestSince());
  waiters.TakeReady(200);
  EXPECT_EQ(std::nullopt, waiters.OldestSince());
}

}  // namespace
}  // namespace logfs::wal
