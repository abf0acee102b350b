// Frame codec: round trip, and every kind of garbage header is rejected
// with a reason instead of being trusted.
#include "store/format/frame.h"

#include <gtest/gtest.h>

#include "src/util/coding.h"

namespace logfs::format {
namespace {

TEST(FrameTest, RoundTrip) {
  std::string wire = EncodeFrame(kFlagResponse, MessageType::kAppend, 42, "msg", "data!");
  ASSERT_EQ(kFrameHeaderBytes + 3 + 5, wire.size());
  auto header = DecodeFrameHeader(wire.data());
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(kFlagResponse, header->flags);
  EXPECT_EQ(static_cast<uint16_t>(MessageType::kAppend), header->type);
  EXPECT_EQ(42u, header->request_id);
  EXPECT_EQ(3u, header->message_bytes);
  EXPECT_EQ(5u, header->data_bytes);
  EXPECT_TRUE(VerifyFrameChecksum(wire.data(), *header, "msg", "data!").ok());
}

TEST(FrameTest, BadMagicIsRejected) {
  std::string wire = EncodeFrame(0, MessageType::kLookup, 1, "m", "");
  wire[0] ^= 1;
  auto header = DecodeFrameHeader(wire.data());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, header.status().code());
  EXPECT_NE(std::string::npos, header.status().message().find("magic"));
}

TEST(FrameTest, BadVersionAndFlagsAreRejected) {
  std::string wire = EncodeFrame(0, MessageType::kLookup, 1, "m", "");
  wire[4] = 9;
  EXPECT_FALSE(DecodeFrameHeader(wire.data()).ok());
  wire = EncodeFrame(0, MessageType::kLookup, 1, "m", "");
  wire[5] = static_cast<char>(0x80);
  EXPECT_FALSE(DecodeFrameHeader(wire.data()).ok());
}

TEST(FrameTest, OversizedLengthsAreRejected) {
  std::string wire = EncodeFrame(0, MessageType::kAppend, 1, "", "");
  util::EncodeFixed32(&wire[16], kMaxMessageBytes + 1);
  EXPECT_NE(std::string::npos,
            DecodeFrameHeader(wire.data()).status().message().find("oversized"));
  wire = EncodeFrame(0, MessageType::kAppend, 1, "", "");
  util::EncodeFixed32(&wire[20], 0xffffffffu);
  EXPECT_FALSE(DecodeFrameHeader(wire.data()).ok());
}

TEST(FrameTest, FlippedBodyByteFailsChecksum) {
  std::string wire = EncodeFrame(0, MessageType::kAppend, 7, "abc", "payload");
  auto header = DecodeFrameHeader(wire.data());
  ASSERT_TRUE(header.ok());
  auto status = VerifyFrameChecksum(wire.data(), *header, "abc", "paXload");
  EXPECT_EQ(absl::StatusCode::kDataLoss, status.code());
  // A flipped request id is covered by the checksum too.
  std::string changed = wire;
  changed[8] ^= 1;
  auto h2 = DecodeFrameHeader(changed.data());
  ASSERT_TRUE(h2.ok());
  EXPECT_FALSE(VerifyFrameChecksum(changed.data(), *h2, "abc", "payload").ok());
}

}  // namespace
}  // namespace logfs::format
