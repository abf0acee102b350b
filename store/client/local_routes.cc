#include "store/client/local_routes.h"

#include <glog/logging.h>

#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/unix_socket.h"

namespace logfs::client {

LocalRoutes::LocalRoutes(rpc::ClientPool& pool, Options options)
    : pool_(pool),
      host_id_(options.host_id.empty() ? rpc::HostBootId() : std::move(options.host_id)),
      retry_after_(options.retry_after) {
  CHECK_GT(retry_after_, absl::ZeroDuration());
}

void LocalRoutes::Learn(const std::string& address, absl::Duration timeout) {
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = routes_.try_emplace(address);
    if (!inserted) {
      // Another caller asks: wait for its answer, so that this caller's
      // call does not open the pool's connection over TCP meanwhile.
      mu_.Await(absl::Condition(
          +[](Route* route) { return route->state != State::kAsking; }, &it->second));
      if (it->second.state == State::kKnown) return;
      if (absl::Now() - it->second.asked_at < retry_after_) return;
      it->second.state = State::kAsking;
    }
    ++probes_;
  }
  absl::StatusOr<std::string> path = Ask(address, timeout);
  if (path.ok() && !path->empty()) pool_.SetUnixSocketPath(address, *path);
  absl::MutexLock lock(&mu_);
  Route& route = routes_[address];  // never erased
  if (path.ok()) {
    route.state = State::kKnown;
    if (!path->empty()) ++local_servers_;
  } else {
    route.state = State::kUnreachable;
    route.asked_at = absl::Now();
  }
}

void LocalRoutes::LearnEach(const std::vector<std::string>& addresses, absl::Duration timeout) {
  for (const std::string& address : addresses) Learn(address, timeout);
}

absl::StatusOr<std::string> LocalRoutes::Ask(const std::string& address, absl::Duration timeout) {
  if (host_id_.empty()) return std::string();  // no boot id: no way to tell a local server
  // A client of its own, not the pool's: the pool's connection to the
  // server is opened only once the route is known.
  auto client = rpc::RpcClient::Create(pool_.io(), address, pool_.key());
  proto::ShortCircuitInfoResponse info;
  absl::Status status =
      client->Call(format::MessageType::kShortCircuitInfo, proto::Empty(), &info, timeout);
  client->Shutdown();
  if (!status.ok()) return status;
  if (info.boot_id() != host_id_ || info.rpc_socket_path().empty()) return std::string();
  VLOG(1) << "segment server " << address << " is on this host: RPCs over "
          << info.rpc_socket_path();
  return info.rpc_socket_path();
}

uint64_t LocalRoutes::probes() const {
  absl::MutexLock lock(&mu_);
  return probes_;
}

uint64_t LocalRoutes::local_servers() const {
  absl::MutexLock lock(&mu_);
  return local_servers_;
}

}  // namespace logfs::client
