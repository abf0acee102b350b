// Namespace: the segment-server registry, placement, mounts and their
// liveness, and statfs.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace.h"
#include "store/meta/internal/namespace_txn.h"

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

void Namespace::TouchMount(uint64_t mount_id) { mount_seen_ns_[mount_id] = NowNs(); }

bool Namespace::MountLive(uint64_t mount_id) const {
  auto it = mount_seen_ns_.find(mount_id);
  return it != mount_seen_ns_.end() &&
         NowNs() - it->second <= options_.lease_timeout_ms * kNanosPerMilli;
}

uint64_t Namespace::LiveLeaseHolder(uint64_t ino) const {
  auto it = leases_.find(ino);
  if (it == leases_.end() || !MountLive(it->second)) return 0;
  return it->second;
}

bool Namespace::Pinned(uint64_t ino) const { return pins_.count(ino) != 0; }

bool Namespace::Unpin(uint64_t ino, uint64_t mount_id) {
  auto it = pins_.find(ino);
  if (it == pins_.end()) return false;
  auto pin = it->second.find(mount_id);
  if (pin == it->second.end()) return false;
  if (--pin->second == 0) it->second.erase(pin);
  if (it->second.empty()) pins_.erase(it);
  return true;
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
      return absl::FailedPreconditionError(absl::StrCat(
          "server id ", request.server_id(), " is held by a live segment server at ", holder,
          "; refusing a second one claiming it from ", request.address(), " (data dir ",
          request.data_dir(), "): stop one of them, or give this one an empty data dir without "
          "--server_id"));
    }
  }
  absl::MutexLock lock(&mu_);
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
  }
  state.record = std::move(record);
  state.last_seen_ns = NowNs();
  state.reported = true;
  state.capacity_bytes = request.capacity_bytes();
  state.free_bytes = request.free_bytes();
  return id;
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
  absl::MutexLock lock(&mu_);
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
  HandleReports(server, request, &response);
  // Each pending deletion is handed out once: it leaves the database before
  // the reply. A server that crashes before deleting keeps a stray replica.
  ASSIGN_OR_RETURN(std::vector<uint64_t> segment_ids,
                   db_->ListPendingDeletions(request.server_id(), kDeletionsPerHeartbeatMax));
  if (segment_ids.empty()) return response;
  MetadataDb::Batch batch;
  for (uint64_t segment_id : segment_ids) {
    batch.DeletePendingDeletion(request.server_id(), segment_id);
    response.add_delete_segments(segment_id);
  }
  RETURN_IF_ERROR(db_->Write(batch));
  return response;
}

absl::StatusOr<uint64_t> Namespace::NewMount() {
  absl::MutexLock lock(&mu_);
  Txn txn(db_);
  uint64_t mount_id = AllocateId(txn, MetaCounter::kNextMountId);
  RETURN_IF_ERROR(txn.Commit());
  TouchMount(mount_id);
  return mount_id;
}

void Namespace::MountDisconnected(uint64_t mount_id) {
  absl::MutexLock lock(&mu_);
  mount_seen_ns_.erase(mount_id);  // MountLive() is false from now on
}

