#include "store/rpc/client_pool.h"

namespace logfs::rpc {

ClientPool::~ClientPool() { ShutdownAll(); }

std::shared_ptr<RpcClient> ClientPool::Get(const std::string& address) {
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    // A call racing the shutdown fails like the calls it raced with.
    auto client = RpcClient::Create(io_, address, key_);
    client->Shutdown();
    return client;
  }
  auto& client = clients_[address];
  if (client == nullptr) client = RpcClient::Create(io_, address, key_);
  return client;
}

void ClientPool::ShutdownAll() {
  absl::flat_hash_map<std::string, std::shared_ptr<RpcClient>> clients;
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
    clients.swap(clients_);
  }
  for (auto& [address, client] : clients) client->Shutdown();
}

}  // namespace logfs::rpc
