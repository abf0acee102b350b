#include "src/metrics/metrics_server.h"

#include <arpa/inet.h>

#include <exception>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/collectable.h"
#include "prometheus/exposer.h"
#include "src/util/version.h"

namespace logfs::metrics {

class MetricsServer::Collectable : public prometheus::Collectable {
 public:
  explicit Collectable(CollectFn collect) : collect_(std::move(collect)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    FamilyList list;
    list.AddGauge("logfs_build_info", "Always 1; the version of this logfs binary.", 1,
                  {{"version", Version()}});
    collect_(list);
    return list.Take();
  }

 private:
  const CollectFn collect_;
};

absl::Status CheckListenAddress(const std::string& listen) {
  // civetweb takes "IP:PORT" and would read "host:port" or a bare port as
  // something else (a bare port: every interface), so check the form here.
  const size_t colon = listen.rfind(':');
  in_addr ip;
  uint32_t port = 0;
  if (colon == std::string::npos || inet_pton(AF_INET, listen.substr(0, colon).c_str(), &ip) != 1 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", listen, "': want IPv4:PORT, e.g. 127.0.0.1:9500"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                                    CollectFn collect) {
  if (absl::Status checked = CheckListenAddress(listen); !checked.ok()) return checked;
  const size_t colon = listen.rfind(':');
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  server->collectable_ = std::make_shared<Collectable>(std::move(collect));
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("metrics: cannot listen on ", listen, ": ", e.what()));
  }
  server->exposer_->RegisterCollectable(server->collectable_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty())
    return absl::UnavailableError(absl::StrCat("metrics: no port bound on ", listen));
  server->bound_address_ = absl::StrCat(listen.substr(0, colon), ":", ports[0]);
  return server;
}

MetricsServer::~MetricsServer() = default;

std::string MetricsServer::Scrape() const { return Serialize(collectable_->Collect()); }

}  // namespace logfs::metrics
