#include "store/meta_heartbeat.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "store/logfs.pb.h"
#include "store/message_type.h"

namespace logfs::store {

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
                             DeleteFn on_delete)
    : options_(options), store_(store), on_delete_(std::move(on_delete)) {
  work_.emplace(io_.get_executor());
  io_thread_ = std::thread([this] { io_.run(); });
  client_ = RpcClient::Create(io_, options_.meta_address);
}

MetaHeartbeat::~MetaHeartbeat() { Stop(); }

absl::StatusOr<std::unique_ptr<MetaHeartbeat>> MetaHeartbeat::Start(
    const MetaHeartbeatOptions& options, ReplicaStore* store, DeleteFn on_delete) {
  std::unique_ptr<MetaHeartbeat> link(new MetaHeartbeat(options, store, std::move(on_delete)));
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
  client_->Shutdown();
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
  request.set_server_id(store_->server_id());
  proto::RegisterServerResponse response;
  absl::Status status = client_->Call(MessageType::kRegisterServer, request, &response,
                                      absl::Milliseconds(options_.rpc_timeout_ms));
  if (!status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot register with meta at ",
                                               options_.meta_address, ": ", status.ToString()));
  }
  if (response.server_id() == 0) {
    return absl::UnavailableError("meta returned server id 0");
  }
  if (response.server_id() != store_->server_id()) {
    RETURN_IF_ERROR(store_->SetServerId(response.server_id()));
  }
  LOG(INFO) << "registered with meta at " << options_.meta_address << " as server "
            << response.server_id() << " (" << options_.advertise_address << ")";
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

void MetaHeartbeat::Beat() {
  DiskSpace space = DiskSpaceOf(store_->data_dir());
  proto::HeartbeatRequest request;
  request.set_server_id(store_->server_id());
  request.set_capacity_bytes(space.capacity_bytes);
  request.set_free_bytes(space.free_bytes);
  proto::HeartbeatResponse response;
  absl::Status status = client_->Call(MessageType::kHeartbeat, request, &response,
                                      absl::Milliseconds(options_.rpc_timeout_ms));
  heartbeats_sent_.fetch_add(1);
  if (!status.ok()) {
    LOG_EVERY_N(WARNING, 10) << "heartbeat to meta at " << options_.meta_address
                             << " failed: " << status;
    return;
  }
  for (uint64_t segment_id : response.delete_segments()) on_delete_(segment_id);
  if (response.reregister()) {
    absl::Status registered = Register();
    if (!registered.ok()) LOG(WARNING) << registered;
  }
}

}  // namespace logfs::store
