// The segment server's link to meta: registration (RegisterServer, keeping
// the id in the data dir so a restarted server keeps its identity) and a
// heartbeat thread that reports space (and a failed journal:
// ReplicaStore::Health) every `heartbeat_interval_ms`,
// deletes the replicas meta lists, registers again when meta asks, and
// sends meta the list of replicas it holds when meta asks for it (a
// replica report, in pages of kReportPageReplicasMax, one heartbeat each;
// docs/rpc.md "Replica reports").
//
// Meta replicas (docs/meta_ha.md): with several meta addresses, the server
// registers with the active (a standby's format::NotActiveMetaError names
// it) and heartbeats to every listed meta, each on a thread and client of
// its own, so that a dead or slow meta never delays the others and a new
// active knows the server at once. Only an answer the MetaFence admits
// (not `standby`, meta_epoch at least the highest seen) is acted on; the
// others were only noted by their meta. One address behaves as before.
//
// It owns a private io_context and thread for its client::MetaClients,
// because the clients' calls block and must not run on an io thread of the
// connection's own io_context (the server's io threads belong to the
// caller).
//
// Thread-safety: Start/Stop from one thread; counters from any thread.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/client/meta_client.h"
#include "store/format/logfs.pb.h"
#include "store/segd/meta_fence.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

// Replicas per report page: about 30 bytes each on the wire, so a page
// stays far below kMaxMessageBytes.
inline constexpr size_t kReportPageReplicasMax = 50000;

// "host:port,host:port,..." (--meta) split at commas, empty parts
// dropped.
std::vector<std::string> SplitMetaAddresses(absl::string_view list);

struct MetaHeartbeatOptions {
  // "host:port" of each meta replica (one: a lone meta); not empty.
  std::vector<std::string> meta_addresses;
  std::string advertise_address;  // "host:port" meta hands to clients
  int heartbeat_interval_ms = 1000;
  int rpc_timeout_ms = 5000;      // per call to meta
  // Random and new for each process (RegisterServerRequest.incarnation);
  // meta refuses a second live process with this server's id.
  uint64_t incarnation = 0;
  // RegisterServerRequest.failure_domain; empty: the host name.
  std::string failure_domain;
  // How long Start keeps trying while no active meta answers (at boot,
  // meta may start after this server, on another host, or be between
  // actives): kUnavailable rounds are retried with backoff (200 ms doubling
  // to 2 s) until this much time has passed. Zero: one round.
  absl::Duration register_wait = absl::ZeroDuration();
  // Polled between those rounds; true gives up at once (kCancelled). May
  // be empty. For a process whose termination signals are blocked until it
  // serves (src/main/server_main.cc).
  std::function<bool()> cancelled;
};

class MetaHeartbeat {
 public:
  // Called on the heartbeat thread for each replica meta says to delete.
  using DeleteFn = std::function<void(uint64_t segment_id)>;
  // Likewise for a stray: delete it unless its files changed in `idle_ms`.
  using DeleteIdleFn = std::function<void(uint64_t segment_id, int64_t idle_ms)>;

  // Registers with the active meta (blocking: one rpc_timeout_ms at most
  // per attempt, at most 2 attempts per listed meta in a round, rounds
  // repeated for options.register_wait) and starts heartbeating.
  // kUnavailable if no active meta could be reached in that time;
  // kCancelled if options.cancelled said so;
  // kFailedPrecondition if meta refuses (another live process holds this
  // server id); the store's SetServerId error if the id cannot be
  // persisted. Keeps `store` and `fence`, which must outlive this.
  static absl::StatusOr<std::unique_ptr<MetaHeartbeat>> Start(const MetaHeartbeatOptions& options,
                                                              ReplicaStore* store, MetaFence* fence,
                                                              DeleteFn on_delete,
                                                              DeleteIdleFn on_delete_stray);
  ~MetaHeartbeat();  // Stop()

  // Stops the heartbeat threads (in-flight calls are cancelled) and the
  // private io thread. Idempotent.
  void Stop();

  // Heartbeats sent, to every meta together.
  uint64_t heartbeats_sent() const { return heartbeats_sent_.load(); }

 private:
  // One listed meta: its client and heartbeat thread.
  struct Link {
    std::string address;
    std::unique_ptr<client::MetaClient> client;
    std::thread thread;
  };

  MetaHeartbeat(const MetaHeartbeatOptions& options, ReplicaStore* store, MetaFence* fence,
                DeleteFn on_delete, DeleteIdleFn on_delete_stray);
  std::unique_ptr<client::MetaClient> NewClient(const std::string& address);
  // The client for `address`: a listed meta's, else one kept in extra_.
  client::MetaClient* ClientFor(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);
  // Register, in rounds for up to `wait` while it is kUnavailable.
  absl::Status RegisterWithin(absl::Duration wait) ABSL_LOCKS_EXCLUDED(register_mu_);
  absl::Status Register() ABSL_LOCKS_EXCLUDED(register_mu_);
  absl::Status RegisterWith(const std::string& address, client::MetaClient& meta,
                            const proto::RegisterServerRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(register_mu_);
  void Run(Link* link) ABSL_LOCKS_EXCLUDED(mu_);
  void Beat(Link& link);
  // One heartbeat to `link` (with `request`'s report page, if any); if the
  // fence admits the answer (`*acted`), handles its deletions. Returns
  // the reply, or the call's error.
  absl::StatusOr<proto::HeartbeatResponse> BeatOnce(Link& link, proto::HeartbeatRequest request,
                                                    bool* acted);
  // Sends every replica the store holds to `link` as report `report_id`.
  void SendReport(Link& link, uint64_t report_id);

  // Immutable after construction.
  const MetaHeartbeatOptions options_;
  ReplicaStore* const store_;
  MetaFence* const fence_;
  const DeleteFn on_delete_;
  const DeleteIdleFn on_delete_stray_;

  // The private io_context, its thread and the clients that use it.
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread io_thread_;
  // One per listed meta; the vector is immutable after construction.
  std::vector<std::unique_ptr<Link>> links_;

  std::atomic<uint64_t> heartbeats_sent_{0};

  // Serializes registrations (at start, and when an active asks).
  absl::Mutex register_mu_;

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Clients of actives named by a standby that are not in the list, by
  // address (a handful at most: one per active address ever named).
  std::vector<std::unique_ptr<Link>> extra_ ABSL_GUARDED_BY(mu_);
};

// Capacity and free bytes (for unprivileged users) of the file system
// holding `path`; zeros if statvfs fails.
struct DiskSpace {
  uint64_t capacity_bytes = 0;
  uint64_t free_bytes = 0;
};
DiskSpace DiskSpaceOf(const std::string& path);

}  // namespace logfs::segd
