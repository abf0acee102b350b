// Namespace: segment servers' registration (a second live process with
// one id is refused), heartbeats and their deletions, statfs, and probes
// of advertised addresses; the state is ServerRegistry's.
#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/failure_domain.h"
#include "store/format/limits.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/placement.h"

namespace logfs::meta {

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
    holder = servers_.ConflictingHolder(request, NowNs());
    if (!holder.empty()) holder_incarnation = servers_.Find(request.server_id())->incarnation;
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
    if (id == 0 || servers_.Find(id) == nullptr) id = AllocateId(txn, MetaCounter::kNextServerId);
    proto::RegisterServerRequest record = request;
    record.set_server_id(id);
    txn.batch().PutServer(record);
    RETURN_IF_ERROR(txn.Commit());
    servers_.Register(std::move(record), NowNs());
    return id;
  });
}

absl::StatusOr<proto::HeartbeatResponse> Namespace::Heartbeat(
    const proto::HeartbeatRequest& request) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                    mu_) -> absl::StatusOr<proto::HeartbeatResponse> {
    proto::HeartbeatResponse response;
    ServerState* found = servers_.Find(request.server_id());
    if (found == nullptr) {
      response.set_reregister(true);
      return response;
    }
    ServerState& server = *found;
    if (request.incarnation() != 0 && server.incarnation != 0 &&
        request.incarnation() != server.incarnation) {
      // Another process registered with this id after this one was taken
      // for gone: its heartbeats must not keep the id alive.
      return absl::FailedPreconditionError(absl::StrCat(
          "server id ", request.server_id(), " now belongs to another segment server process (at ",
          server.record.address(), "); stop this one"));
    }
    servers_.Beat(server, request, NowNs());
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
  const ServerRegistry::LiveSpace live = servers_.SumLiveSpace(NowNs());
  uint32_t divisor = std::max<uint32_t>(1, options_.default_replication);
  response.set_capacity_bytes(live.capacity_bytes / divisor);
  response.set_free_bytes(live.free_bytes / divisor);
  response.set_inodes(inode_count_);
  response.set_live_servers(live.servers);
  return response;
}

size_t Namespace::ProbeServerAddresses(size_t max) {
  std::vector<ServerRegistry::Probe> probes;
  {
    absl::MutexLock lock(&mu_);
    probes = servers_.DueProbes(max, kReachableReprobeMs * kNanosPerMilli, NowNs());
  }
  for (const ServerRegistry::Probe& probe : probes) {
    auto who = segment_servers_->Identify(probe.address);
    std::string unreachable;
    if (!who.ok()) {
      unreachable = absl::StrCat("meta cannot dial ", probe.address, ": ", who.status().message());
    } else if (who->server_id() != probe.server_id) {
      unreachable = absl::StrCat(probe.address, " answers as server ", who->server_id());
    }
    unreachable.resize(std::min(unreachable.size(), format::kUnreachableBytesMax));
    absl::MutexLock lock(&mu_);
    servers_.RecordProbe(probe, std::move(unreachable), NowNs());
  }
  return probes.size();
}

}  // namespace logfs::meta
