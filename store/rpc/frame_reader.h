// The read half of one RPC connection (RpcClient and RpcServer): turns the
// bytes of a stream into whole, checked frames (docs/wire_format.md). Each
// frame goes through the same pipeline: its header is decoded and bounded
// (format::DecodeFrameHeader), passed to the owner's HeaderCheck, its body
// filled, and its checksum verified (format::VerifyFrameChecksum).
//
// Reads go into a FrameBuffer, so one read usually brings a whole small
// frame and sometimes several; a body bigger than what is buffered is read
// straight into the frame's strings (no copy through the buffer).
//
// Usage, on the connection's strand:
//   reader.AsyncRead(socket, [](asio::error_code ec) {
//     ... on ec: close ...
//     while (auto frame = reader.Next(), frame.ok() && frame->has_value()) ...
//     ... on !frame.ok(): close ...
//     ... then AsyncRead again ...
//   });
//
// On an authenticated connection (SetMac) every frame is followed by its
// tag (frame_auth.h), checked before the frame is handed out.
//
// Not thread-safe: owned by one connection's read loop, one read at a time.
#pragma once

#include <array>
#include <asio.hpp>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/format/frame.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/frame_buffer.h"

namespace logfs::rpc {

class FrameReader {
 public:
  // Decides whether a decoded header belongs on this connection before its
  // body is read (a client wants responses, a server requests of the types
  // it serves). A non-OK status rejects the frame with that reason.
  using HeaderCheck = std::function<absl::Status(const format::FrameHeader& header)>;

  explicit FrameReader(HeaderCheck check);
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Starts one asynchronous read from `stream` into the reader: into the
  // buffer's free space (what is there), or, inside a body bigger than what
  // was buffered, the rest of that body (all of it). Commits what was read
  // and then calls `done(ec)`, on the stream's executor; bytes of a read
  // that completes after a Reset are dropped. The caller keeps the reader
  // (and `stream`) alive until `done` runs, usually by capturing its owner.
  template <typename Stream, typename Handler>
  void AsyncRead(Stream& stream, Handler done);

  // Where the next bytes of the stream go (AsyncRead reads into it), and
  // how many were put there. Exposed for tests, which feed bytes by hand.
  std::array<asio::mutable_buffer, 2> ReadSpace();
  void Commit(size_t n);

  // The next whole, checked frame, or std::nullopt when more bytes are
  // needed first (read, then call Next again). An error means the stream
  // cannot be trusted past this point and the connection must close:
  // kInvalidArgument for a bad header (magic, version, flags, sizes) or one
  // HeaderCheck rejected, kDataLoss for a checksum mismatch,
  // kUnauthenticated for a tag that does not match (a tampered, replayed,
  // reordered or foreign frame) or, from DecodeFrameHeader, a hello. After an error
  // only Reset makes the reader usable again. Frame::connection_id and the
  // more_buffered fields are left for the owner to fill.
  absl::StatusOr<std::optional<format::Frame>> Next();

  // Whether a whole later frame is buffered (Frame::more_buffered), and
  // whether any byte of one is (Frame::more_bytes_buffered).
  bool HasWholeFrame() const {
    return state_ == State::kHeader && buffer_.HasWholeFrame(tag_bytes());
  }
  bool HasBufferedBytes() const { return buffer_.buffered() > 0; }

  // Whether the reader is inside a frame's body: an end of stream now cuts
  // a frame short.
  bool in_body() const { return state_ == State::kBody; }

  // Forgets everything read (a new connection on the same reader), and the
  // connection's FrameMac if it had one.
  void Reset();

  // From now on every frame must carry a tag that `mac` accepts. Call
  // before the first frame of the connection is read (after Reset).
  void SetMac(std::unique_ptr<FrameMac> mac) { mac_ = std::move(mac); }

 private:
  enum class State { kHeader, kBody };

  // The frame in header_/message_/data_, once its body is whole.
  absl::StatusOr<std::optional<format::Frame>> Finish();
  // Bytes read for the body: message, data, then the tag if any (read
  // into data_'s tail and split off by Finish).
  size_t body_bytes() const { return message_.size() + data_.size(); }
  size_t tag_bytes() const { return mac_ != nullptr ? kAuthTagBytes : 0; }

  const HeaderCheck check_;
  FrameBuffer buffer_;
  State state_ = State::kHeader;
  uint64_t generation_ = 0;  // bumped by Reset
  char header_[format::kFrameHeaderBytes];
  format::FrameHeader decoded_;
  std::string message_;
  std::string data_;
  size_t filled_ = 0;  // body bytes in message_ then data_ (kBody)
  std::unique_ptr<FrameMac> mac_;  // null: not authenticated
};

template <typename Stream, typename Handler>
void FrameReader::AsyncRead(Stream& stream, Handler done) {
  auto on_read = [this, generation = generation_, done = std::move(done)](asio::error_code ec,
                                                                          size_t n) mutable {
    if (generation == generation_) Commit(n);
    done(ec);
  };
  if (in_body()) {
    asio::async_read(stream, ReadSpace(), std::move(on_read));
  } else {
    stream.async_read_some(ReadSpace(), std::move(on_read));
  }
}

}  // namespace logfs::rpc
