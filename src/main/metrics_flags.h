// --metrics_listen and --metrics_address_file (src/main/metrics_flags.cc),
// shared by meta, segd and mount.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/metrics/metrics_server.h"

namespace logfs::main {

// Serves /metrics on --metrics_listen with `collect` (null when the flag is
// empty), logs the bound address and writes it to --metrics_address_file
// if set. Errors: a bad address (kInvalidArgument), one that cannot be
// bound, an address file that cannot be written.
absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsServer(
    const char* what, metrics::MetricsServer::CollectFn collect);

// The flags that make a child server (the embedded cluster's) serve
// metrics on --metrics_listen's host, port 0, its address in
// `address_file`; empty when --metrics_listen is empty.
std::vector<std::string> ChildMetricsFlags(const std::string& address_file);

}  // namespace logfs::main
