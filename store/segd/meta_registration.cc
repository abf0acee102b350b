#include "store/segd/meta_registration.h"

#include <glog/logging.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/status_text.h"
#include "src/util/log_rate_limit.h"
#include "store/format/logfs.pb.h"

namespace logfs::segd {

DiskSpace DiskSpaceOf(const std::string& path) {
  struct statvfs st;
  if (::statvfs(path.c_str(), &st) != 0) return {};
  return DiskSpace{static_cast<uint64_t>(st.f_blocks) * st.f_frsize,
                   static_cast<uint64_t>(st.f_bavail) * st.f_frsize};
}

namespace {

std::string HostName() {
  char name[256] = {0};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace

MetaHeartbeat::MetaHeartbeat(const MetaHeartbeatOptions& options, ReplicaStore* store,
                             DeleteFn on_delete, DeleteIdleFn on_delete_stray)
    : options_(options),
      store_(store),
      on_delete_(std::move(on_delete)),
      on_delete_stray_(std::move(on_delete_stray)) {
  work_.emplace(io_.get_executor());
  io_thread_ = std::thread([this] { io_.run(); });
  client::MetaClientOptions meta_options;
  meta_options.timeout = absl::Milliseconds(options_.rpc_timeout_ms);
  meta_options.retry_window = std::nullopt;  // Run's next beat is the retry
  meta_ = std::make_unique<client::MetaClient>(
      io_, rpc::RpcClient::Create(io_, options_.meta_address), meta_options);
}

MetaHeartbeat::~MetaHeartbeat() { Stop(); }

absl::StatusOr<std::unique_ptr<MetaHeartbeat>> MetaHeartbeat::Start(
    const MetaHeartbeatOptions& options, ReplicaStore* store, DeleteFn on_delete,
    DeleteIdleFn on_delete_stray) {
  std::unique_ptr<MetaHeartbeat> link(
      new MetaHeartbeat(options, store, std::move(on_delete), std::move(on_delete_stray)));
  RETURN_IF_ERROR(link->Register());
  link->heartbeat_thread_ = std::thread([raw = link.get()] { raw->Run(); });
  return link;
}

void MetaHeartbeat::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  // Shutdown fails an in-flight Call, so the heartbeat thread returns soon.
  meta_->Shutdown();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  work_.reset();
  io_.stop();
  io_thread_.join();
}

absl::Status MetaHeartbeat::Register() {
  DiskSpace space = DiskSpaceOf(store_->data_dir());
  proto::RegisterServerRequest request;
  request.set_address(options_.advertise_address);
  request.set_data_dir(store_->data_dir());
  request.set_capacity_bytes(space.capacity_bytes);
  request.set_free_bytes(space.free_bytes);
  request.set_host(HostName());
  request.set_failure_domain(options_.failure_domain.empty() ? request.host()
                                                             : options_.failure_domain);
  request.set_server_id(store_->server_id());
  request.set_incarnation(options_.incarnation);
  request.set_cluster_id(store_->cluster_id());
  absl::StatusOr<proto::RegisterServerResponse> registered = meta_->RegisterServer(request);
  const absl::Status& status = registered.status();
  if (absl::IsFailedPrecondition(status)) {
    // Meta refused this identity: say so as it is, do not retry.
    return absl::FailedPreconditionError(
        absl::StrCat("meta at ", options_.meta_address, " refused to register this server: ",
                     status.message()));
  }
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot register with meta at ",
                                               options_.meta_address, ": ", StatusText(status)));
  }
  if (registered->server_id() == 0) {
    return absl::UnavailableError("meta returned server id 0");
  }
  if (registered->server_id() != store_->server_id() ||
      registered->cluster_id() != store_->cluster_id()) {
    RETURN_IF_ERROR(store_->SetServerId(registered->server_id(), registered->cluster_id()));
  }
  LOG(INFO) << "registered with meta at " << options_.meta_address << " as server "
            << registered->server_id() << " (" << options_.advertise_address << ")";
  return absl::OkStatus();
}

void MetaHeartbeat::Run() {
  const absl::Duration interval = absl::Milliseconds(options_.heartbeat_interval_ms);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
    }
    Beat();
  }
}

absl::StatusOr<proto::HeartbeatResponse> MetaHeartbeat::BeatOnce(
    proto::HeartbeatRequest request) {
  DiskSpace space = DiskSpaceOf(store_->data_dir());
  request.set_server_id(store_->server_id());
  request.set_incarnation(options_.incarnation);
  request.set_capacity_bytes(space.capacity_bytes);
  request.set_free_bytes(space.free_bytes);
  if (absl::Status health = store_->Health(); !health.ok()) {
    request.set_disk_failure(std::string(health.message().substr(0, format::kDiskFailureBytesMax)));
  }
  absl::StatusOr<proto::HeartbeatResponse> response = meta_->Heartbeat(request);
  heartbeats_sent_.fetch_add(1);
  if (!response.ok()) return response.status();
  for (uint64_t segment_id : response->delete_segments()) on_delete_(segment_id);
  for (uint64_t segment_id : response->delete_strays()) {
    on_delete_stray_(segment_id, response->stray_grace_ms());
  }
  return response;
}

void MetaHeartbeat::Beat() {
  absl::StatusOr<proto::HeartbeatResponse> response = BeatOnce(proto::HeartbeatRequest());
  if (!response.ok()) {
    // kFailedPrecondition: meta gave this server's id to another process
    // (ours was taken for dead); the operator must stop one of the two.
    LOGFS_LOG_EVERY_MS(WARNING, 10000) << "heartbeat to meta at " << options_.meta_address
                                       << " failed: " << response.status();
    return;
  }
  if (response->reregister()) {
    absl::Status registered = Register();
    if (!registered.ok()) LOG(WARNING) << registered;
    return;
  }
  if (response->report_id() != 0) SendReport(response->report_id());
}

void MetaHeartbeat::SendReport(uint64_t report_id) {
  // A snapshot: replicas created after it wait for the next report (meta
  // confirms a missing replica only in two reports, see docs/rpc.md).
  std::vector<ReplicaInfo> replicas = store_->ListReplicas();
  size_t next = 0;
  do {
    proto::HeartbeatRequest request;
    request.set_report_id(report_id);
    const size_t end = std::min(replicas.size(), next + kReportPageReplicasMax);
    for (; next < end; ++next) {
      proto::ReportedReplica* entry = request.add_report();
      entry->set_segment_id(replicas[next].segment_id);
      entry->set_length(replicas[next].length);
      entry->set_sealed(replicas[next].sealed);
      entry->set_corrupt(replicas[next].corrupt);
    }
    request.set_report_done(next == replicas.size());
    absl::StatusOr<proto::HeartbeatResponse> response = BeatOnce(std::move(request));
    if (!response.ok()) {
      // Meta asks again at a later heartbeat.
      LOG(WARNING) << "replica report " << report_id << " to meta failed: " << response.status();
      return;
    }
  } while (next < replicas.size());
  VLOG(1) << "sent replica report " << report_id << " of " << replicas.size() << " replicas";
}

}  // namespace logfs::segd
