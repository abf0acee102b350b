// Namespace: placement of a new segment's replicas on distinct live
// servers with room (most free space first, suspects last) in distinct
// failure domains (store/meta/placement.h), away from servers a writer
// found slow where it can, and the replica addresses a reply carries.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace.h"
#include "store/meta/placement.h"

namespace logfs::meta {

absl::StatusOr<std::vector<uint64_t>> Namespace::PlaceReplicas(
    uint32_t replication, const std::vector<uint64_t>& excluded,
    const std::vector<uint64_t>& kept) const {
  // A server whose last heartbeat reported less free space than this gets
  // no new segments: its appends would fail with ENOSPC at once.
  constexpr uint64_t kMinFreeBytes = 4u << 20;
  std::vector<const ServerState*> live;
  size_t full = 0;
  size_t failed = 0;
  for (const auto& [id, server] : servers_) {
    bool skip = std::find(excluded.begin(), excluded.end(), id) != excluded.end();
    if (skip || !ServerLive(server)) continue;
    // Its journal failed: every append there fails until it restarts.
    if (!server.disk_failure.empty()) {
      ++failed;
      continue;
    }
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
    return absl::UnavailableError(absl::StrCat(
        "need ", replication, " live segment servers for a new segment, ", live.size() + full,
        " live", failed > 0 ? absl::StrCat(" (and ", failed, " with a failed disk)") : ""));
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
  // Then distinct failure domains, in that order of preference.
  std::vector<std::string> domains;
  for (const ServerState* server : live) domains.push_back(FailureDomainOf(server->record));
  std::vector<std::string> kept_domains;
  for (uint64_t id : kept) {
    auto it = servers_.find(id);
    if (it != servers_.end() && ServerLive(it->second)) {
      kept_domains.push_back(FailureDomainOf(it->second.record));
    }
  }
  std::vector<uint64_t> ids;
  for (size_t i : SpreadOverDomains(domains, replication, kept_domains)) {
    ids.push_back(live[i]->record.server_id());
  }
  return ids;
}

absl::StatusOr<std::vector<uint64_t>> Namespace::PlaceReplicasAvoiding(
    uint32_t replication, const std::vector<uint64_t>& excluded,
    const std::vector<uint64_t>& avoided) const {
  absl::StatusOr<std::vector<uint64_t>> as_today = PlaceReplicas(replication, excluded);
  auto is_avoided = [&](uint64_t id) {
    return std::find(avoided.begin(), avoided.end(), id) != avoided.end();
  };
  if (!as_today.ok() || std::none_of(as_today->begin(), as_today->end(), is_avoided)) {
    return as_today;
  }
  std::vector<uint64_t> more = excluded;
  more.insert(more.end(), avoided.begin(), avoided.end());
  absl::StatusOr<std::vector<uint64_t>> away = PlaceReplicas(replication, more);
  if (!away.ok()) return as_today;  // too few other servers with room
  // A slow server costs latency; a narrower spread costs durability.
  return SpreadAtLeast(DomainsOf(*away), DomainsOf(*as_today)) ? away : as_today;
}

std::vector<std::string> Namespace::DomainsOf(const std::vector<uint64_t>& ids) const {
  std::vector<std::string> out;
  for (uint64_t id : ids) out.push_back(FailureDomainOf(servers_.at(id).record));
  return out;
}

void Namespace::FillAddresses(proto::Segment* segment) const {
  for (auto& replica : *segment->mutable_replicas()) {
    auto it = servers_.find(replica.server_id());
    replica.set_address(it == servers_.end() ? "" : it->second.record.address());
  }
}

}  // namespace logfs::meta
