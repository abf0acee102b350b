// Namespace: the segment-server registry (registration, heartbeats, the
// live and failing servers) and statfs.
#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/failure_domain.h"
#include "store/format/limits.h"
#include "store/meta/internal/namespace_txn.h"
#include "store/meta/namespace.h"
#include "store/meta/placement.h"

namespace logfs::meta {
namespace {
constexpr int64_t kNanosPerMilli = 1000 * 1000;
}  // namespace

bool Namespace::ServerLive(const ServerState& server) const {
  return server.last_seen_ns != 0 &&
         NowNs() - server.last_seen_ns <= options_.dead_server_ms * kNanosPerMilli;
}

void Namespace::ReportServersFailing(const google::protobuf::RepeatedField<uint64_t>& server_ids) {
  const int64_t now = NowNs();
  for (uint64_t id : server_ids) {
    auto it = servers_.find(id);
    if (it != servers_.end()) it->second.failure_reported_ns = now;
  }
}

uint64_t Namespace::cluster_id() const {
  absl::MutexLock lock(&mu_);
  return cluster_id_;
}

absl::StatusOr<uint64_t> Namespace::RegisterServer(const proto::RegisterServerRequest& request) {
  const uint64_t ours = cluster_id();
  if (request.cluster_id() != 0 && request.cluster_id() != ours) {
    // Its replicas belong to files this meta does not know: taken in, they
    // would all be strays, deleted after the grace.
    return absl::FailedPreconditionError(absl::StrCat(
        "the data dir ", request.data_dir(), " of the segment server at ", request.address(),
        " belongs to cluster ", request.cluster_id(), ", this meta serves cluster ", ours,
        " (did meta lose its database, or is this the wrong --meta?); its replicas are kept. "
        "To join this cluster, give the server an empty data dir"));
  }
  // Bounded: addresses go into every segment meta returns (store/format/limits.h).
  if (request.address().size() > format::kServerAddressBytesMax ||
      request.host().size() > format::kServerHostBytesMax) {
    return PosixError(EINVAL, absl::StrCat("server address or host name longer than ",
                                           format::kServerAddressBytesMax, " bytes"));
  }
  RETURN_IF_ERROR(format::ValidateFailureDomain(request.failure_domain()));
  std::string holder;
  uint64_t holder_incarnation = 0;
  {
    absl::MutexLock lock(&mu_);
    holder = ConflictingHolder(request);
    if (!holder.empty()) holder_incarnation = servers_.at(request.server_id()).incarnation;
  }
  if (!holder.empty()) {
    // Asked without the mutex. A holder that answers as itself is a second
    // live process with this id (a copied data dir, a wrong --server_id);
    // one that does not was restarted or died, and this is its successor.
    auto who = segment_servers_->Identify(holder);
    if (who.ok() && who->server_id() == request.server_id() &&
        who->incarnation() == holder_incarnation) {
      return absl::FailedPreconditionError(
          absl::StrCat("server id ", request.server_id(), " is held by a live segment server at ",
                       holder, "; refusing a second one claiming it from ", request.address(),
                       " (data dir ", request.data_dir(),
                       "): stop one of them, or give this one an empty data dir without "
                       "--server_id"));
    }
  }
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<uint64_t> {
    Txn txn(db_);
    uint64_t id = request.server_id();
    if (id == 0 || servers_.count(id) == 0) id = AllocateId(txn, MetaCounter::kNextServerId);
    proto::RegisterServerRequest record = request;
    record.set_server_id(id);
    txn.batch().PutServer(record);
    RETURN_IF_ERROR(txn.Commit());
    ServerState& state = servers_[id];
    if (state.incarnation != request.incarnation()) {
      // A new process (a restart, maybe on a new disk): what meta learned
      // from the old one's reports no longer holds; ask for a report now.
      state.reports = ReplicaReportState();
      state.incarnation = request.incarnation();
      state.disk_failure.clear();
    }
    state.probed_ns = 0;  // maybe a new address: dial it again
    state.record = std::move(record);
    state.last_seen_ns = NowNs();
    state.reported = true;
    state.capacity_bytes = request.capacity_bytes();
    state.free_bytes = request.free_bytes();
    return id;
  });
}

std::string Namespace::ConflictingHolder(const proto::RegisterServerRequest& request) const {
  auto it = servers_.find(request.server_id());
  if (it == servers_.end()) return "";
  const ServerState& held = it->second;
  if (held.incarnation == 0 || request.incarnation() == 0 ||
      held.incarnation == request.incarnation() || !ServerLive(held)) {
    return "";
  }
  // The same address on the same host cannot be bound by two processes:
  // the holder is gone.
  if (held.record.address() == request.address() && held.record.host() == request.host()) {
    return "";
  }
  return held.record.address();
}

