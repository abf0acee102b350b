#include "store/client/local_routes.h"

#include <glog/logging.h>

#include <algorithm>
#include <thread>
#include <vector>

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
  // A local server answers at once; a remote one that does not answer in
  // this long is left on TCP, where the caller's own call meets it.
  timeout = std::min(timeout, kAskTimeout);
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

bool LocalRoutes::Known(const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = routes_.find(address);
  return it != routes_.end() && it->second.state == State::kKnown;
}

void LocalRoutes::LearnEach(const std::vector<std::string>& addresses, absl::Duration timeout) {
  // The servers not known yet are asked at once, each on a thread of its
  // own, so that a fan-out waits for the slowest answer, not their sum.
  // Threads are made only then: once per server, or after a failure.
  std::vector<const std::string*> unknown;
  for (const std::string& address : addresses) {
    if (!Known(address)) unknown.push_back(&address);
  }
  if (unknown.size() <= 1) {
    for (const std::string* address : unknown) Learn(*address, timeout);
    return;
  }
  std::vector<std::thread> askers;
  askers.reserve(unknown.size());
  for (const std::string* address : unknown) {
    askers.emplace_back([this, address, timeout] { Learn(*address, timeout); });
  }
  for (std::thread& asker : askers) asker.join();
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
