// AppendTail: bytes move from buffered to sent to acked; the tail keeps
// sent bytes until they are acked and durable everywhere; a roll re-sends
// from an offset; the invariants (acked <= sent <= length, acked never
// decreases) hold, and breaking them is a CHECK failure.
#include "wal/append_tail.h"

#include <gtest/gtest.h>

namespace logfs::wal {
namespace {

// Sends everything buffered as one chunk; returns its segment offset.
uint64_t SendAll(AppendTail& tail) {
  std::string chunk = tail.TakeBuffered();
  return tail.MarkSent(chunk);
}

TEST(AppendTailTest, ExistingFileIsAllAcked) {
  AppendTail tail(1000);
  EXPECT_EQ(1000u, tail.length());
  EXPECT_EQ(1000u, tail.acked());
  EXPECT_EQ(1000u, tail.segment_start());
  EXPECT_EQ(0u, tail.unacked());
  EXPECT_FALSE(tail.awaiting_acks());
}

TEST(AppendTailTest, BufferedSentAcked) {
  AppendTail tail(100);
  tail.Buffer("hello");
  EXPECT_EQ(105u, tail.length());
  EXPECT_EQ(5u, tail.buffered());
  EXPECT_EQ(5u, tail.segment_used());
  EXPECT_EQ(0u, SendAll(tail));
  tail.Buffer("world");
  EXPECT_EQ(5u, SendAll(tail)) << "the second chunk goes after the first";
  EXPECT_EQ(10u, tail.sent());
  EXPECT_EQ(0u, tail.buffered());
  EXPECT_TRUE(tail.awaiting_acks());
  tail.Ack(107);
  EXPECT_EQ(107u, tail.acked());
  EXPECT_EQ(7u, tail.acked_in_segment());
  EXPECT_EQ(3u, tail.unacked());
  tail.Ack(103);  // an older answer
  EXPECT_EQ(107u, tail.acked()) << "acked never decreases";
  tail.Ack(110);
  EXPECT_FALSE(tail.awaiting_acks());
}

TEST(AppendTailTest, TrimKeepsWhatIsNotAckedAndDurableEverywhere) {
  AppendTail tail;
  tail.Buffer("0123456789");
  SendAll(tail);
  EXPECT_EQ(10u, tail.tail_bytes());
  tail.Trim(8);  // durable on every live replica, but not acked
  EXPECT_EQ(0u, tail.tail_start());
  tail.Ack(6);
  tail.Trim(8);
  EXPECT_EQ(6u, tail.tail_start()) << "only up to the acked length";
  EXPECT_EQ("6789", tail.TailBytes(6, 10));
  tail.Ack(10);
  tail.Trim(4);  // a replica behind: nothing more goes
  EXPECT_EQ(6u, tail.tail_start());
  tail.Trim(10);
  EXPECT_EQ(0u, tail.tail_bytes());
}

TEST(AppendTailTest, ResendFromPutsTheRestBeforeTheBuffer) {
  AppendTail tail(50);
  tail.Buffer("abcdef");
  SendAll(tail);
  tail.Buffer("XY");  // accepted during the recovery, not sent
  tail.Ack(52);
  tail.Trim(2);
  // Sealed at 4: "ef" goes to the next segment, ahead of "XY".
  tail.ResendFrom(4);
  EXPECT_EQ(4u, tail.sent());
  EXPECT_EQ(58u, tail.length()) << "no byte is lost or doubled";
  tail.EndSegment();
  EXPECT_EQ(54u, tail.segment_start());
  EXPECT_EQ(0u, tail.sent());
  EXPECT_EQ(0u, tail.tail_bytes());
  EXPECT_EQ("efXY", tail.TakeBuffered());
}

TEST(AppendTailTest, EndSegmentAfterEverythingIsAcked) {
  AppendTail tail;
  tail.Buffer("abc");
  SendAll(tail);
  tail.Ack(3);
  tail.EndSegment();
  EXPECT_EQ(3u, tail.segment_start());
  EXPECT_EQ(3u, tail.length());
  EXPECT_EQ(0u, tail.acked_in_segment());
  tail.Buffer("d");
  EXPECT_EQ(0u, SendAll(tail)) << "the next segment starts at its own offset 0";
  tail.Ack(4);
  EXPECT_EQ(1u, tail.acked_in_segment());
}

TEST(AppendTailTest, ClearEmptiesTheFile) {
  AppendTail tail(10);
  tail.Buffer("abc");
  SendAll(tail);
  tail.Buffer("d");
  tail.Clear();
  EXPECT_EQ(0u, tail.length());
  EXPECT_EQ(0u, tail.acked());
  EXPECT_EQ(0u, tail.segment_start());
  EXPECT_EQ(0u, tail.tail_bytes());
}

TEST(AppendTailDeathTest, AckPastTheSentBytesIsABug) {
  AppendTail tail;
  tail.Buffer("abc");
  SendAll(tail);
  EXPECT_DEATH(tail.Ack(4), "acked length past the bytes sent");
}

TEST(AppendTailDeathTest, ResendOfTrimmedBytesIsABug) {
  AppendTail tail;
  tail.Buffer("abcdef");
  SendAll(tail);
  tail.Ack(4);
  tail.Trim(4);
  EXPECT_DEATH(tail.ResendFrom(2), "the tail lost bytes");
}

TEST(AppendTailDeathTest, SealBeforeTheAckedLengthIsABug) {
  AppendTail tail;
  tail.Buffer("abcdef");
  SendAll(tail);
  tail.Ack(5);
  EXPECT_DEATH(tail.ResendFrom(5 - 1), "acked bytes past the end of the segment");
}

}  // namespace
}  // namespace logfs::wal
