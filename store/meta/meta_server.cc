#include "store/meta/meta_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "store/format/limits.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/meta/meta_service.h"
#include "store/meta/metadata_db.h"
#include "store/meta/namespace.h"
#include "store/meta/rereplicator.h"
#include "store/meta/segd_api.h"
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
        expire_timer_(client_io_) {
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
    NamespaceOptions ns_options;
    ns_options.dead_server_ms = options_.dead_server_ms;
    ns_options.lease_timeout_ms = options_.lease_timeout_ms;
    ns_options.lease_recovery_delay_ms = options_.lease_recovery_delay_ms;
    ns_options.default_replication = options_.default_replication;
    ns_options.wal_ack_quorum = options_.wal_ack_quorum;
    ns_options.replica_report_interval_ms = options_.replica_report_interval_ms;
    ns_options.stray_replica_grace_ms = options_.stray_replica_grace_ms;
    ASSIGN_OR_RETURN(ns_, Namespace::Open(db_.get(), segment_servers_.get(), ns_options));
    service_ = std::make_unique<MetaService>(ns_.get(), options_.TEST_exit_before_reply_to_change);
    server_ = std::make_unique<rpc::RpcServer>(
        io_, [this](format::Frame frame, rpc::Responder responder) { Handle(frame, responder); },
        format::IsMetaType);
    server_->SetConnectionClosedHandler([this](uint64_t connection) {
      std::optional<uint64_t> mount_id = service_->TakeSession(connection);
      if (!mount_id.has_value()) return;
      LOG(INFO) << "mount " << *mount_id << " disconnected: its leases lapse";
      ns_->MountDisconnected(*mount_id);
    });
    RETURN_IF_ERROR(server_->Listen(options_.listen_address));
    ASSIGN_OR_RETURN(advertised_address_,
                     rpc::AdvertisedAddress(options_.listen_address, server_->bound_address(),
                                            options_.advertise_address));
    ScheduleExpiry();
    StartRereplication();
    LOG(INFO) << "meta serving " << server_->bound_address() << " (advertised as "
              << advertised_address_ << ") from " << options_.data_dir;
    return absl::OkStatus();
  }

  std::string bound_address() const override {
    return server_ != nullptr ? server_->bound_address() : "";
  }
  std::string advertised_address() const override { return advertised_address_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    if (server_ != nullptr) server_->Stop();
    asio::post(client_io_, [this] { expire_timer_.cancel(); });
    // Fails calls in flight, so no handler stays blocked on client_io_.
    if (segment_servers_ != nullptr) segment_servers_->Shutdown();
    // Its pass in flight ends quickly now that its copies failed.
    if (rereplicator_ != nullptr) rereplicator_->Stop();
    // So do lease recoveries; none starts after stopped_.
    maintenance_pool_.join();
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
      absl::Status s = ns_->ExpireMounts();
      if (!s.ok()) LOG(WARNING) << "expiring mounts: " << s;
      // Off this thread, which meta's handlers wait on for segd calls: the
      // scan (at most once a minute) may cover many records.
      asio::post(maintenance_pool_, [this] {
        absl::Status expired = ns_->ExpireCallRecords();
        if (!expired.ok()) LOG(WARNING) << "expiring records of applied changes: " << expired;
      });
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
      return segment_servers_->CopySegments(tasks, absl::Milliseconds(chunk_ms * chunks));
    };
    rereplicator_ = std::make_unique<Rereplicator>(ns_.get(), copy, options);
    rereplicator_->Start();
  }

  void Handle(const format::Frame& frame, const rpc::Responder& responder) {
    if (stopped_.load()) {
      responder.ReplyError(absl::UnavailableError("meta is stopping"));
      return;
    }
    MetaService::Reply reply = service_->Handle(frame);
    if (!reply.ok()) return responder.ReplyError(reply.status());
    responder.Reply(**reply);
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

  // Set by Init(), then immutable until destruction.
  std::unique_ptr<MetadataDb> db_;
  std::unique_ptr<RpcSegmentServerApi> segment_servers_;
  std::unique_ptr<Namespace> ns_;
  std::unique_ptr<MetaService> service_;
  std::unique_ptr<Rereplicator> rereplicator_;
  std::unique_ptr<rpc::RpcServer> server_;
  std::string advertised_address_;  // set once in Start

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
