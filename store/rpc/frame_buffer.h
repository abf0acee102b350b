// The read buffer of an RPC connection's FrameReader
// (store/rpc/frame_reader.h): one read of up to kFrameBufferBytes usually brings a
// whole small frame, header and body, and sometimes several, so a frame
// costs one recv instead of one for its header and one for its body. A
// body larger than what is buffered is read by the caller straight into
// the frame's strings (no copy through the buffer).
//
// The bytes are allocated by the first Space(), so that a connection that
// never gets to read frames (an unauthenticated peer still in its
// handshake) holds none.
//
// Not thread-safe: owned by one connection's read loop.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <memory>
#include <string>

#include <asio.hpp>

#include "store/format/frame.h"

namespace logfs::rpc {

inline constexpr size_t kFrameBufferBytes = 64u << 10;

class FrameBuffer {
 public:
  // The free space at the buffer's end, for the next read (never empty).
  asio::mutable_buffer Space() {
    if (bytes_ == nullptr) bytes_.reset(new char[kFrameBufferBytes]);
    if (begin_ == end_) begin_ = end_ = 0;
    if (end_ == kFrameBufferBytes) {  // move what is left to the front
      std::memmove(bytes_.get(), bytes_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    return asio::buffer(bytes_.get() + end_, kFrameBufferBytes - end_);
  }
  // Drops everything buffered (a new connection).
  void Reset() { begin_ = end_ = 0; }
  // `n` bytes were read into Space().
  void Commit(size_t n) { end_ += n; }
  size_t buffered() const { return end_ - begin_; }
  // Whether the kFrameBufferBytes are allocated (the first Space() did).
  bool allocated() const { return bytes_ != nullptr; }

  // Whether a whole next frame (header, body and `trailer_bytes` after it,
  // an authentication tag) is buffered. A header that does not decode
  // counts as no frame: the caller finds it bad when it takes it.
  bool HasWholeFrame(size_t trailer_bytes = 0) const {
    if (buffered() < format::kFrameHeaderBytes) return false;
    auto header = format::DecodeFrameHeader(bytes_.get() + begin_);
    if (!header.ok()) return false;
    return buffered() - format::kFrameHeaderBytes >=
           static_cast<size_t>(header->message_bytes) + header->data_bytes + trailer_bytes;
  }

  // Takes a whole frame header if one is buffered.
  bool TakeHeader(char header[format::kFrameHeaderBytes]) {
    if (buffered() < format::kFrameHeaderBytes) return false;
    std::memcpy(header, bytes_.get() + begin_, format::kFrameHeaderBytes);
    begin_ += format::kFrameHeaderBytes;
    return true;
  }

  // Moves buffered bytes into `message` then `data` (sized by the caller),
  // from body offset `filled`; returns the new offset.
  size_t TakeBody(std::string& message, std::string& data, size_t filled) {
    filled = Fill(message, 0, filled);
    return Fill(data, message.size(), filled);
  }

 private:
  // Fills `part`, which starts at body offset `part_start`.
  size_t Fill(std::string& part, size_t part_start, size_t filled) {
    if (filled < part_start || filled >= part_start + part.size()) return filled;
    const size_t n = std::min(buffered(), part_start + part.size() - filled);
    std::memcpy(part.data() + (filled - part_start), bytes_.get() + begin_, n);
    begin_ += n;
    return filled + n;
  }

  std::unique_ptr<char[]> bytes_;  // kFrameBufferBytes, from the first Space()
  size_t begin_ = 0;  // first unread byte
  size_t end_ = 0;    // one past the last byte read
};

// The buffers for the part of a body not yet filled: [filled, end) over
// `message` then `data`.
inline std::array<asio::mutable_buffer, 2> RemainingBody(std::string& message, std::string& data,
                                                         size_t filled) {
  const size_t in_message = std::min(filled, message.size());
  const size_t in_data = filled - in_message;
  return {asio::buffer(message.data() + in_message, message.size() - in_message),
          asio::buffer(data.data() + in_data, data.size() - in_data)};
}

}  // namespace logfs::rpc
