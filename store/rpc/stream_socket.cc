#include "store/rpc/stream_socket.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "store/rpc/endpoint.h"

namespace logfs::rpc {

Transport TransportOf(const StreamSocket& socket) {
  asio::error_code ec;
  const StreamEndpoint local = socket.local_endpoint(ec);
  if (ec) return Transport::kTcp;
  return local.protocol().family() == AF_UNIX ? Transport::kUnix : Transport::kTcp;
}

absl::StatusOr<StreamEndpoint> UnixEndpoint(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty Unix socket path");
  if (path.size() >= sizeof(sockaddr_un::sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("Unix socket path ", path, " is longer than ",
                                                   sizeof(sockaddr_un::sun_path) - 1, " bytes"));
  }
  return StreamEndpoint(asio::local::stream_protocol::endpoint(path));
}

PeerName PeerNameOf(StreamSocket& socket) {
  PeerName peer{"?", "?"};
  asio::error_code ec;
  const StreamEndpoint remote = socket.remote_endpoint(ec);
  if (ec) return peer;
  const int family = remote.protocol().family();
  if (family == AF_UNIX) {
    ucred cred{};
    socklen_t size = sizeof(cred);
    if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) {
      return PeerName{"unix", "unix"};
    }
    peer.ip = absl::StrCat("unix pid ", cred.pid);
    peer.name = absl::StrCat(peer.ip, " uid ", cred.uid);
    return peer;
  }
  if (family != AF_INET && family != AF_INET6) return peer;
  asio::ip::tcp::endpoint tcp;
  if (remote.size() > tcp.capacity()) return peer;
  std::memcpy(tcp.data(), remote.data(), remote.size());
  tcp.resize(remote.size());
  peer.ip = tcp.address().to_string();
  peer.name = FormatEndpoint(tcp);
  return peer;
}

}  // namespace logfs::rpc
