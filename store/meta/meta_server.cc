#include "store/meta/meta_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "store/format/error_codec.h"
#include "store/format/limits.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/coherence/mount_caches.h"
#include "store/meta/ha/checkpoint_service.h"
#include "store/meta/ha/meta_ha.h"
#include "store/meta/meta_metrics.h"
#include "store/meta/meta_service.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/rereplicator.h"
#include "store/meta/namespace/segd_api.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/rpc_server.h"

namespace logfs::meta {
namespace {

// The RocksDB directory inside --data_dir (docs/metadata_format.md).
constexpr char kMetadataDbDir[] = "metadb";

// How often leases and pins of silent mounts are checked, at most.
constexpr int kExpireIntervalMsMax = 1000;

// Re-replication passes run every --dead_server_ms / 4, at most this far
// apart.
constexpr int kRereplicationIntervalMsMax = 10000;

class MetaServerImpl : public MetaServer {
 public:
  MetaServerImpl(const MetaServerOptions& options, asio::io_context& io)
      : options_(options),
        io_(io),
        client_work_(asio::make_work_guard(client_io_)),
        expire_timer_(client_io_),
        handler_pool_(std::max(1, options.handler_threads)) {
    client_thread_ = std::thread([this] { client_io_.run(); });
  }

  ~MetaServerImpl() override {
    Stop();
    // The RpcServer goes before the namespace it dispatches to.
    server_.reset();
  }

  absl::Status Init() {
    if (options_.data_dir.empty()) return absl::FailedPreconditionError("meta needs a data dir");
    // MetadataDb::Open creates the data dir and metadb/ durably.
    ASSIGN_OR_RETURN(db_, MetadataDb::Open({options_.data_dir + "/" + kMetadataDbDir}));
    segment_servers_ = std::make_unique<RpcSegmentServerApi>(
        client_io_, absl::Milliseconds(options_.rpc_timeout_ms));
    // Active and standbys alike serve checkpoints (`logfs meta backup`,
    // `bootstrap`).
    CheckpointServiceOptions checkpoint_options;
    checkpoint_options.dir = options_.data_dir + "/" + kCheckpointsDir;
    ASSIGN_OR_RETURN(checkpoints_, CheckpointService::Create(db_.get(), checkpoint_options));
    server_ = std::make_unique<rpc::RpcServer>(
        io_,
        [this](format::Frame frame, rpc::Responder responder) {
          Dispatch(std::move(frame), std::move(responder));
        },
        format::IsMetaType);
    server_->SetConnectionClosedHandler([this](uint64_t connection) {
      if (!serving_.load(std::memory_order_acquire)) return;
      std::optional<uint64_t> mount_id = service_->TakeSession(connection);
      if (!mount_id.has_value()) return;
      LOG(INFO) << "mount " << *mount_id << " disconnected: its leases lapse";
      ns_->MountDisconnected(*mount_id);
    });
    RETURN_IF_ERROR(server_->Listen(options_.listen_address));
    ASSIGN_OR_RETURN(advertised_address_,
                     rpc::AdvertisedAddress(options_.listen_address, server_->bound_address(),
                                            options_.advertise_address));
    if (options_.etcd_endpoints.empty()) {
      // A failed group commit stops writes (store/meta/db/metadata_db.h): a
      // lone meta starts again (--step_down re-executes `logfs meta`),
      // reopening RocksDB as it was, and writes again once it can.
      db_->SetJournalFailureHandler([this](const absl::Status& why) {
        StepDown(absl::StrCat("a metadata write failed: ", why.message()));
      });
      RETURN_IF_ERROR(Promote(0, nullptr));
      LOG(INFO) << "meta serving " << server_->bound_address() << " (advertised as "
                << advertised_address_ << ") from " << options_.data_dir;
      return absl::OkStatus();
    }
    return StartReplica();
  }

