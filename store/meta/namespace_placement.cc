// Namespace: placement of a new segment's replicas on distinct live
// servers with room (most free space first; suspect, unreachable and
// avoided servers last) in distinct failure domains
// (store/meta/placement.h), and the replica addresses a reply carries.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace.h"
#include "store/meta/placement.h"

namespace logfs::meta {
namespace {

// A server whose last heartbeat reported less free space than this gets
// no new segments: its appends would fail with ENOSPC at once.
constexpr uint64_t kMinFreeBytes = 4u << 20;
// Free space is compared in these units (PlaceReplicas).
constexpr uint64_t kFreeSpaceGranuleBytes = 1ull << 30;

bool Listed(const std::vector<uint64_t>& ids, uint64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The indexes into `domains` (candidates in order of preference, the
// first `usable` of them not last resorts) of `replication` servers:
// spread over the usable ones (SpreadOverDomains beside `kept`), then,
// while short, over the last resorts beside those.
std::vector<size_t> Choose(const std::vector<std::string>& domains, size_t usable,
                           uint32_t replication, std::vector<std::string> kept) {
  const std::vector<std::string> first(domains.begin(), domains.begin() + usable);
  std::vector<size_t> chosen = SpreadOverDomains(first, replication, kept);
  if (chosen.size() >= replication || usable == domains.size()) return chosen;
  for (size_t i : chosen) kept.push_back(domains[i]);
  const std::vector<std::string> rest(domains.begin() + usable, domains.end());
  for (size_t i : SpreadOverDomains(rest, replication - chosen.size(), kept)) {
    chosen.push_back(usable + i);
  }
  return chosen;
}

}  // namespace

int Namespace::LastChoiceRank(const ServerState& server, bool avoided) {
  // A slow server still takes appends; one a writer saw fail or meta
  // cannot dial may fail the create and cost its writer a new placement.
  return (Suspect(server) || !server.unreachable.empty() ? kLastResortRank : 0) + (avoided ? 1 : 0);
}

absl::StatusOr<std::vector<uint64_t>> Namespace::PlaceReplicas(
    uint32_t replication, const std::vector<uint64_t>& excluded, const std::vector<uint64_t>& kept,
    const std::vector<uint64_t>& avoided) const {
  struct Candidate {
    const ServerState* server;
    int rank;  // LastChoiceRank
  };
  std::vector<Candidate> live;
  size_t full = 0;
  size_t failed = 0;
  for (const auto& [id, server] : servers_) {
    if (Listed(excluded, id) || !ServerLive(server)) continue;
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
    live.push_back({&server, LastChoiceRank(server, Listed(avoided, id))});
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
  // Last choices go last (LastChoiceRank): for --dead_server_ms after a
  // crash meta still counts a dead server live, and every segment placed
  // on it costs its writer a failed create and a new placement.
  // Then most free space first, compared in GiB so that servers sharing a disk
  // (or nearly equal) count as ties; ties rotate with every placement so
  // that new segments spread over all servers.
  const uint64_t rotation = placements_++;
  const uint64_t n = live.size();
  std::sort(live.begin(), live.end(), [&](const Candidate& ca, const Candidate& cb) {
    if (ca.rank != cb.rank) return ca.rank < cb.rank;
    uint64_t fa = ca.server->free_bytes / kFreeSpaceGranuleBytes;
    uint64_t fb = cb.server->free_bytes / kFreeSpaceGranuleBytes;
    if (fa != fb) return fa > fb;
    return (ca.server->record.server_id() + rotation) % n <
           (cb.server->record.server_id() + rotation) % n;
  });
  // Then distinct failure domains in that order of preference: over the
  // good and avoided servers (SpreadOverDomains keeps the widest spread
  // whatever the order, so an avoided one is taken where the count or the
  // spread needs it), then, if short, over the last resorts.
  std::vector<std::string> domains;
  size_t usable = 0;
  for (const Candidate& c : live) {
    domains.push_back(FailureDomainOf(c.server->record));
    usable += c.rank < kLastResortRank ? 1 : 0;
  }
  std::vector<std::string> kept_domains;
  for (uint64_t id : kept) {
    auto it = servers_.find(id);
    if (it != servers_.end() && ServerLive(it->second)) {
      kept_domains.push_back(FailureDomainOf(it->second.record));
    }
  }
  std::vector<uint64_t> ids;
  for (size_t i : Choose(domains, usable, replication, kept_domains)) {
    ids.push_back(live[i].server->record.server_id());
  }
  return ids;
}

void Namespace::FillAddresses(proto::Segment* segment) const {
  for (auto& replica : *segment->mutable_replicas()) {
    auto it = servers_.find(replica.server_id());
    replica.set_address(it == servers_.end() ? "" : it->second.record.address());
  }
}

}  // namespace logfs::meta
