// "host:port" addresses of logfs servers, as flags, meta's server table and
// the RPC client and server take them.
//
// Thread-safe: pure functions.
#pragma once

#include <string>

#include <asio.hpp>

#include "absl/status/statusor.h"

namespace logfs::rpc {

// "host:port" split and checked, no name resolved. `host` is a numeric
// IPv4 or IPv6 address (the latter may come in brackets, "[::1]:7000";
// `host` holds it without them), "localhost" (as 127.0.0.1), or a DNS name
// (RFC 1123: labels of letters, digits and '-', not starting or ending
// with '-', joined by dots; at most 253 bytes), which `numeric` is false
// for; the port is 0..65535. kInvalidArgument with the reason otherwise.
struct HostPort {
  std::string host;
  uint16_t port = 0;
  bool numeric = true;  // host is an IP address (asio::ip::make_address parses it)
};
absl::StatusOr<HostPort> SplitHostPort(const std::string& address);

// Parses "host:port" into an endpoint: SplitHostPort with a numeric host
// (or "localhost"), as a socket binds it. kInvalidArgument with the reason
// otherwise, also for a DNS name (nothing is resolved: what dials a name
// resolves it, RpcClient).
absl::StatusOr<asio::ip::tcp::endpoint> ParseEndpoint(const std::string& address);

// "host:port" of `endpoint` (IPv6 hosts in brackets).
std::string FormatEndpoint(const asio::ip::tcp::endpoint& endpoint);

// The address a server tells others to dial (meta's registry, the
// user.logfs.segments lines, --address_file), for a server that listens
// on `listen` and got `bound` (the same, with port 0 resolved):
//   - `advertise` "host:port": that; "host" or "host:0": host and the
//     bound port (host: a numeric address or a host name, SplitHostPort;
//     a name is resolved by whoever dials it);
//   - `advertise` empty: `bound`, unless `listen` is a wildcard
//     (0.0.0.0, [::]), which nobody can dial.
// kInvalidArgument for a wildcard listen without `advertise`, a wildcard
// or malformed `advertise`, with a message that names --advertise.
absl::StatusOr<std::string> AdvertisedAddress(const std::string& listen, const std::string& bound,
                                              const std::string& advertise);

}  // namespace logfs::rpc
