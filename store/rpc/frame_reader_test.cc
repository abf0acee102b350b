// FrameReader: the read pipeline shared by RpcClient and RpcServer. Bytes
// are fed by hand, as reads would bring them, in every split that matters:
// several frames in one read, a header or a body cut across reads, a body
// bigger than the buffer; and garbage (bad magic, bad checksum, a header
// the owner rejects) is an error, never a frame.
#include "store/rpc/frame_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "store/format/frame.h"

namespace logfs::rpc {
namespace {

FrameReader::HeaderCheck AcceptAll() {
  return [](const format::FrameHeader&) { return absl::OkStatus(); };
}

// Feeds `bytes` into the reader at most `chunk` bytes per read, calling
// Next after each read, as a read loop does; appends the frames it yields.
// Returns the first error, if any.
absl::Status Feed(FrameReader& reader, const std::string& bytes, size_t chunk,
                  std::vector<format::Frame>* frames) {
  size_t fed = 0;
  while (fed < bytes.size()) {
    std::array<asio::mutable_buffer, 2> space = reader.ReadSpace();
    size_t n = 0;
    for (const asio::mutable_buffer& b : space) {
      const size_t take = std::min({b.size(), bytes.size() - fed, chunk - n});
      if (take == 0) continue;  // an empty buffer's data() may be null
      std::memcpy(b.data(), bytes.data() + fed, take);
      fed += take;
      n += take;
    }
    EXPECT_GT(n, 0u);
    reader.Commit(n);
    for (;;) {
      auto frame = reader.Next();
      if (!frame.ok()) return frame.status();
      if (!frame->has_value()) break;
      frames->push_back(std::move(**frame));
    }
  }
  return absl::OkStatus();
}

TEST(FrameReaderTest, SeveralFramesInOneRead) {
  const std::string wire =
      format::EncodeFrame(0, format::MessageType::kAppend, 1, "first", "data one") +
      format::EncodeFrame(format::kFlagResponse, format::MessageType::kSeal, 2, "second", "") +
      format::EncodeFrame(0, format::MessageType::kRead, 3, "", "");
  FrameReader reader(AcceptAll());
  std::array<asio::mutable_buffer, 2> space = reader.ReadSpace();
  ASSERT_GE(space[0].size(), wire.size());
  std::memcpy(space[0].data(), wire.data(), wire.size());
  reader.Commit(wire.size());

  auto first = reader.Next();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ(1u, (*first)->request_id);
  EXPECT_EQ(format::MessageType::kAppend, (*first)->type);
  EXPECT_EQ("first", (*first)->message);
  EXPECT_EQ("data one", (*first)->data);
  EXPECT_TRUE(reader.HasWholeFrame());  // the two others came in the same read
  EXPECT_TRUE(reader.HasBufferedBytes());

  auto second = reader.Next();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(2u, (*second)->request_id);
  EXPECT_EQ(format::kFlagResponse, (*second)->flags);
  EXPECT_EQ(format::MessageType::kSeal, (*second)->type);
  EXPECT_EQ("second", (*second)->message);

  auto third = reader.Next();
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ(3u, (*third)->request_id);
  EXPECT_FALSE(reader.HasWholeFrame());
  EXPECT_FALSE(reader.HasBufferedBytes());

  auto none = reader.Next();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(FrameReaderTest, HeaderAndBodySplitAcrossReads) {
  // Every split point of two small frames, one byte per read at worst.
  const std::string wire = format::EncodeFrame(0, format::MessageType::kAppend, 7, "msg", "body") +
                           format::EncodeFrame(0, format::MessageType::kAppend, 8, "m2", "b2");
  for (size_t chunk : {1, 2, 5, 27, 28, 29, 33, 64}) {
    FrameReader reader(AcceptAll());
    std::vector<format::Frame> frames;
    ASSERT_TRUE(Feed(reader, wire, chunk, &frames).ok()) << chunk;
    ASSERT_EQ(2u, frames.size()) << chunk;
    EXPECT_EQ(7u, frames[0].request_id);
    EXPECT_EQ("msg", frames[0].message);
    EXPECT_EQ("body", frames[0].data);
    EXPECT_EQ(8u, frames[1].request_id);
    EXPECT_EQ("m2", frames[1].message);
    EXPECT_EQ("b2", frames[1].data);
  }
}

TEST(FrameReaderTest, BodyBiggerThanTheBufferIsReadStraightIntoTheFrame) {
  // A 1 MiB append: once its header is taken, the rest of the body goes
  // into the frame (ReadSpace points into it), in reads of any size; the
  // frame after it is read through the buffer again.
  std::string data(1u << 20, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  const std::string wire = format::EncodeFrame(0, format::MessageType::kAppend, 1, "m", data) +
                           format::EncodeFrame(0, format::MessageType::kAppend, 2, "after", "");
  FrameReader reader(AcceptAll());
  std::vector<format::Frame> frames;
  ASSERT_TRUE(Feed(reader, wire.substr(0, 1000), 1000, &frames).ok());
  EXPECT_TRUE(frames.empty());
  EXPECT_TRUE(reader.in_body());
  std::array<asio::mutable_buffer, 2> space = reader.ReadSpace();
  EXPECT_EQ(0u, space[0].size());  // the message is whole
  EXPECT_EQ(data.size() - (1000 - format::kFrameHeaderBytes - 1), space[1].size());

  ASSERT_TRUE(Feed(reader, wire.substr(1000), 70000, &frames).ok());
  EXPECT_FALSE(reader.in_body());
  ASSERT_EQ(2u, frames.size());
  EXPECT_EQ("m", frames[0].message);
  EXPECT_TRUE(frames[0].data == data);
  EXPECT_EQ("after", frames[1].message);
}

TEST(FrameReaderTest, BadMagicIsAnError) {
  std::string wire = format::EncodeFrame(0, format::MessageType::kAppend, 1, "msg", "data");
  wire[0] ^= 0x01;
  FrameReader reader(AcceptAll());
  std::vector<format::Frame> frames;
  absl::Status status = Feed(reader, wire, wire.size(), &frames);
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, status.code());
  EXPECT_NE(std::string::npos, status.message().find("magic")) << status;
  EXPECT_TRUE(frames.empty());
}

TEST(FrameReaderTest, BadChecksumIsAnError) {
  // A flipped bit in the data, in the message, and in a checksummed header
  // field that still decodes (the request id).
  const std::string good = format::EncodeFrame(0, format::MessageType::kAppend, 1, "msg", "data");
  for (size_t offset : {good.size() - 1, format::kFrameHeaderBytes + 1, size_t{8}}) {
    std::string wire = good;
    wire[offset] ^= 0x10;
    FrameReader reader(AcceptAll());
    std::vector<format::Frame> frames;
    absl::Status status = Feed(reader, wire, 7, &frames);
    EXPECT_EQ(absl::StatusCode::kDataLoss, status.code()) << offset << ": " << status;
    EXPECT_TRUE(frames.empty());
  }
}

TEST(FrameReaderTest, HeaderTheOwnerRejectsIsAnErrorBeforeItsBody) {
  FrameReader reader([](const format::FrameHeader& header) {
    if ((header.flags & format::kFlagResponse) != 0) return absl::OkStatus();
    return absl::InvalidArgumentError("not a response");
  });
  // The header alone is enough to reject the frame.
  const std::string wire = format::EncodeFrame(0, format::MessageType::kAppend, 1, "m", "d");
  std::vector<format::Frame> frames;
  absl::Status status = Feed(reader, wire.substr(0, format::kFrameHeaderBytes), 64, &frames);
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, status.code());
  EXPECT_EQ("not a response", status.message());
}

TEST(FrameReaderTest, ResetForgetsAPartialFrame) {
  // A reconnect: half a frame of the old connection, then a whole frame of
  // the new one.
  const std::string old_frame = format::EncodeFrame(0, format::MessageType::kAppend, 1, "old", "");
  const std::string new_frame = format::EncodeFrame(0, format::MessageType::kAppend, 2, "new", "");
  FrameReader reader(AcceptAll());
  std::vector<format::Frame> frames;
  ASSERT_TRUE(Feed(reader, old_frame.substr(0, 30), 64, &frames).ok());
  reader.Reset();
  ASSERT_TRUE(Feed(reader, new_frame, 64, &frames).ok());
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ(2u, frames[0].request_id);
  EXPECT_EQ("new", frames[0].message);
}

TEST(FrameReaderTest, AsyncReadDeliversFramesFromAStream) {
  // The read loop as RpcClient and RpcServer run it, over a socketpair: a
  // big frame (its body read straight into the frame) then a small one,
  // and the end of the stream after them.
  int fds[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
  asio::io_context io;
  asio::local::stream_protocol::socket socket(io);
  socket.assign(asio::local::stream_protocol(), fds[0]);
  const std::string data(300000, 'x');
  const std::string wire = format::EncodeFrame(0, format::MessageType::kAppend, 1, "big", data) +
                           format::EncodeFrame(0, format::MessageType::kAppend, 2, "small", "");
  std::thread writer([&] {
    size_t sent = 0;
    while (sent < wire.size()) {
      ssize_t n = ::write(fds[1], wire.data() + sent, std::min<size_t>(wire.size() - sent, 4096));
      ASSERT_GT(n, 0);
      sent += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  FrameReader reader(AcceptAll());
  std::vector<format::Frame> frames;
  asio::error_code end;
  std::function<void()> read_more = [&] {
    reader.AsyncRead(socket, [&](asio::error_code ec) {
      if (ec) {
        end = ec;
        return;
      }
      for (;;) {
        auto frame = reader.Next();
        ASSERT_TRUE(frame.ok()) << frame.status();
        if (!frame->has_value()) break;
        frames.push_back(std::move(**frame));
      }
      read_more();
    });
  };
  read_more();
  io.run_for(std::chrono::seconds(20));
  writer.join();
  EXPECT_EQ(asio::error::eof, end);
  ASSERT_EQ(2u, frames.size());
  EXPECT_EQ("big", frames[0].message);
  EXPECT_TRUE(frames[0].data == data);
  EXPECT_EQ("small", frames[1].message);
  EXPECT_FALSE(reader.in_body());
}

}  // namespace
}  // namespace logfs::rpc
