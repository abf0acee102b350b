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

}  // namespace logfs::rpc
