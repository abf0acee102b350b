// A frame waiting to be written to a socket, and the inline fast path that
// writes it from the caller's thread when the socket is idle: a reply or a
// request then costs no wake-up of an io thread (the HBase RPC lesson: do
// not hand every call to another thread). Used by RpcServer and RpcClient.
//
// Not thread-safe: the owner serializes writers (its `writing_` flag).
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include <asio.hpp>

#include "absl/strings/string_view.h"
#include "store/frame.h"

namespace logfs::store {

struct OutgoingFrame {
  char header[kFrameHeaderBytes];
  std::string message;
  // The data section: `shared_data` if set (one buffer sent to several
  // servers without a copy each), else `data`.
  std::string data;
  std::shared_ptr<const std::string> shared_data;
  size_t sent = 0;  // bytes already written (a partial inline send)

  absl::string_view payload() const {
    return shared_data != nullptr ? absl::string_view(*shared_data) : absl::string_view(data);
  }
  size_t size() const { return kFrameHeaderBytes + message.size() + payload().size(); }

  // The bytes not yet sent, as asio buffers.
  std::array<asio::const_buffer, 3> Remaining() const {
    absl::string_view body = payload();
    std::array<asio::const_buffer, 3> all = {asio::buffer(header, kFrameHeaderBytes),
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

  // Writes what the socket `fd` takes now without blocking (MSG_DONTWAIT)
  // and advances `sent`. Returns 0 (possibly still partial: EAGAIN) or the
  // errno of a failed send. The caller must keep the fd open meanwhile.
  int SendNow(int fd) {
    while (sent < size()) {
      auto rest = Remaining();
      struct iovec iov[3];
      int count = 0;
      for (const auto& b : rest) {
        if (b.size() == 0) continue;
        iov[count++] = {const_cast<void*>(b.data()), b.size()};
      }
      struct msghdr msg = {};
      msg.msg_iov = iov;
      msg.msg_iovlen = count;
      ssize_t n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        return errno;
      }
      sent += static_cast<size_t>(n);
    }
    return 0;
  }
};

}  // namespace logfs::store
