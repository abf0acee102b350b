#include "bench/bench_util.h"

#include <gtest/gtest.h>

namespace logfs::bench {
namespace {

TEST(SegdCountersBetweenTest, SumsTheServersThatAnsweredBothTimes) {
  // Goal: one silent server does not void the segment servers' counters:
  // the growth is summed over the servers that answered both snapshots,
  // and the count says how many of all did.
  // Method: servers 1-3 answer both times, 4 only the first time, 5
  // never; server 6 is new in the second snapshot.
  SegdSnapshot before, after;
  for (uint64_t id : {1, 2, 3, 4}) before.answered[id] = {{"appends", 10 * id}, {"fdatasyncs", id}};
  before.unanswered = {5};
  for (uint64_t id : {1, 2, 3}) {
    after.answered[id] = {{"appends", 10 * id + 100}, {"fdatasyncs", id + 5}};
  }
  after.answered[6] = {{"appends", 1000}, {"fdatasyncs", 1000}};
  after.unanswered = {4, 5};
  SegdDelta delta = SegdCountersBetween(before, after);
  EXPECT_EQ(3, delta.answered);
  EXPECT_EQ(6, delta.servers);
  EXPECT_EQ(300u, delta.sum["appends"]);
  EXPECT_EQ(15u, delta.sum["fdatasyncs"]);
}

TEST(SegdCountersBetweenTest, NoServersNoSum) {
  SegdDelta delta = SegdCountersBetween(SegdSnapshot{}, SegdSnapshot{});
  EXPECT_EQ(0, delta.answered);
  EXPECT_EQ(0, delta.servers);
  EXPECT_TRUE(delta.sum.empty());
}

}  // namespace
}  // namespace logfs::bench
