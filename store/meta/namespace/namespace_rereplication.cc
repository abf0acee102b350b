// Namespace: inspection (ListServers, ListSegments) and the meta half of
// re-replication: planning copies of under-replicated sealed segments and
// recording them (docs/rpc.md "Re-replication").
#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/failure_domain.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/format/segment_lengths.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/placement.h"

namespace logfs::meta {
namespace {

// Inodes per ListSegments page at most (bounds one reply and one lock hold).
constexpr uint32_t kListInodesMax = 1024;
// Servers ChooseCopyTarget passes over (the segment pending deletion
// there) before it gives up for this pass.
constexpr size_t kCopyTargetTriesMax = 4;

proto::Segment* FindSegment(proto::Inode* inode, uint64_t segment_id) {
  for (auto& segment : *inode->mutable_segments()) {
    if (segment.id() == segment_id) return &segment;
  }
  return nullptr;
}

bool HasReplica(const proto::Segment& segment, uint64_t server_id) {
  return std::any_of(segment.replicas().begin(), segment.replicas().end(),
                     [&](const proto::Replica& r) { return r.server_id() == server_id; });
}

// Start of the page after `inodes` (a page of up to `max_inodes`); 0: none.
uint64_t NextIno(const std::vector<proto::Inode>& inodes, size_t max_inodes) {
  if (inodes.size() < max_inodes || inodes.empty()) return 0;
  return inodes.back().attr().ino() + 1;
}

}  // namespace

absl::StatusOr<proto::ListServersResponse> Namespace::ListServers(uint64_t start_server_id) {
  absl::MutexLock lock(&mu_);
  proto::ListServersResponse response;
  const int64_t now = NowNs();
  const std::map<uint64_t, ServerState>& servers = servers_.servers();
  for (auto it = servers.lower_bound(start_server_id); it != servers.end(); ++it) {
    const auto& [id, server] = *it;
    if (static_cast<size_t>(response.servers_size()) == format::kListServersPageMax) {
      response.set_next_server_id(id);
      break;
    }
    proto::ServerStatus* status = response.add_servers();
    status->set_server_id(id);
    status->set_address(server.record.address());
    status->set_host(server.record.host());
    status->set_live(ServerLive(server));
    status->set_capacity_bytes(server.capacity_bytes);
    status->set_free_bytes(server.free_bytes);
    status->set_disk_failure(server.disk_failure);
    status->set_failure_domain(FailureDomainOf(server.record));
    status->set_unreachable(server.unreachable);
    // A restarted meta counts registered servers live for a while before
    // they report (Load), but knows neither their space nor a heartbeat.
    status->set_heartbeat_age_ms(server.last_seen_ns == 0 || !server.reported
                                     ? -1
                                     : (now - server.last_seen_ns) / kNanosPerMilli);
  }
  return response;
}

absl::StatusOr<proto::ListSegmentsResponse> Namespace::ListSegments(uint64_t start_ino,
                                                                    uint32_t max_inodes) {
  const size_t page = max_inodes == 0 ? kListInodesMax : std::min(max_inodes, kListInodesMax);
  // RocksDB reads need no lock; each inode is one consistent snapshot.
  ASSIGN_OR_RETURN(std::vector<proto::Inode> inodes, db_->ListInodes(start_ino, page));
  proto::ListSegmentsResponse response;
  response.set_next_ino(NextIno(inodes, page));
  absl::MutexLock lock(&mu_);
  size_t bytes = 0;
  for (const auto& inode : inodes) {
    if (!S_ISREG(inode.attr().mode())) continue;
    proto::Inode file = ReplyInode(inode);  // xattrs left out
    // Files with many segments fill the frame before max_inodes do: the
    // page ends before the first that does not fit (any one file fits:
    // store/format/limits.h), and the next starts at it.
    const size_t file_bytes = format::internal::LengthFieldBytes(file.ByteSizeLong());
    if (response.files_size() > 0 && bytes + file_bytes > format::kListSegmentsPageBytesMax) {
      response.set_next_ino(inode.attr().ino());
      break;
    }
    bytes += file_bytes;
    *response.add_files() = std::move(file);
  }
  return response;
}

absl::StatusOr<RereplicationPlan> Namespace::PlanRereplication(uint64_t start_ino,
                                                               size_t max_inodes, size_t max_tasks,
                                                               size_t max_spread_tasks) {
  // Read without the lock: the plan is a hint, CommitReplica re-checks.
  ASSIGN_OR_RETURN(std::vector<proto::Inode> inodes, db_->ListInodes(start_ino, max_inodes));
  RereplicationPlan plan;
  plan.next_ino = NextIno(inodes, max_inodes);
  absl::MutexLock lock(&mu_);
  const int64_t now = NowNs();
  const std::vector<std::string> live_domains = servers_.LiveHealthyDomains(now);
  size_t scanned = 0;  // inodes looked at for missing replicas
  std::set<uint64_t> planned;  // segments seen: a shared one is copied once per pass
  for (const auto& inode : inodes) {
    ++scanned;
    if (!S_ISREG(inode.attr().mode())) continue;
    const uint64_t ino = inode.attr().ino();
    if (OpenLastSegment(inode) != nullptr && !mounts_.Leased(ino) && !mounts_.Lapsed(ino)) {
      // An open segment nobody holds a lease on: its writer died while
      // meta was down (leases live in memory), or is alive and claims it
      // by heartbeat within a lease timeout; else meta recovers it.
      LOG(INFO) << "inode " << ino << " has an open segment and no writer lease: meta "
                << "recovers it in " << options_.lease_timeout_ms
                << " ms unless its writer claims it";
      mounts_.AddLapsed(
          ino, 0,
          now + (options_.lease_timeout_ms - options_.lease_recovery_delay_ms) * kNanosPerMilli);
    }
    for (const auto& segment : inode.segments()) {
      if (!planned.insert(segment.id()).second) continue;
      CountSegment(inode, segment, live_domains, &plan.census);
      PlanSegment(inode, segment, max_tasks - plan.tasks.size(), &plan.tasks);
    }
    if (plan.tasks.size() >= max_tasks) {
      // Resume after this inode, so a copy that keeps failing cannot
      // starve the rest of the namespace.
      plan.next_ino = inode.attr().ino() + 1;
      break;
    }
  }
  // Then spreads, over the same inodes, with the room missing replicas
  // left: a lost replica matters more than a narrow spread.
  inodes.resize(scanned);
  PlanSpreads(inodes, std::min(max_tasks, plan.tasks.size() + max_spread_tasks), &plan.tasks);
  return plan;
}

void Namespace::CountSegment(const proto::Inode& inode, const proto::Segment& segment,
                             const std::vector<std::string>& live_domains,
                             SegmentCensus* census) const {
  std::vector<std::string> domains;
  for (const auto& replica : segment.replicas()) {
    const ServerState* server = servers_.Find(replica.server_id());
    if (server != nullptr) domains.push_back(FailureDomainOf(server->record));
  }
  size_t level = 0;
  size_t distinct = 0;
  if (!format::NeedlesslySharedDomain(domains, live_domains, &level, &distinct).empty()) {
    ++census->misplaced_segments;
  }
  if (!format::ReplicasSealed(segment)) {
    ++census->open_segments;
    return;
  }
  const uint32_t wanted = Replication(inode);
  uint32_t live = 0;
  for (const auto& replica : segment.replicas()) live += ServerIdLive(replica.server_id()) ? 1 : 0;
  if (live >= wanted) return;
  ++census->under_replicated_segments;
  census->under_replicated_bytes += segment.length();
  census->missing_copies += wanted - live;
  if (live == 0) ++census->lost_segments;
}

void Namespace::PlanSegment(const proto::Inode& inode, const proto::Segment& segment, size_t room,
                            std::vector<RereplicationTask>* tasks) {
  if (!format::ReplicasSealed(segment) || room == 0) return;
  const uint32_t wanted = Replication(inode);
  std::vector<uint64_t> holders;
  std::vector<std::string> sources;
  for (const auto& replica : segment.replicas()) {
    holders.push_back(replica.server_id());
    const ServerState* server = servers_.Find(replica.server_id());
    if (server != nullptr && ServerLive(*server)) sources.push_back(server->record.address());
  }
  // No live replica: nothing to copy from (fsck reports it).
  if (sources.empty() || sources.size() >= wanted) return;
  const size_t missing = std::min<size_t>(wanted - sources.size(), room);
  for (size_t i = 0; i < missing; ++i) {
    // Away from the domains of the replicas it keeps: the spread comes back.
    auto target = ChooseCopyTarget(segment.id(), holders, holders);
    if (!target.ok()) return;  // too few live servers: copy to those there are
    const uint64_t target_id = *target;
    holders.push_back(target_id);
    RereplicationTask task;
    task.ino = inode.attr().ino();
    task.segment_id = segment.id();
    task.epoch = segment.epoch();
    task.length = format::ReplicaLength(segment);
    task.source_addresses = sources;
    task.target_server_id = target_id;
    task.target_address = servers_.At(target_id).record.address();
    tasks->push_back(std::move(task));
  }
}

absl::StatusOr<uint64_t> Namespace::ChooseCopyTarget(uint64_t segment_id,
                                                     std::vector<uint64_t> excluded,
                                                     const std::vector<uint64_t>& kept) {
  for (size_t tries = 0; tries < kCopyTargetTriesMax; ++tries) {
    ASSIGN_OR_RETURN(std::vector<uint64_t> target, servers_.Place(1, excluded, kept, {}, NowNs()));
    const std::vector<uint64_t>& in_flight = servers_.At(target.front()).deletions_in_flight;
    auto pending = db_->HasPendingDeletion(target.front(), segment_id);
    if (pending.ok() && !*pending &&
        std::find(in_flight.begin(), in_flight.end(), segment_id) == in_flight.end()) {
      return target.front();
    }
    excluded.push_back(target.front());
  }
  return absl::UnavailableError(
      absl::StrCat("segment ", segment_id, " is pending deletion on its candidate targets"));
}

absl::Status Namespace::CommitReplica(const RereplicationTask& task) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    Txn txn(db_);
    auto inode = txn.Get(task.ino);
    if (!inode.ok() && AttachedErrno(inode.status()) != ESTALE) return inode.status();
    proto::Segment* segment = inode.ok() ? FindSegment(*inode, task.segment_id) : nullptr;
    if (segment != nullptr && HasReplica(*segment, task.target_server_id)) return absl::OkStatus();
    if (segment == nullptr || !format::ReplicasSealed(*segment) ||
        format::ReplicaLength(*segment) != task.length) {
      // The copy is of no use; its server deletes it at a heartbeat.
      txn.batch().AddPendingDeletion(task.target_server_id, task.segment_id);
      RETURN_IF_ERROR(txn.Commit());
      return absl::AbortedError(absl::StrCat("segment ", task.segment_id, " of inode ", task.ino,
                                             " changed while it was copied"));
    }
    segment->add_replicas()->set_server_id(task.target_server_id);
    DropDeadReplicas(txn, segment, Replication(**inode));
    if (task.spread) DropExcessReplica(txn, segment, Replication(**inode));
    txn.Put(*inode);
    RETURN_IF_ERROR(SyncSharedReplicas(txn, task.ino, *segment));
    return txn.Commit();
  });
}

void Namespace::DropDeadReplicas(Txn& txn, proto::Segment* segment, uint32_t wanted) {
  auto* replicas = segment->mutable_replicas();
  auto is_live = [&](const proto::Replica& r)
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return ServerIdLive(r.server_id()); };
  const auto live = std::count_if(replicas->begin(), replicas->end(), is_live);
  if (live < static_cast<int64_t>(wanted)) return;  // a dead server's copy may still be needed
  auto dead = std::stable_partition(replicas->begin(), replicas->end(), is_live);
  for (auto it = dead; it != replicas->end(); ++it) {
    txn.batch().AddPendingDeletion(it->server_id(), segment->id());
  }
  replicas->erase(dead, replicas->end());
}

}  // namespace logfs::meta
