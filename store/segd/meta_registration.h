// The segment server's link to meta: registration (RegisterServer, keeping
// the id in the data dir so a restarted server keeps its identity) and a
// heartbeat thread that reports space (and a failed journal:
// ReplicaStore::Health) every `heartbeat_interval_ms`,
// deletes the replicas meta lists, registers again when meta asks, and
// sends meta the list of replicas it holds when meta asks for it (a
// replica report, in pages of kReportPageReplicasMax, one heartbeat each;
// docs/rpc.md "Replica reports").
//
// It owns a private io_context and thread for its client::MetaClient,
// because the client's calls block and must not run on an io thread of the
// connection's own io_context (the server's io threads belong to the
// caller).
//
// Thread-safety: Start/Stop from one thread; counters from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <asio.hpp>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/format/logfs.pb.h"
#include "store/segd/replica_store.h"
#include "store/client/meta_client.h"

namespace logfs::segd {

// Replicas per report page: about 30 bytes each on the wire, so a page
// stays far below kMaxMessageBytes.
inline constexpr size_t kReportPageReplicasMax = 50000;

struct MetaHeartbeatOptions {
  std::string meta_address;       // "host:port" of meta
  std::string advertise_address;  // "host:port" meta hands to clients
  int heartbeat_interval_ms = 1000;
  int rpc_timeout_ms = 5000;      // per call to meta
  // Random and new for each process (RegisterServerRequest.incarnation);
  // meta refuses a second live process with this server's id.
  uint64_t incarnation = 0;
  // RegisterServerRequest.failure_domain; empty: the host name.
  std::string failure_domain;
};

class MetaHeartbeat {
 public:
  // Called on the heartbeat thread for each replica meta says to delete.
  using DeleteFn = std::function<void(uint64_t segment_id)>;
  // Likewise for a stray: delete it unless its files changed in `idle_ms`.
  using DeleteIdleFn = std::function<void(uint64_t segment_id, int64_t idle_ms)>;

  // Registers (blocking, at most rpc_timeout_ms) and starts heartbeating.
  // kUnavailable if meta cannot be reached; kFailedPrecondition if meta
  // refuses (another live process holds this server id); the store's
  // SetServerId error if the id cannot be persisted. Keeps `store`, which
  // must outlive this.
  static absl::StatusOr<std::unique_ptr<MetaHeartbeat>> Start(const MetaHeartbeatOptions& options,
                                                              ReplicaStore* store,
                                                              DeleteFn on_delete,
                                                              DeleteIdleFn on_delete_stray);
  ~MetaHeartbeat();  // Stop()

  // Stops the heartbeat thread (an in-flight call is cancelled) and the
  // private io thread. Idempotent.
  void Stop();

  uint64_t heartbeats_sent() const { return heartbeats_sent_.load(); }

 private:
  MetaHeartbeat(const MetaHeartbeatOptions& options, ReplicaStore* store, DeleteFn on_delete,
                DeleteIdleFn on_delete_stray);
  absl::Status Register();
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  void Beat();
  // One heartbeat (with `request`'s report page, if any); handles the
  // reply's deletions. Returns the reply, or the call's error.
  absl::StatusOr<proto::HeartbeatResponse> BeatOnce(proto::HeartbeatRequest request);
  // Sends every replica the store holds as report `report_id`.
  void SendReport(uint64_t report_id);

  // Immutable after construction.
  const MetaHeartbeatOptions options_;
  ReplicaStore* const store_;
  const DeleteFn on_delete_;
  const DeleteIdleFn on_delete_stray_;

  // The private io_context, its thread and the client that uses it.
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  std::unique_ptr<client::MetaClient> meta_;

  std::thread heartbeat_thread_;
  std::atomic<uint64_t> heartbeats_sent_{0};

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

// Capacity and free bytes (for unprivileged users) of the file system
// holding `path`; zeros if statvfs fails.
struct DiskSpace {
  uint64_t capacity_bytes = 0;
  uint64_t free_bytes = 0;
};
DiskSpace DiskSpaceOf(const std::string& path);

}  // namespace logfs::segd
