// A frame waiting to be written to a socket by a FrameWriter
// (store/rpc/frame_writer.h): its encoded header, its message, its data
// section (owned or shared), on an authenticated connection its tag
// (frame_auth.h, set when the writer takes the frame to send it), and how
// much of it a partial write sent.
//
// Not thread-safe: the FrameWriter's current sender owns a queued frame.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include <asio.hpp>

#include "absl/strings/string_view.h"
#include "store/format/frame.h"

namespace logfs::rpc {

struct OutgoingFrame {
  char header[format::kFrameHeaderBytes];
  std::string message;
  // The data section: `shared_data` if set (one buffer sent to several
  // servers without a copy each), else `data`.
  std::string data;
  std::shared_ptr<const std::string> shared_data;
  char tag[format::kAuthTagBytes];
  size_t tag_bytes = 0;  // kAuthTagBytes once tagged, else 0
  bool tagged = false;   // the writer has signed it (its sequence number is taken)
  size_t sent = 0;       // bytes already written (a partial inline send)

  absl::string_view payload() const {
    return shared_data != nullptr ? absl::string_view(*shared_data) : absl::string_view(data);
  }
  size_t size() const {
    return format::kFrameHeaderBytes + message.size() + payload().size() + tag_bytes;
  }

  // The bytes not yet sent, as asio buffers.
  std::array<asio::const_buffer, 4> Remaining() const {
    absl::string_view body = payload();
    std::array<asio::const_buffer, 4> all = {
        asio::buffer(header, format::kFrameHeaderBytes), asio::buffer(message),
        asio::buffer(body.data(), body.size()), asio::buffer(tag, tag_bytes)};
    size_t skip = sent;
    for (auto& b : all) {
      size_t n = std::min(skip, b.size());
      b += n;
      skip -= n;
    }
    return all;
  }
};

}  // namespace logfs::rpc