absl::StatusOr<proto::HeartbeatResponse> Namespace::Heartbeat(
    const proto::HeartbeatRequest& request) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                    mu_) -> absl::StatusOr<proto::HeartbeatResponse> {
    proto::HeartbeatResponse response;
    auto it = servers_.find(request.server_id());
    if (it == servers_.end()) {
      response.set_reregister(true);
      return response;
    }
    ServerState& server = it->second;
    if (request.incarnation() != 0 && server.incarnation != 0 &&
        request.incarnation() != server.incarnation) {
      // Another process registered with this id after this one was taken
      // for gone: its heartbeats must not keep the id alive.
      return absl::FailedPreconditionError(absl::StrCat(
          "server id ", request.server_id(), " now belongs to another segment server process (at ",
          server.record.address(), "); stop this one"));
    }
    if (server.incarnation == 0) server.incarnation = request.incarnation();
    server.last_seen_ns = NowNs();
    server.reported = true;
    server.capacity_bytes = request.capacity_bytes();
    server.free_bytes = request.free_bytes();
    if (request.disk_failure() != server.disk_failure) {
      if (!request.disk_failure().empty()) {
        LOG(ERROR) << "segment server " << request.server_id() << " (" << server.record.address()
                   << ") failed: " << request.disk_failure() << "; no new segments go there";
      }
      server.disk_failure = request.disk_failure();
    }
    HandleReports(server, request, &response);
    // Each pending deletion is handed out once: it leaves the database before
    // the reply. A server that crashes before deleting keeps a stray replica.
    // This heartbeat comes after the server ran the deletions of the last
    // reply (MetaHeartbeat runs them first).
    server.deletions_in_flight.clear();
    ASSIGN_OR_RETURN(std::vector<uint64_t> segment_ids,
                     db_->ListPendingDeletions(request.server_id(), kDeletionsPerHeartbeatMax));
    if (segment_ids.empty()) return response;
    server.deletions_in_flight = segment_ids;
    MetadataDb::Batch batch;
    for (uint64_t segment_id : segment_ids) {
      batch.DeletePendingDeletion(request.server_id(), segment_id);
      response.add_delete_segments(segment_id);
    }
    RETURN_IF_ERROR(db_->Stage(batch).status());
    return response;
  });
}

absl::StatusOr<proto::StatFsResponse> Namespace::StatFs() {
  absl::MutexLock lock(&mu_);
  proto::StatFsResponse response;
  uint64_t capacity = 0;
  uint64_t free = 0;
  uint32_t live = 0;
  for (const auto& [id, server] : servers_) {
    if (!ServerLive(server)) continue;
    capacity += server.capacity_bytes;
    free += server.free_bytes;
    ++live;
  }
  uint32_t divisor = std::max<uint32_t>(1, options_.default_replication);
  response.set_capacity_bytes(capacity / divisor);
  response.set_free_bytes(free / divisor);
  response.set_inodes(inode_count_);
  response.set_live_servers(live);
  return response;
}

size_t Namespace::ProbeServerAddresses(size_t max) {
  struct Probe {
    uint64_t id;
    uint64_t incarnation;
    std::string address;
  };
  std::vector<Probe> probes;
  {
    absl::MutexLock lock(&mu_);
    const int64_t now = NowNs();
    // Round the servers from the one after the cursor, each at most once.
    auto it = servers_.upper_bound(probe_cursor_);
    for (size_t step = 0; step < servers_.size() && probes.size() < max; ++step, ++it) {
      if (it == servers_.end()) it = servers_.begin();
      const ServerState& server = it->second;
      const bool due = server.probed_ns == 0 || !server.unreachable.empty() ||
                       now - server.probed_ns >= kReachableReprobeMs * kNanosPerMilli;
      if (!due || !ServerLive(server)) continue;
      probes.push_back({it->first, server.incarnation, server.record.address()});
      probe_cursor_ = it->first;
    }
  }
  for (const Probe& probe : probes) {
    auto who = segment_servers_->Identify(probe.address);
    std::string unreachable;
    if (!who.ok()) {
      unreachable = absl::StrCat("meta cannot dial ", probe.address, ": ", who.status().message());
    } else if (who->server_id() != probe.id) {
      unreachable = absl::StrCat(probe.address, " answers as server ", who->server_id());
    }
    unreachable.resize(std::min(unreachable.size(), format::kUnreachableBytesMax));
    absl::MutexLock lock(&mu_);
    auto it = servers_.find(probe.id);
    // A server that registered again meanwhile is dialled anew.
    if (it == servers_.end() || it->second.incarnation != probe.incarnation) continue;
    if (unreachable != it->second.unreachable) {
      if (unreachable.empty()) {
        LOG(INFO) << "segment server " << probe.id << " answers at " << probe.address;
      } else {
        LOG(WARNING) << "segment server " << probe.id << " is registered at an address meta "
                     << "cannot reach (check its --advertise): " << unreachable;
      }
    }
    it->second.probed_ns = NowNs();
    it->second.unreachable = std::move(unreachable);
  }
  return probes.size();
}

}  // namespace logfs::meta
