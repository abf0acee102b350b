// ReplicaSet: the acked length is the ack-quorum-th largest durable length
// of the live replicas; durable lengths never go back; failed replicas
// count for nothing.
#include "wal/replica_set.h"

#include <gtest/gtest.h>

namespace logfs::wal {
namespace {

proto::Segment SegmentOn(std::vector<uint64_t> servers) {
  proto::Segment segment;
  segment.set_id(7);
  for (uint64_t id : servers) {
    proto::Replica* r = segment.add_replicas();
    r->set_server_id(id);
    r->set_address("127.0.0.1:" + std::to_string(9000 + id));
  }
  return segment;
}

TEST(ReplicaSetTest, StartsWithNothingDurable) {
  ReplicaSet set(SegmentOn({1, 2, 3}), 2);
  ASSERT_EQ(3u, set.size());
  EXPECT_EQ(3u, set.live_count());
  EXPECT_EQ(0u, set[0].durable_length);
  EXPECT_EQ("127.0.0.1:9002", set[1].address);
  EXPECT_EQ(3u, set[2].server_id);
  EXPECT_EQ(std::optional<uint64_t>(0), set.AckedLength());
}

TEST(ReplicaSetTest, AckedLengthIsQuorumThLargest) {
  ReplicaSet set(SegmentOn({1, 2, 3}), 2);
  set.SetDurable(0, 100);
  EXPECT_EQ(std::optional<uint64_t>(0), set.AckedLength()) << "one replica is not a quorum of 2";
  set.SetDurable(2, 40);
  EXPECT_EQ(std::optional<uint64_t>(40), set.AckedLength());
  set.SetDurable(1, 70);
  EXPECT_EQ(std::optional<uint64_t>(70), set.AckedLength());
  set.SetDurable(2, 100);
  EXPECT_EQ(std::optional<uint64_t>(100), set.AckedLength());
}

TEST(ReplicaSetTest, QuorumOfOneAndOfAll) {
  ReplicaSet one(SegmentOn({1, 2, 3}), 1);
  one.SetDurable(1, 5);
  one.SetDurable(2, 9);
  EXPECT_EQ(std::optional<uint64_t>(9), one.AckedLength());
  ReplicaSet all(SegmentOn({1, 2, 3}), 3);
  all.SetDurable(0, 8);
  all.SetDurable(1, 5);
  all.SetDurable(2, 9);
  EXPECT_EQ(std::optional<uint64_t>(5), all.AckedLength());
}

TEST(ReplicaSetTest, EqualDurableLengthsCountTogether) {
  ReplicaSet set(SegmentOn({1, 2, 3}), 3);
  for (size_t i = 0; i < 3; ++i) set.SetDurable(i, 64);
  EXPECT_EQ(std::optional<uint64_t>(64), set.AckedLength());
}

TEST(ReplicaSetTest, DurableLengthNeverDecreases) {
  ReplicaSet set(SegmentOn({1, 2}), 1);
  set.SetDurable(0, 50);
  set.SetDurable(0, 20);  // an older answer arriving late
  EXPECT_EQ(50u, set[0].durable_length);
}

TEST(ReplicaSetTest, FailedReplicasCountForNothing) {
  ReplicaSet set(SegmentOn({1, 2, 3}), 2);
  set.SetDurable(0, 90);
  set.SetDurable(1, 60);
  set.SetDurable(2, 30);
  EXPECT_TRUE(set.MarkFailed(0));
  EXPECT_FALSE(set.MarkFailed(0)) << "already failed";
  EXPECT_EQ(2u, set.live_count());
  EXPECT_EQ(std::optional<uint64_t>(30), set.AckedLength());
  set.SetDurable(0, 200);  // a failed replica's late answer
  EXPECT_EQ(90u, set[0].durable_length);
  EXPECT_EQ((std::vector<size_t>{1, 2}), set.LiveIndexes());
  EXPECT_EQ((std::vector<uint64_t>{1}), set.FailedServerIds());
  EXPECT_TRUE(set.MarkFailed(2));
  EXPECT_EQ(std::nullopt, set.AckedLength()) << "fewer live replicas than the ack quorum";
}

TEST(ReplicaSetTest, DurableOnAllLiveSkipsFailedAndIsCapped) {
  ReplicaSet set(SegmentOn({1, 2, 3}), 2);
  set.SetDurable(0, 10);
  set.SetDurable(1, 40);
  set.SetDurable(2, 50);
  EXPECT_EQ(10u, set.DurableOnAllLive(100));
  set.MarkFailed(0);
  EXPECT_EQ(40u, set.DurableOnAllLive(100));
  EXPECT_EQ(25u, set.DurableOnAllLive(25));
  set.MarkFailed(1);
  set.MarkFailed(2);
  EXPECT_EQ(77u, set.DurableOnAllLive(77)) << "no live replica: the cap";
}

TEST(ReplicaSetTest, ServerIdsNotIn) {
  ReplicaSet set(SegmentOn({11, 12, 13}), 2);
  EXPECT_EQ((std::vector<uint64_t>{11, 13}), set.ServerIdsNotIn({1}));
  EXPECT_EQ((std::vector<uint64_t>{}), set.ServerIdsNotIn({2, 0, 1}));
}

TEST(ReplicaSetTest, EmptySetHasNoAckedLength) {
  ReplicaSet set;
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(std::nullopt, set.AckedLength());
}

}  // namespace
}  // namespace logfs::wal
