// Namespace: re-replication that restores a segment's spread over failure
// domains (docs/rpc.md "Re-replication"). A sealed segment with its full
// replication whose live replicas share a domain they need not share
// (format::NeedlesslySharedDomain: after a rack was down, its segments got
// their new replicas in the other racks) gets one copy more in a domain it
// does not use yet; once that copy is recorded, one replica in the shared
// domain leaves the segment and its server deletes it. This is HDFS's
// handling of mis-replicated blocks (BlockManager: a block that violates
// the placement policy gets a replica in a new rack, then the excess
// replica of the over-full rack is chosen and removed).
#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "store/format/failure_domain.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/format/segment_lengths.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/placement.h"

namespace logfs::meta {
namespace {

// PlanSpreads looks for targets for at most this many misplaced segments
// per task it may add: where the unused domains' servers are full, every
// misplaced segment would cost a placement under the mutex.
constexpr size_t kSpreadSegmentsPerTask = 8;

}  // namespace

void Namespace::PlanSpreads(const std::vector<proto::Inode>& inodes, size_t max_tasks,
                            std::vector<RereplicationTask>* tasks) {
  if (tasks->size() >= max_tasks) return;
  const std::vector<std::string> live_domains = servers_.LiveHealthyDomains(NowNs());
  size_t searches = (max_tasks - tasks->size()) * kSpreadSegmentsPerTask;
  for (const auto& inode : inodes) {
    if (!S_ISREG(inode.attr().mode())) continue;
    for (const auto& segment : inode.segments()) {
      if (tasks->size() >= max_tasks || searches == 0) return;
      if (PlanSpread(inode, segment, live_domains, tasks)) --searches;
    }
  }
}

bool Namespace::PlanSpread(const proto::Inode& inode, const proto::Segment& segment,
                           const std::vector<std::string>& live_domains,
                           std::vector<RereplicationTask>* tasks) {
  // An open segment is its writer's: the next one it rolls to is spread.
  if (!format::ReplicasSealed(segment)) return false;
  std::vector<uint64_t> holders;
  std::vector<uint64_t> live;
  std::vector<std::string> domains;
  std::vector<std::string> sources;
  for (const auto& replica : segment.replicas()) {
    holders.push_back(replica.server_id());
    const ServerState* server = servers_.Find(replica.server_id());
    if (server == nullptr || !ServerLive(*server)) continue;
    live.push_back(replica.server_id());
    domains.push_back(FailureDomainOf(server->record));
    sources.push_back(server->record.address());
  }
  // Fewer: PlanSegment copies the missing ones first. More: not ours.
  if (live.size() != Replication(inode)) return false;
  size_t level = 0;
  size_t distinct = 0;
  const std::string shared =
      format::NeedlesslySharedDomain(domains, live_domains, &level, &distinct);
  if (shared.empty()) return false;
  auto target = ChooseCopyTarget(segment.id(), holders, live);
  if (!target.ok()) return true;
  const ServerState& server = servers_.At(*target);
  // The servers of the unused domains may be full, failed or last
  // resorts: a copy into a used domain would not widen the spread.
  const std::string prefix = format::DomainPrefix(FailureDomainOf(server.record), level);
  for (const auto& d : domains) {
    if (format::DomainPrefix(d, level) == prefix) return true;
  }
  RereplicationTask task;
  task.ino = inode.attr().ino();
  task.segment_id = segment.id();
  task.epoch = segment.epoch();
  task.length = format::ReplicaLength(segment);
  task.source_addresses = std::move(sources);
  task.target_server_id = *target;
  task.target_address = server.record.address();
  task.spread = true;
  tasks->push_back(std::move(task));
  return true;
}

void Namespace::DropExcessReplica(Txn& txn, proto::Segment* segment, uint32_t wanted) {
  auto* replicas = segment->mutable_replicas();
  std::vector<int> live;  // indexes into replicas
  for (int i = 0; i < replicas->size(); ++i) {
    if (ServerIdLive(replicas->Get(i).server_id())) live.push_back(i);
  }
  // Never below the replication: the copy's server may have died since.
  if (live.size() <= wanted) return;
  // The domains at the level a spread of `wanted` replicas takes.
  const size_t level = format::SpreadLevel(servers_.LiveHealthyDomains(NowNs()), wanted);
  std::map<std::string, int> per_domain;
  auto prefix_of = [&](int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return format::DomainPrefix(FailureDomainOf(servers_.At(replicas->Get(i).server_id()).record),
                                level);
  };
  for (int i : live) ++per_domain[prefix_of(i)];
  // Of the replicas in a shared domain, the one on a server whose disk
  // failed, else on the server with the least free space, then the
  // highest id (deterministic).
  auto drop_key = [&](int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const ServerState& server = servers_.At(replicas->Get(i).server_id());
    return std::make_tuple(server.disk_failure.empty(), server.free_bytes,
                           ~server.record.server_id());
  };
  int drop = -1;
  for (int i : live) {
    if (per_domain[prefix_of(i)] < 2) continue;
    if (drop < 0 || drop_key(i) < drop_key(drop)) drop = i;
  }
  // None shares a domain (the domains changed meanwhile): keep them all.
  if (drop < 0) return;
  // A healthy replica goes only if as many healthy ones stay as wanted: a
  // replica on a failed disk elsewhere does not count for the floor.
  size_t healthy = 0;
  for (int i : live) healthy += servers_.At(replicas->Get(i).server_id()).disk_failure.empty();
  const bool drop_healthy = servers_.At(replicas->Get(drop).server_id()).disk_failure.empty();
  if (drop_healthy && healthy <= wanted) return;
  LOG(INFO) << "segment " << segment->id() << " spread again: dropping its replica on server "
            << replicas->Get(drop).server_id() << " in shared domain " << prefix_of(drop);
  txn.batch().AddPendingDeletion(replicas->Get(drop).server_id(), segment->id());
  replicas->erase(replicas->begin() + drop);
}

}  // namespace logfs::meta
