// The one socket type RPC connections use (FrameWriter, the handshake,
// RpcClient, RpcServer): a stream socket of any family, so the same
// frames, handshake, limits and timeouts run over TCP between hosts and
// over a Unix stream socket to a server on the same host (DESIGN §6). A
// connected asio::ip::tcp::socket or asio::local::stream_protocol::socket
// converts to it by move construction.
//
// Thread-safe: the functions are pure or only read the socket's
// descriptor; the socket itself is not thread-safe (asio's rules).
#pragma once

#include <asio.hpp>
#include <string>

#include "absl/status/statusor.h"

namespace logfs::rpc {

using StreamSocket = asio::generic::stream_protocol::socket;
using StreamEndpoint = asio::generic::stream_protocol::endpoint;
using StreamAcceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;

// The transports a connection can run on.
enum class Transport { kTcp, kUnix };

// Which transport an open socket runs on: kUnix for AF_UNIX, kTcp for
// anything else (AF_INET, AF_INET6). A closed socket counts as kTcp.
Transport TransportOf(const StreamSocket& socket);

// The endpoint of the Unix stream socket at `path`. kInvalidArgument if
// `path` is empty or does not fit a sockaddr_un (107 bytes).
absl::StatusOr<StreamEndpoint> UnixEndpoint(const std::string& path);

// Who is at the other end, for logs and per-peer limits: "ip:port" on
// TCP with `ip` set to the address alone; on a Unix socket "unix pid P
// uid U" (SO_PEERCRED) with `ip` "unix pid P", so that the per-peer cap
// on handshakes counts processes. "?" for both if the socket cannot say.
struct PeerName {
  std::string name;
  std::string ip;
};
PeerName PeerNameOf(StreamSocket& socket);

}  // namespace logfs::rpc
