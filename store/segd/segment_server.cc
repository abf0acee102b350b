// Wiring of the segment server: ReplicaStore (files), SyncThread (group
// commit), SegmentService (request handling) behind an RpcServer, and
// MetaHeartbeat (registration and heartbeats).
#include "store/segd/segment_server.h"

#include <glog/logging.h>
#include <unistd.h>

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/message_type.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/meta_fence.h"
#include "store/segd/meta_registration.h"
#include "store/segd/replica_store.h"
#include "store/segd/segd_metrics.h"
#include "store/segd/segment_copier.h"
#include "store/segd/segment_service.h"
#include "store/segd/short_circuit_server.h"
#include "store/segd/sync_thread.h"

namespace logfs::segd {
namespace {

class SegmentServerImpl : public SegmentServer {
 public:
  SegmentServerImpl(std::unique_ptr<ReplicaStore> store, std::unique_ptr<MetaFence> fence,
                    const SegmentServerOptions& options, asio::io_context& io)
      : store_(std::move(store)),
        fence_(std::move(fence)),
        sync_thread_(store_.get(),
                     SyncThreadOptions{options.sync_interval_ms, options.sync_waiters_max}),
        copier_(store_.get(), SegmentCopierOptions{options.rpc_timeout_ms}),
        service_(store_.get(), &sync_thread_, &copier_),
        rpc_server_(
            io,
            [this](format::Frame request, rpc::Responder responder) {
              service_.Handle(std::move(request), std::move(responder));
            },
            format::IsSegdType) {}

  ~SegmentServerImpl() override { Stop(); }

  absl::Status Init(const SegmentServerOptions& options) {
    if (!options.short_circuit_socket.empty()) {
      auto short_circuit = ShortCircuitServer::Start(options.short_circuit_socket, store_.get(),
                                                     options.short_circuit_uids);
      if (short_circuit.ok()) {
        short_circuit_ = std::move(*short_circuit);
        service_.set_short_circuit_socket(options.short_circuit_socket);
      } else {
        // Reads still work over TCP.
        LOG(WARNING) << "short-circuit reads off: " << short_circuit.status();
      }
    }
    RETURN_IF_ERROR(TakeServerId(options.server_id));
    service_.set_meta_fence(fence_.get());
    const uint64_t incarnation = NewIncarnation();
    service_.set_incarnation(incarnation);
    if (!options.host_id.empty()) service_.set_host_id(options.host_id);
    RETURN_IF_ERROR(rpc_server_.Listen(options.listen_address));
    service_.set_rpc_server(&rpc_server_);
    if (!options.rpc_socket.empty()) {
      absl::Status unix = rpc_server_.ListenUnix(options.rpc_socket);
      if (unix.ok()) {
        service_.set_rpc_socket(options.rpc_socket);
      } else {
        // Local clients reach it over TCP instead.
        LOG(WARNING) << "RPCs over TCP only: " << unix;
      }
    }
    MetaHeartbeatOptions meta;
    meta.meta_addresses = SplitMetaAddresses(options.meta_address);
    if (meta.meta_addresses.empty()) return absl::InvalidArgumentError("no meta address");
    ASSIGN_OR_RETURN(advertised_address_,
                     rpc::AdvertisedAddress(options.listen_address, rpc_server_.bound_address(),
                                            options.advertise_address));
    meta.advertise_address = advertised_address_;
    meta.failure_domain = options.failure_domain;
    meta.heartbeat_interval_ms = options.heartbeat_interval_ms;
    meta.rpc_timeout_ms = options.rpc_timeout_ms;
    meta.register_wait = options.register_wait;
    meta.cancelled = options.register_cancelled;
    meta.incarnation = incarnation;
    ASSIGN_OR_RETURN(
        heartbeat_,
        MetaHeartbeat::Start(
            meta, store_.get(), fence_.get(), [this](uint64_t id) { DeleteReplica(id); },
            [this](uint64_t id, int64_t idle_ms) { DeleteStray(id, idle_ms); }));
    return absl::OkStatus();
  }

  std::string bound_address() const override { return rpc_server_.bound_address(); }
  std::string advertised_address() const override { return advertised_address_; }
  std::string rpc_socket() const override { return rpc_server_.unix_path(); }
  uint64_t server_id() const override { return store_->server_id(); }

