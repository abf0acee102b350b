// Serves GET /metrics (Prometheus text format 0.0.4) on one HOST:PORT for
// the life of the object, with prometheus-cpp's pull Exposer (an embedded
// civetweb). Each scrape calls `collect` on one of the exposer's threads,
// adds logfs_build_info{version} = 1, and serializes the families
// (Content-Type "text/plain; charset=utf-8", which Prometheus reads as the
// text format 0.0.4). civetweb answers a malformed request with 400, other
// methods and paths with 404 (src/metrics/metrics_test.cc). The exposer also exports its own three
// families (exposer_transferred_bytes_total, exposer_scrapes_total and the summary
// exposer_request_latencies); they cannot be turned off in 1.0.1.
//
// Why the Exposer and not our own Asio acceptor: it is packaged (Debian 12
// prometheus-cpp 1.0.1, libprometheus-cpp-pull), handles HTTP/1.1, keep-alive
// and bad requests, and costs us no HTTP parsing code. It throws on a bind
// failure: Start catches that at this one boundary (STYLE §4).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "src/metrics/family_list.h"

namespace prometheus {
class Exposer;
}

namespace logfs::metrics {

// OK if `listen` is "IPv4:PORT" (what Start takes), else kInvalidArgument
// saying what is wanted.
absl::Status CheckListenAddress(const std::string& listen);

class MetricsServer {
 public:
  // Fills one scrape's families; called concurrently from the exposer's
  // two threads, so it must be thread-safe and must not block for long. It
  // must stay callable until the MetricsServer is destroyed.
  using CollectFn = std::function<void(FamilyList&)>;

  // Listens on `listen` ("IP:PORT", a numeric IPv4 address; port 0 picks a
  // free port). Errors: kInvalidArgument for a malformed address,
  // kUnavailable if it cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              CollectFn collect);
  // Stops serving; returns once no scrape runs (joins the exposer's threads).
  ~MetricsServer();

  // "IP:PORT" with the port bound.
  const std::string& bound_address() const { return bound_address_; }

  // One scrape's text, as /metrics serves it (tests, `logfs` tools).
  std::string Scrape() const;

 private:
  class Collectable;
  MetricsServer() = default;

  std::shared_ptr<Collectable> collectable_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string bound_address_;
};

}  // namespace logfs::metrics
