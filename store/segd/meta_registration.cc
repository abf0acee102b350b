#include "store/segd/meta_registration.h"

#include <glog/logging.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/status/macros.h"
#include "src/status/status_text.h"
#include "src/util/log_rate_limit.h"
#include "store/format/error_codec.h"
#include "store/format/logfs.pb.h"
#include "store/format/wire_version.h"

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

std::vector<std::string> SplitMetaAddresses(absl::string_view list) {
  std::vector<std::string> addresses;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    addresses.emplace_back(absl::StripAsciiWhitespace(part));
  }
  return addresses;
}

MetaHeartbeat::MetaHeartbeat(const MetaHeartbeatOptions& options, ReplicaStore* store,
                             MetaFence* fence, DeleteFn on_delete, DeleteIdleFn on_delete_stray)
    : options_(options),
      store_(store),
      fence_(fence),
      on_delete_(std::move(on_delete)),
      on_delete_stray_(std::move(on_delete_stray)) {
  CHECK(!options_.meta_addresses.empty()) << "no meta address";
  CHECK(fence_ != nullptr);
  work_.emplace(io_.get_executor());
  io_thread_ = std::thread([this] { io_.run(); });
  for (const std::string& address : options_.meta_addresses) {
    links_.push_back(std::make_unique<Link>(Link{address, NewClient(address), {}}));
  }
}

MetaHeartbeat::~MetaHeartbeat() { Stop(); }

std::unique_ptr<client::MetaClient> MetaHeartbeat::NewClient(const std::string& address) {
  client::MetaClientOptions meta_options;
  meta_options.timeout = absl::Milliseconds(options_.rpc_timeout_ms);
  meta_options.retry_window = std::nullopt;  // Run's next beat is the retry
  return std::make_unique<client::MetaClient>(io_, rpc::RpcClient::Create(io_, address),
                                              meta_options);
}

absl::StatusOr<std::unique_ptr<MetaHeartbeat>> MetaHeartbeat::Start(
    const MetaHeartbeatOptions& options, ReplicaStore* store, MetaFence* fence, DeleteFn on_delete,
    DeleteIdleFn on_delete_stray) {
  std::unique_ptr<MetaHeartbeat> link(
      new MetaHeartbeat(options, store, fence, std::move(on_delete), std::move(on_delete_stray)));
  RETURN_IF_ERROR(link->RegisterWithin(options.register_wait));
  for (const std::unique_ptr<Link>& each : link->links_) {
    each->thread = std::thread([raw = link.get(), to = each.get()] { raw->Run(to); });
  }
  return link;
}

void MetaHeartbeat::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
    for (const std::unique_ptr<Link>& extra : extra_) extra->client->Shutdown();
  }
  // Shutdown fails an in-flight Call, so the heartbeat threads return soon.
  for (const std::unique_ptr<Link>& link : links_) link->client->Shutdown();
  for (const std::unique_ptr<Link>& link : links_) {
    if (link->thread.joinable()) link->thread.join();
  }
  work_.reset();
  io_.stop();
  io_thread_.join();
}

client::MetaClient* MetaHeartbeat::ClientFor(const std::string& address) {
  for (const std::unique_ptr<Link>& link : links_) {
    if (link->address == address) return link->client.get();
  }
  absl::MutexLock lock(&mu_);
  for (const std::unique_ptr<Link>& extra : extra_) {
    if (extra->address == address) return extra->client.get();
  }
  extra_.push_back(std::make_unique<Link>(Link{address, NewClient(address), {}}));
  if (stop_) extra_.back()->client->Shutdown();
  return extra_.back()->client.get();
}

