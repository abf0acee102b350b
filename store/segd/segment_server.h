// The segment server (`logfs segd`): stores segment replicas as local files
// under its data dir and serves CreateSegment / Append / Sync / Read /
// SegmentInfo / Seal / DeleteSegment / CopySegment over TCP
// (docs/wire_format.md; CopySegment runs on a copier thread), and hands
// out descriptors of sealed replicas to readers on the same host over a
// Unix socket (short-circuit reads). It
// registers with meta at start and heartbeats to it; the heartbeat reply
// names replicas to delete.
//
// Durability: an Append is answered once the replica's durable length
// (bytes on disk past a cache flush) covers it — at once after one shared
// journal sync when the request asks for sync, otherwise within
// `sync_interval_ms`. One sync thread serves every segment and every append
// also goes to one journal file, so a round costs one durable write however
// many segments it covers (group commit, as BookKeeper's journal).
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/env/file_system.h"
#include "src/metrics/family_list.h"

namespace logfs::segd {

struct SegmentServerOptions {
  std::string data_dir;        // created if missing
  std::string listen_address;  // "host:port"; port 0 picks one
  // "host:port" of meta, or of each meta replica, comma-separated
  // (store/segd/meta_registration.h).
  std::string meta_address;
  int sync_interval_ms = 5;    // max time an un-synced append waits
  uint64_t journal_bytes = 64u << 20;  // <data_dir>/journal (store/segd/journal.h)
  int heartbeat_interval_ms = 1000;
  int rpc_timeout_ms = 5000;   // for calls to meta
  // MetaHeartbeatOptions::register_wait and ::cancelled: how long the
  // first registration waits for an active meta, and what stops it early.
  absl::Duration register_wait = absl::ZeroDuration();
  std::function<bool()> register_cancelled;
  // What meta hands to clients to reach this server: "host:port", or
  // "host" for the bound port (rpc::AdvertisedAddress). Empty: the bound
  // address; then a wildcard listen_address (0.0.0.0) is refused.
  std::string advertise_address;
  // "rack/host" (RegisterServerRequest.failure_domain); empty: the host name.
  std::string failure_domain;
  // The id a mount compares with its own to read this server's sealed
  // replicas from their files (short-circuit reads); empty: the boot id,
  // which every process of one kernel shares. Set one per emulated host
  // (network namespaces of one kernel) to keep reads between them on TCP.
  std::string host_id;
  size_t sync_waiters_max = 1 << 16;  // appends waiting for durability
  // Unix socket for short-circuit reads (store/segd/short_circuit_server.h);
  // empty: off.
  std::string short_circuit_socket;
  // Unix stream socket that serves the same RPCs as listen_address, for
  // clients on this host (rpc::RpcServer::ListenUnix, mode 0600: this
  // server's user and root); empty: TCP only. If it cannot be made the
  // server logs why and serves TCP only.
  std::string rpc_socket;
  // Uids besides root and this process's that may use it (SO_PEERCRED).
  std::vector<uint32_t> short_circuit_uids;
  // The identity to take when the data dir has none (a replaced, empty
  // disk restarted as the server it replaces): meta then learns from
  // this server's replica report that it lost every replica and copies
  // them back. 0: the data dir's, else a new one from meta. A data dir
  // that belongs to another id is refused (kFailedPrecondition).
  uint64_t server_id = 0;
  // The data dir's file system (tests pass a fault-injecting one); not
  // owned, must outlive the server.
  env::FileSystem* file_system = env::FileSystem::Default();
};

// Monotonic counters, for tests and metrics.
struct SegmentServerCounters {
  uint64_t appends = 0;      // appends accepted (written or exact resends)
  uint64_t fdatasyncs = 0;   // replica-file fdatasyncs plus journal syncs
  uint64_t sync_rounds = 0;  // group-commit rounds that synced the journal
  uint64_t heartbeats = 0;   // heartbeats sent to meta
  uint64_t responses = 0;        // RPC responses sent
  uint64_t response_writes = 0;  // socket writes that carried them
  // RPC connections accepted and request frames read, by transport.
  uint64_t tcp_connections = 0, unix_connections = 0;
  uint64_t tcp_requests = 0, unix_requests = 0;
};

class SegmentServer {
 public:
  // Opens the data dir, listens and registers with meta. Errors:
  // kFailedPrecondition (data dir not usable or of another server id, or
  // its meta_epoch file corrupt (store/segd/meta_fence.h); meta refused
  // the id because another live process holds it),
  // kUnavailable (address busy, meta unreachable), kInvalidArgument (a
  // wildcard listen address without advertise_address, a bad one). `io`
  // must outlive the server; the caller runs it.
  static absl::StatusOr<std::unique_ptr<SegmentServer>> Start(
      const SegmentServerOptions& options, asio::io_context& io);
  virtual ~SegmentServer() = default;

  // "host:port" actually bound.
  virtual std::string bound_address() const = 0;
  // "host:port" others dial (registered with meta).
  virtual std::string advertised_address() const = 0;
  // The RPC Unix socket's path; empty when there is none.
  virtual std::string rpc_socket() const = 0;

  // The id meta assigned (kept in the data dir across restarts).
  virtual uint64_t server_id() const = 0;

  virtual SegmentServerCounters counters() const = 0;

  // The server's /metrics families (store/segd/segd_metrics.h); thread-safe.
  virtual void CollectMetrics(metrics::FamilyList& out) const = 0;

  // Stops serving; pending requests are answered with an error
  // (kUnavailable). Joins the server's own threads; idempotent. The
  // destructor calls it.
  virtual void Stop() = 0;
};

}  // namespace logfs::segd