  // A replica of an elected meta: a standby until MetaHa promotes it.
  absl::Status StartReplica() {
    MetaHaOptions ha_options;
    ha_options.etcd_endpoints = options_.etcd_endpoints;
    ha_options.etcd_tls = options_.etcd_tls;
    ha_options.cluster = options_.cluster;
    ha_options.advertised_address = advertised_address_;
    ha_options.lease_ttl_ms = options_.meta_lease_ttl_ms;
    ha_options.poll_interval_ms = options_.meta_poll_interval_ms;
    ha_options.journal_keep_records = options_.journal_keep_records;
    ha_options.trim_interval_ms = options_.journal_trim_interval_ms;
    MetaHa::Hooks hooks;
    hooks.promote = [this](uint64_t epoch, MetaJournal* journal) {
      return Promote(epoch, journal);
    };
    hooks.step_down = [this](const std::string& why) { StepDown(why); };
    ASSIGN_OR_RETURN(ha_, MetaHa::Create(std::move(ha_options), db_.get(), std::move(hooks)));
    db_->SetJournalFailureHandler([this](const absl::Status& why) { ha_->JournalFailed(why); });
    ha_raw_.store(ha_.get(), std::memory_order_release);
    ha_->Begin();
    LOG(INFO) << "meta replica listening on " << server_->bound_address() << " (advertised as "
              << advertised_address_ << ") from " << options_.data_dir;
    return absl::OkStatus();
  }

  // Starts serving the namespace at meta epoch `epoch` (0: a lone meta),
  // appending to `journal` (null: the local one). On the HA thread for a
  // replica, else in Init.
  absl::Status Promote(uint64_t epoch, MetaJournal* journal) {
    db_->SetJournal(journal);
    // Segment servers refuse commands of a lower epoch from now on.
    segment_servers_->SetMetaEpoch(epoch);
    NamespaceOptions ns_options;
    ns_options.dead_server_ms = options_.dead_server_ms;
    ns_options.lease_timeout_ms = options_.lease_timeout_ms;
    ns_options.lease_recovery_delay_ms = options_.lease_recovery_delay_ms;
    ns_options.default_replication = options_.default_replication;
    ns_options.wal_ack_quorum = options_.wal_ack_quorum;
    ns_options.replica_report_interval_ms = options_.replica_report_interval_ms;
    ns_options.stray_replica_grace_ms = options_.stray_replica_grace_ms;
    if (options_.cache_lease_ms > 0) {
      MountCachesOptions cache_options;
      cache_options.lease = absl::Milliseconds(options_.cache_lease_ms);
      // Nothing was ever written: no mount can hold an earlier meta's answers.
      cache_options.restarted = epoch != 0 || db_->applied_seq() != 0;
      caches_ = std::make_unique<MountCaches>(cache_options);
      db_->SetDurableObserver(
          [caches = caches_.get()](std::vector<ChangedKeys> changes) { caches->Publish(changes); });
    }
    ASSIGN_OR_RETURN(ns_, Namespace::Open(db_.get(), segment_servers_.get(), ns_options));
    service_ = std::make_unique<MetaService>(ns_.get(), options_.TEST_exit_before_reply_to_change,
                                             caches_.get());
    epoch_ = epoch;
    if (stopped_.load()) return absl::CancelledError("meta is stopping");
    ScheduleExpiry();
    StartRereplication();
    serving_.store(true, std::memory_order_release);
    return absl::OkStatus();
  }

  // The replica must stop serving now (MetaHa::Hooks::step_down).
  void StepDown(const std::string& why) {
    if (stepped_down_.exchange(true)) return;
    if (options_.step_down) options_.step_down(why);
  }

  // Whether requests are answered: promoted, not stepped down, and (a
  // replica) within its lease.
  void CollectMetrics(metrics::FamilyList& out) const override {
    // ns_ is set before serving_ is (release; ServingNow acquires).
    if (!ServingNow()) return CollectMetaMetrics(nullptr, nullptr, nullptr, out);
    // rereplicator_ and caches_ too are set before serving_ (Promote).
    Rereplicator::Progress progress;
    if (rereplicator_ != nullptr) progress = rereplicator_->GetProgress();
    MountCaches::Stats cache_stats;
    if (caches_ != nullptr) cache_stats = caches_->stats();
    CollectMetaMetrics(ns_.get(), rereplicator_ != nullptr ? &progress : nullptr,
                       caches_ != nullptr ? &cache_stats : nullptr, out);
  }

  bool ServingNow() const {
    if (!serving_.load(std::memory_order_acquire) || stepped_down_.load()) return false;
    MetaHa* ha = ha_raw_.load(std::memory_order_acquire);
    return ha == nullptr || ha->ServingNow();
  }

  proto::MetaStateResponse State() const {
    MetaHa* ha = ha_raw_.load(std::memory_order_acquire);
    if (ha != nullptr) {
      proto::MetaStateResponse state = ha->State();
      state.set_active(state.active() && ServingNow());
      return state;
    }
    proto::MetaStateResponse state;
    state.set_active(ServingNow());
    state.set_active_address(advertised_address_);
    state.set_applied_seq(db_->applied_seq());
    return state;
  }