absl::Status MetaHeartbeat::RegisterWithin(absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  absl::Duration backoff = absl::Milliseconds(200);
  for (int round = 1;; ++round) {
    absl::Status registered = Register();
    if (!absl::IsUnavailable(registered) || absl::Now() + backoff > deadline) return registered;
    LOG(WARNING) << registered.message() << " (round " << round << "); retrying in "
                 << absl::FormatDuration(backoff) << ", giving up in "
                 << absl::FormatDuration(deadline - absl::Now());
    // Sleeps in short steps, so a stop request is seen within 100 ms.
    for (absl::Time until = absl::Now() + backoff; absl::Now() < until;) {
      if (options_.cancelled && options_.cancelled()) {
        return absl::CancelledError("stopped while waiting for meta");
      }
      absl::SleepFor(std::min(absl::Milliseconds(100), until - absl::Now()));
    }
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::Status MetaHeartbeat::Register() {
  absl::MutexLock lock(&register_mu_);
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
  *request.mutable_version() = format::OwnVersion("segd");
  // Each listed meta in turn; a standby's answer names the active, which
  // is asked next. Bounded: two attempts per listed meta.
  const size_t attempts_max = 2 * links_.size();
  size_t next = 0;
  std::string redirect;
  absl::Status last;
  for (size_t attempt = 0; attempt < attempts_max; ++attempt) {
    std::string address;
    if (!redirect.empty()) {
      address = std::exchange(redirect, "");
    } else if (next < links_.size()) {
      address = links_[next++]->address;
    } else {
      break;
    }
    last = RegisterWith(address, *ClientFor(address), request);
    std::string active;
    if (format::IsNotActiveMeta(last, &active)) {
      if (active != address) redirect = active;
      continue;
    }
    if (last.ok() || !absl::IsUnavailable(last)) return last;
  }
  if (links_.size() == 1) return last;
  return absl::UnavailableError(absl::StrCat("cannot register with an active meta of ",
                                             absl::StrJoin(options_.meta_addresses, ","), ": ",
                                             last.message()));
}

absl::Status MetaHeartbeat::RegisterWith(const std::string& address, client::MetaClient& meta,
                                         const proto::RegisterServerRequest& request) {
  absl::StatusOr<proto::RegisterServerResponse> registered = meta.RegisterServer(request);
  const absl::Status& status = registered.status();
  if (format::IsNotActiveMeta(status)) return status;
  if (absl::IsFailedPrecondition(status)) {
    // Meta refused this identity: say so as it is, do not retry.
    return absl::FailedPreconditionError(
        absl::StrCat("meta at ", address, " refused to register this server: ", status.message()));
  }
  if (!status.ok()) {
    // No answer in time is the same as no answer (retried: RegisterWithin);
    // any other refusal (a wrong secret: kUnauthenticated) keeps its code
    // and is final.
    const absl::StatusCode code =
        absl::IsDeadlineExceeded(status) ? absl::StatusCode::kUnavailable : status.code();
    return absl::Status(
        code, absl::StrCat("cannot register with meta at ", address, ": ", StatusText(status)));
  }
  if (absl::Status shared = format::CheckPeerVersion(
          request.version(),
          format::PeerVersion(registered->has_version(), registered->version(), "meta"), address);
      !shared.ok()) {
    LOG(ERROR) << "refused: " << shared.message();
    return shared;
  }
  if (registered->server_id() == 0) {
    return absl::UnavailableError("meta returned server id 0");
  }
  if (registered->server_id() != store_->server_id() ||
      registered->cluster_id() != store_->cluster_id()) {
    RETURN_IF_ERROR(store_->SetServerId(registered->server_id(), registered->cluster_id()));
  }
  LOG(INFO) << "registered with meta at " << address << " as server " << registered->server_id()
            << " (" << options_.advertise_address << ")";
  return absl::OkStatus();
}

void MetaHeartbeat::Run(Link* link) {
  const absl::Duration interval = absl::Milliseconds(options_.heartbeat_interval_ms);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval)) return;
    }
    Beat(*link);
  }
}

absl::StatusOr<proto::HeartbeatResponse> MetaHeartbeat::BeatOnce(Link& link,
                                                                 proto::HeartbeatRequest request,
                                                                 bool* acted) {
  *acted = false;
  DiskSpace space = DiskSpaceOf(store_->data_dir());
  request.set_server_id(store_->server_id());
  request.set_incarnation(options_.incarnation);
  request.set_capacity_bytes(space.capacity_bytes);
  request.set_free_bytes(space.free_bytes);
  if (absl::Status health = store_->Health(); !health.ok()) {
    request.set_disk_failure(std::string(health.message().substr(0, format::kDiskFailureBytesMax)));
  }
  absl::StatusOr<proto::HeartbeatResponse> response = link.client->Heartbeat(request);
  heartbeats_sent_.fetch_add(1);
  if (!response.ok()) return response.status();
  if (response->standby()) return response;  // noted by a standby: nothing to do
  absl::StatusOr<MetaFence::Hold> admitted =
      fence_->Admit(response->meta_epoch(), MetaFence::Zero::kCompared);
  if (!admitted.ok()) {
    LOGFS_LOG_EVERY_MS(WARNING, 10000)
        << "ignoring the heartbeat answer of meta at " << link.address << ": " << admitted.status();
    return response;
  }
  *acted = true;
  // Under the fence's hold: no meta of a higher epoch is admitted while
  // these deletions run.
  for (uint64_t segment_id : response->delete_segments()) on_delete_(segment_id);
  for (uint64_t segment_id : response->delete_strays()) {
    on_delete_stray_(segment_id, response->stray_grace_ms());
  }
  return response;
}

void MetaHeartbeat::Beat(Link& link) {
  bool acted = false;
  absl::StatusOr<proto::HeartbeatResponse> response =
      BeatOnce(link, proto::HeartbeatRequest(), &acted);
  if (!response.ok()) {
    // kFailedPrecondition: meta gave this server's id to another process
    // (ours was taken for dead); the operator must stop one of the two.
    LOGFS_LOG_EVERY_MS(WARNING, 10000)
        << "heartbeat to meta at " << link.address << " failed: " << response.status();
    return;
  }
  if (!acted) return;
  if (response->reregister()) {
    absl::Status registered = Register();
    if (!registered.ok()) LOG(WARNING) << registered;
    return;
  }
  if (response->report_id() != 0) SendReport(link, response->report_id());
}

void MetaHeartbeat::SendReport(Link& link, uint64_t report_id) {
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
    bool acted = false;
    absl::StatusOr<proto::HeartbeatResponse> response = BeatOnce(link, std::move(request), &acted);
    if (!response.ok() || !acted) {
      // Meta asks again at a later heartbeat.
      LOG(WARNING) << "replica report " << report_id << " to meta at " << link.address
                   << " failed: "
                   << (response.ok() ? "it answered as no longer the active"
                                     : StatusText(response.status()));
      return;
    }
  } while (next < replicas.size());
  VLOG(1) << "sent replica report " << report_id << " of " << replicas.size() << " replicas";
}

}  // namespace logfs::segd
