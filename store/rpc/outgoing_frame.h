// A frame waiting to be written to a socket, and the gathered write that
// sends queued frames from the caller's thread when the socket is idle: a
// reply or a request then costs no wake-up of an io thread (the HBase RPC
// lesson: do not hand every call to another thread). Used by RpcServer and
// RpcClient.
//
// Not thread-safe: the owner serializes writers (its `writing_` flag).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <array>
#include <cerrno>
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
  size_t sent = 0;  // bytes already written (a partial inline send)

  absl::string_view payload() const {
    return shared_data != nullptr ? absl::string_view(*shared_data) : absl::string_view(data);
  }
  size_t size() const { return format::kFrameHeaderBytes + message.size() + payload().size(); }

  // The bytes not yet sent, as asio buffers.
  std::array<asio::const_buffer, 3> Remaining() const {
    absl::string_view body = payload();
    std::array<asio::const_buffer, 3> all = {asio::buffer(header, format::kFrameHeaderBytes),
                                             asio::buffer(message),
                                             asio::buffer(body.data(), body.size())};
    size_t skip = sent;
    for (auto& b : all) {
      size_t n = std::min(skip, b.size());
      b += n;
      skip -= n;
    }
    return all;
  }
};

// Frames one gathered sendmsg carries at most (3 iovecs each).
inline constexpr size_t kFramesPerSend = 64;

// One non-blocking (MSG_DONTWAIT) gathered sendmsg of the frames
// [first, last), at most kFramesPerSend of them, in order and each from its
// `sent`; advances `sent` by what the socket took. Returns the bytes
// written (> 0), 0 if the socket is full (EAGAIN), or -errno of a failed
// send. `Iterator` yields std::shared_ptr<OutgoingFrame>. The caller owns
// the socket's writes and keeps `fd` open meanwhile.
template <typename Iterator>
ssize_t SendGathered(int fd, Iterator first, Iterator last) {
  struct iovec iov[3 * kFramesPerSend];
  int count = 0;
  size_t frames = 0;
  for (Iterator it = first; it != last && frames < kFramesPerSend; ++it, ++frames) {
    for (const auto& b : (*it)->Remaining()) {
      if (b.size() > 0) iov[count++] = {const_cast<void*>(b.data()), b.size()};
    }
  }
  struct msghdr msg = {};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  size_t left = static_cast<size_t>(n);
  for (Iterator it = first; left > 0; ++it) {
    OutgoingFrame& frame = **it;
    size_t take = std::min(left, frame.size() - frame.sent);
    frame.sent += take;
    left -= take;
  }
  return n;
}

}  // namespace logfs::rpc