  std::string bound_address() const override {
    return server_ != nullptr ? server_->bound_address() : "";
  }
  std::string advertised_address() const override { return advertised_address_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    // Fails calls in flight first, so no handler stays blocked on
    // client_io_: the server's Stop waits for the handlers running.
    if (segment_servers_ != nullptr) segment_servers_->Shutdown();
    if (server_ != nullptr) server_->Stop();
    // Handlers still running end soon (their segd calls failed; a group
    // commit ends by itself); the ones queued answer "stopping".
    handler_pool_.join();
    // No promotion after this; a clean stop hands the election on at once.
    if (ha_ != nullptr) ha_->Stop();
    asio::post(client_io_, [this] { expire_timer_.cancel(); });
    // Its pass in flight ends quickly now that its copies failed.
    if (rereplicator_ != nullptr) rereplicator_->Stop();
    // So do lease recoveries; none starts after stopped_.
    maintenance_pool_.join();
    // No change commits any more: the changes still waiting for mounts are
    // answered now (their callbacks use ServingNow, hence before ha_ goes).
    if (db_ != nullptr) db_->SetDurableObserver(nullptr);
    std::unique_ptr<MountCaches> caches = std::move(caches_);
    caches.reset();
    client_work_.reset();
    client_io_.stop();
    if (client_thread_.joinable()) client_thread_.join();
  }

 private:
  void ScheduleExpiry() {
    int interval_ms = std::clamp(options_.lease_timeout_ms / 4, 10, kExpireIntervalMsMax);
    expire_timer_.expires_after(std::chrono::milliseconds(interval_ms));
    expire_timer_.async_wait([this](asio::error_code ec) {
      if (ec || stopped_.load()) return;
      // Off this thread, which meta's handlers wait on for segd calls:
      // orphans deleted wait for their group commit, and the scan of call
      // records (at most once a minute) may cover many records.
      asio::post(maintenance_pool_, [this] {
        absl::Status s = ns_->ExpireMounts();
        if (!s.ok()) LOG(WARNING) << "expiring mounts: " << s;
        absl::Status expired = ns_->ExpireCallRecords();
        if (!expired.ok()) LOG(WARNING) << "expiring records of applied changes: " << expired;
      });
      checkpoints_->DropIdle();
      for (uint64_t ino : ns_->TakeLapsedOpenFiles()) {
        asio::post(maintenance_pool_, [this, ino] { RecoverLapsedLease(ino); });
      }
      ScheduleExpiry();
    });
  }

  // A file whose writer died: seal what its quorum acked, so that its
  // length is final and every reader sees it (DESIGN §4 "Lease recovery").
  // Blocks on segment servers; runs on maintenance_pool_.
  void RecoverLapsedLease(uint64_t ino) {
    if (stopped_.load()) return;
    auto inode = ns_->RecoverLease(ino, /*only_if_unleased=*/true);
    if (inode.ok()) {
      LOG(INFO) << "recovered inode " << ino << " after its writer's lease lapsed: "
                << inode->attr().size() << " bytes";
    } else if (absl::IsUnavailable(inode.status()) || absl::IsAborted(inode.status()) ||
               AttachedErrno(inode.status()) == EAGAIN) {
      // Too few replicas answer: tried again every lease_recovery_delay_ms,
      // one bounded attempt each time.
      LOGFS_LOG_EVERY_MS(WARNING, 10000) << "recovering inode " << ino
                                         << " after its lease lapsed: " << inode.status()
                                         << "; retrying later";
      if (!stopped_.load()) ns_->RetryLeaseRecovery(ino);
    } else {
      LOG(WARNING) << "recovering inode " << ino << " after its lease lapsed: "
                   << inode.status();
    }
  }

  // Copies of a pass run at once; each call may wait for the copies queued
  // before it on its target, so it gets a chunk's deadline for every chunk
  // of the pass.
  void StartRereplication() {
    RereplicatorOptions options;
    options.interval_ms = std::clamp(options_.dead_server_ms / 4, 10, kRereplicationIntervalMsMax);
    const int64_t chunk_ms = options_.rpc_timeout_ms;
    auto copy = [this, chunk_ms](const std::vector<RereplicationTask>& tasks) {
      int64_t chunks = 2;
      for (const auto& task : tasks) chunks += 1 + task.length / format::kReadBytesMax;
      std::vector<absl::Status> copied =
          segment_servers_->CopySegments(tasks, absl::Milliseconds(chunk_ms * chunks));
      return copied;
    };
    rereplicator_ = std::make_unique<Rereplicator>(ns_.get(), copy, options);
    rereplicator_->Start();
  }

