// A raw TCP exchange with a server on loopback, for tests that speak a
// protocol by hand (the /metrics HTTP server; garbage requests). It lives
// beside the fakes so that unit tests, which may include only tests/fakes/,
// can use it too.
//
// Thread-safe: no state.
#pragma once

#include <cstddef>
#include <string>

namespace logfs::testing {

// Connects to 127.0.0.1:`port`, writes `request`, closes its sending side
// and returns what the server sends until it closes, at most `max_bytes`;
// each read waits at most 2 s. "" if the connect or the write fails.
std::string ExchangeOverLoopback(int port, const std::string& request,
                                 size_t max_bytes = 16u << 20);

}  // namespace logfs::testing
