#include "store/rpc/unix_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"

namespace logfs::rpc {
namespace {

absl::Status TransportError(int error, absl::string_view what) {
  if (error == EAGAIN || error == EWOULDBLOCK) {
    return absl::UnavailableError(absl::StrCat(what, ": timed out"));
  }
  if (error == EPIPE || error == ECONNRESET) {
    return absl::UnavailableError(absl::StrCat(what, ": peer closed the connection"));
  }
  return SyscallError(error, what);
}

// Waits until `socket` is readable or `deadline` passes.
absl::Status WaitReadable(int socket, absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::UnavailableError("unix socket: timed out");
    pollfd p{socket, POLLIN, 0};
    const int ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
    const int rc = ::poll(&p, 1, ms);
    if (rc > 0) return absl::OkStatus();
    if (rc < 0 && errno != EINTR) return SyscallError(errno, "poll unix socket");
  }
}

// Reads exactly `n` bytes into `out` by `deadline`.
absl::Status ReadFully(int socket, char* out, size_t n, absl::Time deadline) {
  while (n > 0) {
    RETURN_IF_ERROR(WaitReadable(socket, deadline));
    ssize_t got = ::recv(socket, out, n, MSG_DONTWAIT);
    if (got == 0) return absl::UnavailableError("unix socket: peer closed the connection");
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return TransportError(errno, "unix socket recv");
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SendUnixFrame(int socket, uint8_t flags, format::MessageType type, uint64_t request_id,
                           const std::string& message, const std::vector<int>& fds) {
  if (fds.size() > kUnixFrameMaxFds) return absl::InvalidArgumentError("too many descriptors");
  char header[format::kFrameHeaderBytes];
  format::EncodeFrameHeader(flags, type, request_id, message, {}, header);
  iovec iov[2] = {{header, format::kFrameHeaderBytes},
                  {const_cast<char*>(message.data()), message.size()}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kUnixFrameMaxFds)];
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = message.empty() ? 1 : 2;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  size_t left = format::kFrameHeaderBytes + message.size();
  while (true) {
    ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      return TransportError(errno, "unix socket sendmsg");
    }
    left -= static_cast<size_t>(sent);
    if (left == 0) return absl::OkStatus();
    // A short write: the descriptors went with the first byte; send the
    // rest plainly.
    msg.msg_control = nullptr;
    msg.msg_controllen = 0;
    size_t skip = static_cast<size_t>(sent);
    while (skip > 0 && msg.msg_iovlen > 0) {
      size_t n = std::min(skip, msg.msg_iov->iov_len);
      msg.msg_iov->iov_base = static_cast<char*>(msg.msg_iov->iov_base) + n;
      msg.msg_iov->iov_len -= n;
      skip -= n;
      if (msg.msg_iov->iov_len == 0) {
        ++msg.msg_iov;
        --msg.msg_iovlen;
      }
    }
  }
}

absl::StatusOr<UnixFrame> ReceiveUnixFrame(int socket, absl::Time deadline,
                                           uint32_t max_message_bytes) {
  UnixFrame out;
  char header[format::kFrameHeaderBytes];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kUnixFrameMaxFds)];
  iovec iov{header, format::kFrameHeaderBytes};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t got;
  do {
    RETURN_IF_ERROR(WaitReadable(socket, deadline));
    got = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (got < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK));
  if (got == 0) return absl::UnavailableError("unix socket: peer closed the connection");
  if (got < 0) return TransportError(errno, "unix socket recvmsg");
  // Take ownership of whatever descriptors came, before any check can fail.
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.emplace_back(fd);
    }
  }
  if (msg.msg_flags & MSG_CTRUNC) {
    return absl::InvalidArgumentError("unix frame: too many descriptors");
  }
  RETURN_IF_ERROR(ReadFully(socket, header + got,
                            format::kFrameHeaderBytes - static_cast<size_t>(got), deadline));
  ASSIGN_OR_RETURN(format::FrameHeader decoded, format::DecodeFrameHeader(header));
  if (decoded.message_bytes > max_message_bytes || decoded.data_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix frame: ", decoded.message_bytes, " message bytes and ",
                     decoded.data_bytes, " data bytes; at most ", max_message_bytes,
                     " and 0 are allowed"));
  }
  out.frame.message.resize(decoded.message_bytes);
  RETURN_IF_ERROR(ReadFully(socket, out.frame.message.data(), decoded.message_bytes, deadline));
  RETURN_IF_ERROR(format::VerifyFrameChecksum(header, decoded, out.frame.message, out.frame.data));
  out.frame.flags = decoded.flags;
  out.frame.type = static_cast<format::MessageType>(decoded.type);
  out.frame.request_id = decoded.request_id;
  return out;
}

absl::Status SetSocketTimeouts(int socket, absl::Duration timeout) {
  const timeval tv = absl::ToTimeval(timeout);
  if (::setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      ::setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return SyscallError(errno, "setsockopt SO_RCVTIMEO/SO_SNDTIMEO");
  }
  return absl::OkStatus();
}

absl::StatusOr<util::UniqueFd> ConnectUnix(const std::string& path, absl::Duration timeout) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path too long: ", path));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  util::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SyscallError(errno, "socket(AF_UNIX)");
  RETURN_IF_ERROR(SetSocketTimeouts(fd.get(), timeout));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", path, ": ", std::strerror(errno)));
  }
  return fd;
}

std::string HostBootId() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return std::string(absl::StripAsciiWhitespace(id));
}

}  // namespace logfs::rpc