  // On an io thread: takes the request to a handler thread, where a
  // change may wait for its group commit.
  void Dispatch(format::Frame frame, rpc::Responder responder) {
    if (AnsweredInline(frame.type)) return Handle(frame, responder, nullptr);
    ChangeInFlight in_flight = BeginChange(frame);
    asio::post(handler_pool_, [this, frame = std::move(frame), responder = std::move(responder),
                               in_flight = std::move(in_flight)] {
      Handle(frame, responder, in_flight);
    });
  }

  // MountCaches::BeginChange until the last copy goes (after the reply).
  using ChangeInFlight = std::shared_ptr<void>;
  // A change that holds an inode lock in its mount's kernel (a directory's,
  // which a drop of a name in it needs), from when it arrives:
  // MountCaches::AfterInvalidated does not wait for that mount meanwhile.
  // Null for other calls.
  ChangeInFlight BeginChange(const format::Frame& frame) {
    // caches_ is set before serving_ (Promote).
    if (!serving_.load(std::memory_order_acquire) || caches_ == nullptr) return nullptr;
    const uint64_t mount = MetaService::LockingChangeMount(frame);
    if (mount == 0) return nullptr;
    MountCaches* caches = caches_.get();
    caches->BeginChange(mount);
    return ChangeInFlight(nullptr, [caches, mount](void*) { caches->EndChange(mount); });
  }

  // Calls that never wait (reads of the durable view, in-memory liveness):
  // answered on the io thread, without a hand-off to the pool.
  static bool AnsweredInline(format::MessageType type) {
    using format::MessageType;
    switch (type) {
      case MessageType::kMetaState:
      case MessageType::kLookup:
      case MessageType::kGetAttr:
      case MessageType::kGetInode:
      case MessageType::kReadlink:
      case MessageType::kReaddir:
      case MessageType::kGetXattr:
      case MessageType::kListXattr:
      case MessageType::kStatFs:
      case MessageType::kOpen:
      case MessageType::kMountHeartbeat:
      case MessageType::kWatchCache:
        return true;
      default:
        return false;
    }
  }

  void Handle(const format::Frame& frame, const rpc::Responder& responder,
              const ChangeInFlight& in_flight) {
    if (stopped_.load()) {
      responder.ReplyError(absl::UnavailableError("meta is stopping"));
      return;
    }
    if (frame.type == format::MessageType::kMetaState) return responder.Reply(State());
    if (CheckpointService::Serves(frame.type)) return checkpoints_->Respond(frame, responder);
    if (!ServingNow()) return HandleNotServing(frame, responder);
    if (frame.type == format::MessageType::kWatchCache && caches_ != nullptr) {
      return WatchCache(frame, responder);
    }
    const absl::Time start = absl::Now();
    proto::CallId call;
    MetaService::Reply reply = service_->Handle(frame, &call);
    RecordMetaCall(frame.type, absl::Now() - start, reply.status());
    // Computed while the lease lapsed: the answer may be stale or another
    // active's to give. A change it applied is journaled; its retry is
    // answered from the record of applied changes.
    if (!ServingNow()) return HandleNotServing(frame, responder);
    if (!reply.ok()) return responder.ReplyError(reply.status());
    if (frame.type == format::MessageType::kHeartbeat) {
      static_cast<proto::HeartbeatResponse*>(reply->get())->set_meta_epoch(epoch_);
    }
    if (frame.type == format::MessageType::kListServers && rereplicator_ != nullptr) {
      const Rereplicator::Progress progress = rereplicator_->GetProgress();
      auto* listed = static_cast<proto::ListServersResponse*>(reply->get());
      listed->set_rereplication_in_flight_segments(progress.in_flight_segments);
      listed->set_rereplication_in_flight_bytes(progress.in_flight_bytes);
      listed->set_rereplication_copied_segments(progress.copied_segments);
      listed->set_rereplication_copied_bytes(progress.copied_bytes);
      listed->set_rereplication_failed_copies(progress.failed_copies);
    }
    if (caches_ != nullptr && Changes(frame.type)) {
      // Answered once every mount that may cache what it changed has
      // dropped it, or stopped trusting its cache (docs/coherence.md).
      std::shared_ptr<google::protobuf::MessageLite> response(std::move(*reply));
      caches_->AfterInvalidated(call.mount_id(), call.seq(),
                                [responder, response, in_flight] { responder.Reply(*response); });
      return;
    }
    responder.Reply(**reply);
  }

