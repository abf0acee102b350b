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
  if (client == nullptr) {
    RpcClient::Options options;
    options.key = key_;
    auto path = unix_paths_.find(address);
    if (path != unix_paths_.end()) options.unix_socket_path = path->second;
    client = RpcClient::Create(io_, address, std::move(options));
  }
  return client;
}

void ClientPool::SetUnixSocketPath(const std::string& address, const std::string& path) {
  absl::MutexLock lock(&mu_);
  if (path.empty()) {
    unix_paths_.erase(address);
  } else {
    unix_paths_[address] = path;
  }
  auto client = clients_.find(address);
  if (client != clients_.end()) client->second->SetUnixSocketPath(path);
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
