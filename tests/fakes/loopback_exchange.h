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

// The body of GET /metrics from 127.0.0.1:`port`, "" unless the answer was
// 200.
std::string ScrapeMetrics(int port);

// The value of the sample in the Prometheus text `text` whose name and
// labels are exactly `series` (e.g. `logfs_x_total{op="read"}`); -1 if
// absent.
double MetricSample(const std::string& text, const std::string& series);

// The port in an "IP:PORT" file such as a server's --metrics_address_file
// (written once it serves); 0 if the file is missing or holds no port.
int PortInAddressFile(const std::string& path);

}  // namespace logfs::testing