  // The calls that may change what a mount caches.
  static bool Changes(format::MessageType type) {
    using format::MessageType;
    switch (type) {
      case MessageType::kSetAttr:
      case MessageType::kCreate:
      case MessageType::kUnlink:
      case MessageType::kRename:
      case MessageType::kLink:
      case MessageType::kClone:
      case MessageType::kSnapshot:
      case MessageType::kCopyRange:
      case MessageType::kSetXattr:
      case MessageType::kRemoveXattr:
      case MessageType::kOpenWrite:
      case MessageType::kSealSegment:
      case MessageType::kRecoverLease:
      case MessageType::kRelease:
        return true;
      default:
        return false;
    }
  }

  // A mount's cache poll: answered now or held (MountCaches::Watch).
  void WatchCache(const format::Frame& frame, const rpc::Responder& responder) {
    proto::WatchCacheRequest request;
    if (!request.ParseFromString(frame.message) || request.mount_id() == 0) {
      return responder.ReplyError(absl::InvalidArgumentError("unparseable WatchCacheRequest"));
    }
    // An answer extends the mount's trust in its cache: a meta that is no
    // longer the active (its held polls answered late) must not give one.
    caches_->Watch(request, [this, frame, responder](const proto::WatchCacheResponse& response) {
      if (!ServingNow()) return HandleNotServing(frame, responder);
      responder.Reply(response);
    });
  }

  // A standby's answer (or an active's whose lease lapsed): a heartbeat is
  // answered without commands (a promoted replica trusts its registry for
  // one --dead_server_ms, as a restarted meta does); every other call is refused with
  // the active's address, if known (docs/meta_ha.md "Clients").
  void HandleNotServing(const format::Frame& frame, const rpc::Responder& responder) {
    const proto::MetaStateResponse state = State();
    if (frame.type == format::MessageType::kHeartbeat) {
      proto::HeartbeatRequest request;
      if (!request.ParseFromString(frame.message)) {
        return responder.ReplyError(absl::InvalidArgumentError("unparseable heartbeat"));
      }
      proto::HeartbeatResponse response;
      response.set_standby(true);
      response.set_meta_epoch(state.meta_epoch());
      return responder.Reply(response);
    }
    responder.ReplyError(format::NotActiveMetaError(
        absl::StrCat("meta at ", advertised_address_, " is not the active",
                     state.active_address().empty()
                         ? " and knows of none yet"
                         : absl::StrCat("; the active is ", state.active_address())),
        state.active_address()));
  }

  // Immutable after construction.
  const MetaServerOptions options_;
  asio::io_context& io_;

  // Outgoing calls to segment servers and the expiry timer run here, never
  // on `io_`: handlers on io_ threads block on these calls.
  asio::io_context client_io_;
  asio::executor_work_guard<asio::io_context::executor_type> client_work_;
  asio::steady_timer expire_timer_;
  std::thread client_thread_;
  // Blocking background work: recoveries of files whose writer's lease
  // lapsed (RecoverLapsedLease), expiry of old call records.
  asio::thread_pool maintenance_pool_{1};
  // Requests, off the io threads (Dispatch).
  asio::thread_pool handler_pool_;

  // Set by Init(), then immutable until destruction.
  std::unique_ptr<MetadataDb> db_;
  std::unique_ptr<CheckpointService> checkpoints_;
  std::unique_ptr<RpcSegmentServerApi> segment_servers_;
  std::unique_ptr<MountCaches> caches_;  // null with cache_lease_ms 0
  std::unique_ptr<Namespace> ns_;
  std::unique_ptr<MetaService> service_;
  std::unique_ptr<Rereplicator> rereplicator_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::string advertised_address_;  // set once in Start
  std::unique_ptr<MetaHa> ha_;      // a replica's; null for a lone meta
  // ha_ for io threads, which may run before Init sets it.
  std::atomic<MetaHa*> ha_raw_{nullptr};
  // Set by Promote before serving_ (ns_, service_ and the background work
  // with it); read only once serving_ is seen true.
  uint64_t epoch_ = 0;
  std::atomic<bool> serving_{false};
  std::atomic<bool> stepped_down_{false};

  std::atomic<bool> stopped_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetaServer>> MetaServer::Start(const MetaServerOptions& options,
                                                             asio::io_context& io) {
  auto server = std::make_unique<MetaServerImpl>(options, io);
  RETURN_IF_ERROR(server->Init());
  return std::unique_ptr<MetaServer>(std::move(server));
}

}  // namespace logfs::meta
