#include "wal/replica_lag.h"

#include <gtest/gtest.h>

namespace logfs::wal {
namespace {

constexpr absl::Duration kMs = absl::Milliseconds(1);

class ReplicaLagTest : public ::testing::Test {
 protected:
  ReplicaLagTest() : replicas_(Segment(), 2), lag_(3, ReplicaLagOptions{}) {}
  static proto::Segment Segment() {
    proto::Segment s;
    for (int i = 1; i <= 3; ++i) s.add_replicas()->set_server_id(i);
    return s;
  }
  // Replica `i` reports `durable` at `at` ms, as the writer feeds it.
  void Durable(size_t i, uint64_t durable, int at) {
    const absl::Time now = absl::UnixEpoch() + at * kMs;
    const uint64_t before = replicas_.AckedLength().value_or(0);
    replicas_.SetDurable(i, durable);
    lag_.OnDurable(i, durable, now);
    const uint64_t acked = replicas_.AckedLength().value_or(0);
    if (acked > before) lag_.OnQuorumAcked(acked, now, replicas_);
  }
  // Offset `n` lands on 0 and 1 at `at` ms and on 2 `late` ms later.
  void Append(uint64_t n, int at, int late) {
    Durable(0, n, at);
    Durable(1, n, at);
    Durable(2, n, at + late);
  }

  ReplicaSet replicas_;
  ReplicaLagMonitor lag_;
};

TEST_F(ReplicaLagTest, FourSlowSamplesWithinTheWindowMakeAReplicaSlow) {
  // Goal: the sample is the time from the quorum's ack to the replica's;
  // the 4th sample over 20 ms within 2 s makes it slow, not the 3rd.
  for (int i = 1; i <= 3; ++i) Append(i, i * 100, 30);
  EXPECT_EQ(30 * kMs, lag_.last_lag(2));
  EXPECT_EQ(30 * kMs, lag_.worst_lag(2));
  EXPECT_FALSE(lag_.slow().has_value());
  Append(4, 400, 21);
  ASSERT_TRUE(lag_.slow().has_value());
  EXPECT_EQ(2u, *lag_.slow());
  EXPECT_EQ(absl::ZeroDuration(), lag_.last_lag(0)) << "a quorum member never lags";
}

TEST_F(ReplicaLagTest, SlowSamplesSpreadOverMoreThanTheWindowAndShortOnesDoNot) {
  for (int i = 1; i <= 8; ++i) Append(i, i * 1000, 30);        // one a second
  for (int i = 9; i <= 30; ++i) Append(i, 9000 + i * 10, 20);  // at the threshold: not over
  EXPECT_FALSE(lag_.slow().has_value());
}

TEST_F(ReplicaLagTest, ReplicasThatAllTrailInTurnAreNotSlow) {
  // Goal: on a loaded machine every replica is late now and then; none
  // stands out, so none is slow. Method: replicas 1 and 2 take turns
  // being 30 ms late, 12 times each within 2 s; then replica 2 alone, 4
  // more times (16 vs 12: not twice as many); then 8 more (24: slow).
  for (int n = 1; n <= 24; ++n) {
    const size_t late = n % 2 == 0 ? 2 : 1;
    const size_t other = 3 - late;
    Durable(0, n, n * 40);
    Durable(other, n, n * 40);
    Durable(late, n, n * 40 + 30);
  }
  for (int n = 25; n <= 28; ++n) Append(n, n * 40, 30);
  EXPECT_FALSE(lag_.slow().has_value());
  for (int n = 29; n <= 36; ++n) Append(n, n * 40, 30);
  ASSERT_TRUE(lag_.slow().has_value()) << "24 vs 12 within 2 s: twice as many";
}

TEST_F(ReplicaLagTest, OneStallIsOneSample) {
  // Replica 2 is stopped while the quorum acks 1..20 at one moment; it
  // then catches up at once: one sample, not twenty.
  for (int n = 1; n <= 20; ++n) {
    Durable(0, n, 0);
    Durable(1, n, 0);
  }
  for (int n = 1; n <= 20; ++n) Durable(2, n, 30);
  Append(21, 40, 30);
  Append(22, 50, 30);
  EXPECT_FALSE(lag_.slow().has_value()) << "3 samples";
  Append(23, 60, 30);
  EXPECT_TRUE(lag_.slow().has_value());
}

TEST_F(ReplicaLagTest, ZeroSlowLagIsOff) {
  ReplicaLagOptions off;
  off.slow_lag = absl::ZeroDuration();
  lag_ = ReplicaLagMonitor(3, off);
  for (int i = 1; i <= 10; ++i) Append(i, i * 10, 100);
  EXPECT_FALSE(lag_.slow().has_value());
}

}  // namespace
}  // namespace logfs::wal
