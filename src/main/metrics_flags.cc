#include "src/main/metrics_flags.h"

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <vector>

#include "src/env/posix_file.h"

DEFINE_string(metrics_listen, "",
              "meta, segd and mount: serve Prometheus metrics (GET /metrics) on this IPv4:PORT, "
              "e.g. 127.0.0.1:9500 (port 0 picks a free one; empty: off). A mount's embedded "
              "cluster then serves them too, on the same host with free ports, written to "
              "DATA_DIR/meta.metrics_address and DATA_DIR/segdN.metrics_address");
DEFINE_string(metrics_address_file, "",
              "meta, segd and mount: with --metrics_listen, write the bound IP:PORT here");

namespace logfs::main {
namespace {

// Refused at parse time, before a server creates anything (gflags itself
// would only say "failed validation").
bool ValidMetricsListen(const char*, const std::string& value) {
  if (value.empty()) return true;
  const absl::Status checked = metrics::CheckListenAddress(value);
  if (!checked.ok())
    std::fprintf(stderr, "logfs: --metrics_listen: %s\n", std::string(checked.message()).c_str());
  return checked.ok();
}
DEFINE_validator(metrics_listen, &ValidMetricsListen);

}  // namespace

absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> StartMetricsServer(
    const char* what, metrics::MetricsServer::CollectFn collect) {
  if (FLAGS_metrics_listen.empty()) return nullptr;
  auto server = metrics::MetricsServer::Start(FLAGS_metrics_listen, std::move(collect));
  if (!server.ok()) return server.status();
  LOG(INFO) << "logfs " << what << " serving metrics on http://" << (*server)->bound_address()
            << "/metrics";
  if (!FLAGS_metrics_address_file.empty()) {
    absl::Status written =
        env::WriteFileAtomically(FLAGS_metrics_address_file, (*server)->bound_address());
    if (!written.ok()) return written;
  }
  return server;
}

std::vector<std::string> ChildMetricsFlags(const std::string& address_file) {
  if (FLAGS_metrics_listen.empty()) return {};
  const std::string host = FLAGS_metrics_listen.substr(0, FLAGS_metrics_listen.rfind(':'));
  return {"--metrics_listen=" + host + ":0", "--metrics_address_file=" + address_file};
}

}  // namespace logfs::main
