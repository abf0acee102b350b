#include "store/rpc/frame_buffer.h"

#include <gtest/gtest.h>

#include <string>

namespace logfs::rpc {
namespace {

// Copies `bytes` into the buffer as reads would, `step` at a time.
void Feed(FrameBuffer& buffer, const std::string& bytes) {
  asio::mutable_buffer space = buffer.Space();
  ASSERT_GE(space.size(), bytes.size());
  std::memcpy(space.data(), bytes.data(), bytes.size());
  buffer.Commit(bytes.size());
}

TEST(FrameBufferTest, AllocatesItsBytesOnlyForTheFirstRead) {
  // Goal: a connection whose reader never reads (a peer still in its
  // authentication handshake) holds no kFrameBufferBytes.
  FrameBuffer buffer;
  EXPECT_FALSE(buffer.allocated());
  EXPECT_FALSE(buffer.HasWholeFrame());
  char header[format::kFrameHeaderBytes];
  EXPECT_FALSE(buffer.TakeHeader(header));
  buffer.Reset();
  EXPECT_FALSE(buffer.allocated());
  EXPECT_EQ(kFrameBufferBytes, buffer.Space().size());
  EXPECT_TRUE(buffer.allocated());
}

TEST(FrameBufferTest, SplitsBufferedBytesIntoHeaderMessageAndData) {
  const std::string frame =
      format::EncodeFrame(0, format::MessageType::kAppend, 7, "message", "data bytes");
  FrameBuffer buffer;
  Feed(buffer, frame + frame.substr(0, 10));  // a frame and the start of the next
  char header[format::kFrameHeaderBytes];
  ASSERT_TRUE(buffer.TakeHeader(header));
  auto decoded = format::DecodeFrameHeader(header);
  ASSERT_TRUE(decoded.ok());
  std::string message(decoded->message_bytes, '\0'), data(decoded->data_bytes, '\0');
  EXPECT_EQ(message.size() + data.size(), buffer.TakeBody(message, data, 0));
  EXPECT_EQ("message", message);
  EXPECT_EQ("data bytes", data);
  EXPECT_TRUE(format::VerifyFrameChecksum(header, *decoded, message, data).ok());
  EXPECT_EQ(10u, buffer.buffered());
  EXPECT_FALSE(buffer.TakeHeader(header));  // only 10 of 28 header bytes
  Feed(buffer, frame.substr(10));
  EXPECT_TRUE(buffer.TakeHeader(header));
}

TEST(FrameBufferTest, PartialBodyLeavesTheRestForADirectRead) {
  const std::string data(100000, 'd');  // bigger than the buffer holds at once
  const std::string frame = format::EncodeFrame(0, format::MessageType::kAppend, 1, "msg", data);
  FrameBuffer buffer;
  Feed(buffer, frame.substr(0, 1000));
  char header[format::kFrameHeaderBytes];
  ASSERT_TRUE(buffer.TakeHeader(header));
  std::string message(3, '\0'), body(data.size(), '\0');
  const size_t filled = buffer.TakeBody(message, body, 0);
  EXPECT_EQ(1000u - format::kFrameHeaderBytes, filled);
  EXPECT_EQ("msg", message);
  EXPECT_EQ(0u, buffer.buffered());
  auto rest = RemainingBody(message, body, filled);
  EXPECT_EQ(0u, rest[0].size());
  EXPECT_EQ(body.size() - (filled - 3), rest[1].size());
  EXPECT_EQ(body.data() + (filled - 3), rest[1].data());
}

TEST(FrameBufferTest, SpaceMovesUnreadBytesToTheFrontWhenFull) {
  FrameBuffer buffer;
  const std::string filler(kFrameBufferBytes - 5, 'x');
  Feed(buffer, filler + "abcde");
  char header[format::kFrameHeaderBytes];
  // Consume all but the last 5 bytes.
  std::string message(kFrameBufferBytes - 5 - format::kFrameHeaderBytes, '\0'), data;
  ASSERT_TRUE(buffer.TakeHeader(header));
  buffer.TakeBody(message, data, 0);
  EXPECT_EQ(5u, buffer.buffered());
  asio::mutable_buffer space = buffer.Space();
  EXPECT_EQ(kFrameBufferBytes - 5, space.size());
  std::string last(5, '\0');
  buffer.TakeBody(last, data, 0);
  EXPECT_EQ("abcde", last);
}

}  // namespace
}  // namespace logfs::rpc