absl::Status Namespace::MountHeartbeat(uint64_t mount_id,
                                       const std::vector<uint64_t>& writing_inos) {
  absl::MutexLock lock(&mu_);
  TouchMount(mount_id);
  for (uint64_t ino : writing_inos) {
    auto lapsed = lapsed_leases_.find(ino);
    if (lapsed == lapsed_leases_.end() || LiveLeaseHolder(ino) != 0) continue;
    if (lapsed->second.mount_id != 0 && lapsed->second.mount_id != mount_id) continue;
    leases_[ino] = mount_id;
    lapsed_leases_.erase(lapsed);
  }
  return absl::OkStatus();
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

absl::Status Namespace::ExpireMounts() {
  absl::MutexLock lock(&mu_);
  const int64_t now = NowNs();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (MountLive(it->second)) {
      ++it;
      continue;
    }
    lapsed_leases_.emplace(it->first, LapsedLease{it->second, now});
    it = leases_.erase(it);
  }
  std::vector<uint64_t> unpinned;
  for (auto it = pins_.begin(); it != pins_.end();) {
    auto& by_mount = it->second;
    for (auto pin = by_mount.begin(); pin != by_mount.end();) {
      pin = MountLive(pin->first) ? std::next(pin) : by_mount.erase(pin);
    }
    if (by_mount.empty()) {
      unpinned.push_back(it->first);
      it = pins_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = mount_seen_ns_.begin(); it != mount_seen_ns_.end();) {
    it = MountLive(it->first) ? std::next(it) : mount_seen_ns_.erase(it);
  }
  const int64_t grace_end = now - options_.unlinked_grace_ms * kNanosPerMilli;
  for (auto it = unlinked_ns_.begin();
       it != unlinked_ns_.end() && unpinned.size() < kOrphansPerExpiryMax;) {
    if (it->second > grace_end) {
      ++it;
      continue;
    }
    unpinned.push_back(it->first);
    it = unlinked_ns_.erase(it);
  }
  return DeleteOrphans(unpinned);
}

absl::Status Namespace::DeleteOrphans(const std::vector<uint64_t>& inos) {
  // One synced batch for all of them: an `rm -rf` of a big tree leaves a
  // pass thousands of orphans, and a commit each would hold mu_ for as many
  // fsyncs.
  Txn txn(db_);
  for (uint64_t ino : inos) {
    if (Pinned(ino) || unlinked_ns_.count(ino) != 0) continue;
    auto inode = txn.Get(ino);
    if (!inode.ok() || (*inode)->attr().nlink() != 0) continue;  // gone, or not an orphan
    DeleteFile(txn, **inode);
    txn.batch().DeleteOrphan(ino);
  }
  return txn.Commit();
}

std::vector<uint64_t> Namespace::TakeLapsedOpenFiles() {
  absl::MutexLock lock(&mu_);
  const int64_t due = NowNs() - options_.lease_recovery_delay_ms * kNanosPerMilli;
  std::vector<uint64_t> files;
  for (auto it = lapsed_leases_.begin(); it != lapsed_leases_.end();) {
    const uint64_t ino = it->first;
    const LapsedLease lapsed = it->second;
    if (LiveLeaseHolder(ino) != 0) {  // opened for write again, or readopted
      it = lapsed_leases_.erase(it);
      continue;
    }
    if (lapsed.mount_id != 0 && MountLive(lapsed.mount_id)) {
      // Its connection broke and it came back (heartbeats again): it still
      // writes the file, and its appends must not be fenced.
      leases_[ino] = lapsed.mount_id;
      it = lapsed_leases_.erase(it);
      continue;
    }
    if (lapsed.since_ns > due) {
      ++it;
      continue;
    }
    auto inode = db_->GetInode(ino);
    if (inode.ok() && OpenLastSegment(*inode) != nullptr) files.push_back(ino);
    it = lapsed_leases_.erase(it);
  }
  return files;
}

void Namespace::RetryLeaseRecovery(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  lapsed_leases_.emplace(ino, LapsedLease{0, NowNs()});
}

absl::StatusOr<std::vector<uint64_t>> Namespace::PlaceReplicas(
    uint32_t replication, const std::vector<uint64_t>& excluded) const {
  // A server whose last heartbeat reported less free space than this gets
  // no new segments: its appends would fail with ENOSPC at once.
  constexpr uint64_t kMinFreeBytes = 4u << 20;
  std::vector<const ServerState*> live;
  size_t full = 0;
  for (const auto& [id, server] : servers_) {
    bool skip = std::find(excluded.begin(), excluded.end(), id) != excluded.end();
    if (skip || !ServerLive(server)) continue;
    // free_bytes is 0 until a server's first heartbeat: not "full" then.
    if (server.free_bytes < kMinFreeBytes && server.capacity_bytes > 0) {
      ++full;
      continue;
    }
    live.push_back(&server);
  }
  if (live.size() < replication) {
    if (live.size() + full >= replication) {
      return PosixError(ENOSPC, absl::StrCat("no space: ", full, " of the ", live.size() + full,
                                             " live segment servers are full"));
    }
    return absl::UnavailableError(absl::StrCat("need ", replication,
                                               " live segment servers for a new segment, ",
                                               live.size() + full, " live"));
  }
  // Servers a writer just saw fail go last: for --dead_server_ms after a
  // crash meta still counts a dead server live, and every segment placed
  // on it costs its writer a failed create and a new placement.
  // Then most free space first, compared in GiB so that servers sharing a disk
  // (or nearly equal) count as ties; ties rotate with every placement so
  // that new segments spread over all servers.
  constexpr uint64_t kFreeSpaceGranuleBytes = 1ull << 30;
  const uint64_t rotation = placements_++;
  const uint64_t n = live.size();
  std::sort(live.begin(), live.end(), [&](const ServerState* a, const ServerState* b) {
    if (Suspect(*a) != Suspect(*b)) return Suspect(*b);
    uint64_t fa = a->free_bytes / kFreeSpaceGranuleBytes;
    uint64_t fb = b->free_bytes / kFreeSpaceGranuleBytes;
    if (fa != fb) return fa > fb;
    return (a->record.server_id() + rotation) % n < (b->record.server_id() + rotation) % n;
  });
  std::vector<uint64_t> ids;
  for (uint32_t i = 0; i < replication; ++i) ids.push_back(live[i]->record.server_id());
  return ids;
}

void Namespace::FillAddresses(proto::Segment* segment) const {
  for (auto& replica : *segment->mutable_replicas()) {
    auto it = servers_.find(replica.server_id());
    replica.set_address(it == servers_.end() ? "" : it->second.record.address());
  }
}

}  // namespace logfs::meta
