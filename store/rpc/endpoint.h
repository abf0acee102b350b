// "host:port" addresses of logfs servers, as flags, meta's server table and
// the RPC client and server take them.
//
// Thread-safe: pure functions.
#pragma once

#include <string>

#include <asio.hpp>

#include "absl/status/statusor.h"

namespace logfs::rpc {

// Parses "host:port" into an endpoint: a numeric IPv4 or IPv6 host (the
// latter may be in brackets, "[::1]:7000") or "localhost" (127.0.0.1), and a
// port of 0..65535. kInvalidArgument with the reason otherwise; no name is
// resolved.
absl::StatusOr<asio::ip::tcp::endpoint> ParseEndpoint(const std::string& address);

// "host:port" of `endpoint` (IPv6 hosts in brackets).
std::string FormatEndpoint(const asio::ip::tcp::endpoint& endpoint);

// The address a server tells others to dial (meta's registry, the
// user.logfs.segments lines, --address_file), for a server that listens
// on `listen` and got `bound` (the same, with port 0 resolved):
//   - `advertise` "host:port": that; "host" or "host:0": host and the
//     bound port;
//   - `advertise` empty: `bound`, unless `listen` is a wildcard
//     (0.0.0.0, [::]), which nobody can dial.
// kInvalidArgument for a wildcard listen without `advertise`, a wildcard
// or malformed `advertise`, with a message that names --advertise.
absl::StatusOr<std::string> AdvertisedAddress(const std::string& listen, const std::string& bound,
                                              const std::string& advertise);

}  // namespace logfs::rpc
