// The opening of an authenticated RPC connection (docs/wire_format.md
// "Authentication"), on a connected stream socket (TCP or Unix), before any
// frame:
//
//   client -> server  client hello (nonce_c, client id)
//   server -> client  server hello (nonce_s, server id), server proof
//   client -> server  client proof
//
// Each proof is HMAC-SHA256 under a key that HKDF derives from the secret
// with both nonces (frame_auth.h), so each side learns that the other
// knows the secret, and neither proof can be replayed on another
// connection. Both then hold one FrameMac per direction (AuthSession).
//
// Errors (all kUnauthenticated, with a message for the log and for the
// caller's failed calls): the peer sent a plain frame (it has no secret;
// the server answers that frame with an error frame saying so before it
// gives up), the peer's proof does not match (another secret), the peer
// closed during the handshake (it refused ours, or has no secret), a
// malformed hello; the server's side also fails after `timeout`.
//
// `done` runs once, on the socket's executor. The caller keeps `socket`
// alive until then (capture its owner in `done`) and runs nothing else on
// it meanwhile, unless it closes the socket, which fails the step in
// progress (kUnavailable).
#pragma once

#include <asio.hpp>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/stream_socket.h"

namespace logfs::rpc {

// How long a server waits for an accepted connection's handshake, and the
// default for how long a client waits to connect and authenticate
// (RpcClient::Options::connect_timeout).
inline constexpr absl::Duration kAuthHandshakeTimeout = absl::Seconds(10);

using HandshakeDone = std::function<void(absl::StatusOr<AuthSession> session)>;

// Whether the connection a handshake runs on is still the caller's. Runs
// on the socket's executor.
using HandshakeCurrent = std::function<bool()>;

// `peer` names the server in messages ("meta at 10.0.0.1:7000"). For a
// socket reused across connections (RpcClient): every step first asks
// `current` (null: always current) and, once it says no, ends the
// handshake with kUnavailable without touching the socket again, so that
// a step of an abandoned connection never reads or writes the next one's
// bytes. Has no timer of its own: the caller closes the socket on its
// timeout.
void AsyncClientHandshake(StreamSocket& socket, ClusterKeyPtr key, std::string peer,
                          HandshakeCurrent current, HandshakeDone done);

// `peer` names the client in messages ("10.0.0.5:41234").
void AsyncServerHandshake(StreamSocket& socket, ClusterKeyPtr key, std::string peer,
                          absl::Duration timeout, HandshakeDone done);

}  // namespace logfs::rpc