  SegmentServerCounters counters() const override {
    SegmentServerCounters c;
    c.appends = service_.appends();
    c.fdatasyncs = store_->fdatasync_count();
    c.sync_rounds = sync_thread_.sync_rounds();
    c.heartbeats = heartbeat_ != nullptr ? heartbeat_->heartbeats_sent() : 0;
    c.responses = rpc_server_.responses();
    c.response_writes = rpc_server_.response_writes();
    c.tcp_connections = rpc_server_.connections_accepted(rpc::Transport::kTcp);
    c.unix_connections = rpc_server_.connections_accepted(rpc::Transport::kUnix);
    c.tcp_requests = rpc_server_.requests_read(rpc::Transport::kTcp);
    c.unix_requests = rpc_server_.requests_read(rpc::Transport::kUnix);
    return c;
  }

  void CollectMetrics(metrics::FamilyList& out) const override {
    const SegmentServerCounters c = counters();
    SegdMetricsSources sources;
    sources.store = store_.get();
    sources.appends = c.appends;
    sources.fdatasyncs = c.fdatasyncs;
    sources.sync_rounds = c.sync_rounds;
    sources.heartbeats = c.heartbeats;
    sources.bad_frames = rpc_server_.bad_frames();
    sources.auth_failures = rpc_server_.auth_failures();
    sources.handshakes_refused = rpc_server_.handshakes_refused();
    sources.tcp_connections = c.tcp_connections;
    sources.unix_connections = c.unix_connections;
    sources.tcp_requests = c.tcp_requests;
    sources.unix_requests = c.unix_requests;
    CollectSegdMetrics(sources, out);
  }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    // New requests get kUnavailable; then nothing new is accepted; then the
    // heartbeat stops deleting; last, waiters are answered kUnavailable.
    service_.Stop();
    rpc_server_.Stop();
    if (heartbeat_ != nullptr) heartbeat_->Stop();
    if (short_circuit_ != nullptr) short_circuit_->Stop();
    copier_.Stop();
    sync_thread_.Stop();
  }

 private:
  absl::Status TakeServerId(uint64_t wanted) {
    const uint64_t have = store_->server_id();
    if (wanted == 0 || wanted == have) return absl::OkStatus();
    if (have != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("data dir ", store_->data_dir(), " belongs to server ", have,
                       ", not to --server_id=", wanted));
    }
    LOG(WARNING) << "taking server id " << wanted << " for the empty data dir "
                 << store_->data_dir() << "; meta re-replicates what it held";
    return store_->SetServerId(wanted);
  }

  static uint64_t NewIncarnation() {
    std::random_device device;
    uint64_t incarnation = 0;
    while (incarnation == 0) {
      incarnation = (static_cast<uint64_t>(device()) << 32) ^ device() ^
                    static_cast<uint64_t>(::getpid());
    }
    return incarnation;
  }

  void DeleteStray(uint64_t segment_id, int64_t idle_ms) {
    absl::StatusOr<bool> deleted = store_->DeleteIfIdle(segment_id, idle_ms);
    sync_thread_.Recheck(segment_id);
    if (!deleted.ok()) {
      LOG(WARNING) << "deleting stray segment " << segment_id << ": " << deleted.status();
    } else if (*deleted) {
      LOG(INFO) << "deleted stray replica of segment " << segment_id
                << " (no file lists it on this server)";
    }
  }

  void DeleteReplica(uint64_t segment_id) {
    absl::Status status = store_->Delete(segment_id);
    sync_thread_.Recheck(segment_id);
    if (!status.ok()) LOG(WARNING) << "deleting segment " << segment_id << ": " << status;
  }

  std::atomic<bool> stopped_{false};
  // Declared in dependency order: each is destroyed before what it uses.
  std::unique_ptr<ReplicaStore> store_;
  std::unique_ptr<MetaFence> fence_;
  SyncThread sync_thread_;
  SegmentCopier copier_;
  SegmentService service_;
  rpc::RpcServer rpc_server_;
  std::string advertised_address_;  // set once in Start
  std::unique_ptr<ShortCircuitServer> short_circuit_;
  std::unique_ptr<MetaHeartbeat> heartbeat_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SegmentServer>> SegmentServer::Start(
    const SegmentServerOptions& options, asio::io_context& io) {
  ReplicaStoreOptions store_options{options.data_dir, options.journal_bytes};
  store_options.file_system = options.file_system;
  ASSIGN_OR_RETURN(std::unique_ptr<ReplicaStore> store, ReplicaStore::Open(store_options));
  ASSIGN_OR_RETURN(std::unique_ptr<MetaFence> fence,
                   MetaFence::Open(*options.file_system, options.data_dir));
  auto server =
      std::make_unique<SegmentServerImpl>(std::move(store), std::move(fence), options, io);
  RETURN_IF_ERROR(server->Init(options));
  return server;
}

}  // namespace logfs::segd
