// The segment server's short-circuit endpoint (DESIGN §5, as HDFS's
// DomainSocket file-descriptor passing): a Unix stream socket on which a
// client on the same host asks for a sealed replica (ShortCircuitOpen) and
// gets read-only descriptors of its data and .crc files (SCM_RIGHTS), so it
// can pread the bytes itself and skip the TCP round trip. Only sealed
// replicas are handed out: their bytes never change.
//
// Permission check: the peer's uid (SO_PEERCRED) must be root's, this
// server's, or one of `allowed_uids` (segd --short_circuit_uids); others get
// kPermissionDenied whatever they ask, and are logged. (The kernel's word
// on the peer is the only control: no cluster secret on this socket.) A
// bad frame closes its connection with a logged reason.
//
// One request per connection. One thread accepts and serves connections in
// turn, each within `io_timeout` as a whole; opens are rare (a client
// caches descriptors, cache/replica_cache.h). The socket file is made in
// the data dir, which must not be writable by others (chmod follows its
// path). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/util/unique_fd.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

class ShortCircuitServer {
 public:
  // Listens on `socket_path` (a stale socket file there is replaced; mode
  // 0666, access is checked per peer). kInvalidArgument if the path does
  // not fit a sockaddr_un; errno statuses otherwise. `store` must outlive
  // the server.
  static absl::StatusOr<std::unique_ptr<ShortCircuitServer>> Start(
      const std::string& socket_path, ReplicaStore* store, std::vector<uint32_t> allowed_uids = {},
      absl::Duration io_timeout = absl::Seconds(2));
  ~ShortCircuitServer();
  ShortCircuitServer(const ShortCircuitServer&) = delete;
  ShortCircuitServer& operator=(const ShortCircuitServer&) = delete;

  // Stops accepting, joins the thread, removes the socket file. Idempotent.
  void Stop();

  const std::string& socket_path() const { return socket_path_; }
  // Replicas handed out so far.
  // Replicas opened and handed to a reply (counted before it is sent).
  uint64_t opens() const { return opens_.load(); }

 private:
  ShortCircuitServer(std::string socket_path, util::UniqueFd listener, ReplicaStore* store,
                     std::vector<uint32_t> allowed_uids, absl::Duration io_timeout);
  void AcceptLoop();
  void Serve(int connection);

  const std::string socket_path_;
  util::UniqueFd listener_;
  ReplicaStore* const store_;
  const std::vector<uint32_t> allowed_uids_;
  const absl::Duration io_timeout_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> opens_{0};
  std::thread thread_;
};

}  // namespace logfs::segd
