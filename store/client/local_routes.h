// Which segment servers this process reaches over their Unix RPC socket
// instead of TCP (DESIGN §6, docs/rpc.md "Transports"): a server whose
// ShortCircuitInfo names this host's id (the kernel's boot id, or
// --host_id: same kernel, same host) and an RPC socket (segd
// --rpc_socket) gets that socket set in the pool
// (rpc::ClientPool::SetUnixSocketPath) before the first call the caller
// makes to it, so its pool connection is a Unix one from the start. If
// that connect fails the pool's client falls back to TCP by itself.
//
// Learned the way short-circuit reads learn local servers
// (cache/segment_reader.h): the server itself says where its socket is,
// so nothing else (meta's registry, the mount's flags) has to know a
// path that only means something on the server's host.
//
// Thread-safe. Learn blocks (one RPC on a connection of its own): call it
// from a thread that may block, not from an io thread of the pool's
// io_context.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/rpc/client_pool.h"

namespace logfs::client {

class LocalRoutes {
 public:
  struct Options {
    // This host's id, compared with the server's ShortCircuitInfo boot_id;
    // empty: the kernel's boot id (rpc::HostBootId).
    std::string host_id;
    // How long a server that could not be asked is left on TCP before the
    // next Learn asks again. Positive.
    absl::Duration retry_after = absl::Seconds(10);
  };

  // `pool` must outlive this object; its addresses are segment servers'.
  LocalRoutes(rpc::ClientPool& pool, Options options);
  LocalRoutes(const LocalRoutes&) = delete;
  LocalRoutes& operator=(const LocalRoutes&) = delete;

  // Learns the route to the segment server at "host:port" `address` unless
  // known: asks it (ShortCircuitInfo, within `timeout`, on a TCP
  // connection of its own, closed after) and, for a server on this host
  // with an RPC socket, sets that socket in the pool. Concurrent calls for
  // one address wait for one answer. A server that cannot be asked stays
  // on TCP and is asked again after Options::retry_after. Never fails: the
  // worst outcome is TCP.
  // The question takes at most min(timeout, kAskTimeout).
  void Learn(const std::string& address, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  // Learn for each address; those not known yet are asked in parallel, so
  // it blocks for at most one min(timeout, kAskTimeout) (plus the wait
  // for another caller asking the same server).
  void LearnEach(const std::vector<std::string>& addresses, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Longest a server is asked for its route: a server on this host
  // answers at once.
  static constexpr absl::Duration kAskTimeout = absl::Seconds(1);

  // Servers asked so far, and those found on this host with an RPC socket.
  uint64_t probes() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t local_servers() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kAsking, kKnown, kUnreachable };
  struct Route {
    State state = State::kAsking;
    absl::Time asked_at;  // kUnreachable: when
  };
  bool Known(const std::string& address) const ABSL_LOCKS_EXCLUDED(mu_);
  // The server's Unix RPC socket if it is on this host and has one, else
  // "" (TCP); an error if it could not be asked.
  absl::StatusOr<std::string> Ask(const std::string& address, absl::Duration timeout);

  // Immutable after construction.
  rpc::ClientPool& pool_;
  const std::string host_id_;
  const absl::Duration retry_after_;

  mutable absl::Mutex mu_;
  // A std::map: Learn waits on a Route while others insert.
  std::map<std::string, Route> routes_ ABSL_GUARDED_BY(mu_);
  uint64_t probes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t local_servers_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace logfs::client
