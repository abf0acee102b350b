// One RpcClient per server address, shared by every caller in a process
// (so calls to one server multiplex on one connection). Thread-safe.
#pragma once

#include <memory>
#include <string>

#include <asio.hpp>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "store/rpc/rpc_client.h"

namespace logfs::rpc {

class ClientPool {
 public:
  // `io` must outlive the pool and the clients it hands out. Clients
  // authenticate with `key` (null: not at all), by default the process's.
  ClientPool(asio::io_context& io, ClusterKeyPtr key) : io_(io), key_(std::move(key)) {}
  explicit ClientPool(asio::io_context& io) : ClientPool(io, ProcessClusterKey()) {}
  ~ClientPool();

  // The client for "host:port", created on first use. Never null. After
  // ShutdownAll, a client that is shut down already (its calls fail with
  // kUnavailable, their callbacks posted to io()).
  std::shared_ptr<RpcClient> Get(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // The io_context the clients run on (for timers of their users).
  asio::io_context& io() { return io_; }
  // The key the clients authenticate with (null: none).
  const ClusterKeyPtr& key() const { return key_; }

  // Connections to "host:port" `address` from now on try the server's Unix
  // socket at `path` first, falling back to TCP (RpcClient::Options::
  // unix_socket_path); empty `path`: TCP only. Applies to the client Get
  // hands out for `address`, existing or not; a connection open already
  // keeps its transport until it breaks.
  void SetUnixSocketPath(const std::string& address, const std::string& path)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Shuts every client down (pending calls fail with kUnavailable), and
  // every client Get hands out from now on. Idempotent.
  void ShutdownAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  asio::io_context& io_;
  const ClusterKeyPtr key_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<RpcClient>> clients_ ABSL_GUARDED_BY(mu_);
  // SetUnixSocketPath's paths by address; no empty ones.
  absl::flat_hash_map<std::string, std::string> unix_paths_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace logfs::rpc
