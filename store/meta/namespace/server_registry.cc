#include "store/meta/namespace/server_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace/placement.h"

namespace logfs::meta {
namespace {

// A server whose last heartbeat reported less free space than this gets
// no new segments: its appends would fail with ENOSPC at once.
constexpr uint64_t kMinFreeBytes = 4u << 20;
// Free space is compared in these units (Place).
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

ServerState* ServerRegistry::Find(uint64_t server_id) {
  auto it = servers_.find(server_id);
  return it == servers_.end() ? nullptr : &it->second;
}

const ServerState* ServerRegistry::Find(uint64_t server_id) const {
  auto it = servers_.find(server_id);
  return it == servers_.end() ? nullptr : &it->second;
}

const ServerState& ServerRegistry::At(uint64_t server_id) const {
  const ServerState* server = Find(server_id);
  CHECK(server != nullptr) << "segment server " << server_id << " is not registered";
  return *server;
}

std::string ServerRegistry::Address(uint64_t server_id) const {
  const ServerState* server = Find(server_id);
  return server == nullptr ? "" : server->record.address();
}

void ServerRegistry::FillAddresses(proto::Segment* segment) const {
  for (auto& replica : *segment->mutable_replicas()) {
    replica.set_address(Address(replica.server_id()));
  }
}

void ServerRegistry::Restore(proto::RegisterServerRequest record, int64_t now_ns) {
  ServerState& state = servers_[record.server_id()];
  state.record = std::move(record);
  state.last_seen_ns = now_ns;
}

std::string ServerRegistry::ConflictingHolder(const proto::RegisterServerRequest& request,
                                              int64_t now_ns) const {
  const ServerState* held = Find(request.server_id());
  if (held == nullptr || held->incarnation == 0 || request.incarnation() == 0 ||
      held->incarnation == request.incarnation() || !Live(*held, now_ns)) {
    return "";
  }
  // The same address on the same host cannot be bound by two processes:
  // the holder is gone.
  if (held->record.address() == request.address() && held->record.host() == request.host()) {
    return "";
  }
  return held->record.address();
}

ServerState& ServerRegistry::Register(proto::RegisterServerRequest record, int64_t now_ns) {
  ServerState& state = servers_[record.server_id()];
  if (state.incarnation != record.incarnation()) {
    // A new process (a restart, maybe on a new disk): what meta learned
    // from the old one's reports no longer holds; ask for a report now.
    state.reports = ReplicaReportState();
    state.incarnation = record.incarnation();
    state.disk_failure.clear();
  }
  state.probed_ns = 0;  // maybe a new address: dial it again
  state.last_seen_ns = now_ns;
  state.reported = true;
  state.capacity_bytes = record.capacity_bytes();
  state.free_bytes = record.free_bytes();
  state.record = std::move(record);
  return state;
}

void ServerRegistry::Beat(ServerState& server, const proto::HeartbeatRequest& request,
                          int64_t now_ns) {
  if (server.incarnation == 0) server.incarnation = request.incarnation();
  server.last_seen_ns = now_ns;
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
}

void ServerRegistry::MarkFailing(const google::protobuf::RepeatedField<uint64_t>& server_ids,
                                 int64_t now_ns) {
  for (uint64_t id : server_ids) {
    if (ServerState* server = Find(id); server != nullptr) server->failure_reported_ns = now_ns;
  }
}

bool ServerRegistry::Live(const ServerState& server, int64_t now_ns) const {
  return server.last_seen_ns != 0 && now_ns - server.last_seen_ns <= dead_server_ns_;
}

bool ServerRegistry::Live(uint64_t server_id, int64_t now_ns) const {
  const ServerState* server = Find(server_id);
  return server != nullptr && Live(*server, now_ns);
}

std::vector<std::string> ServerRegistry::LiveHealthyDomains(int64_t now_ns) const {
  std::vector<std::string> domains;
  for (const auto& [id, server] : servers_) {
    if (Live(server, now_ns) && server.disk_failure.empty()) {
      domains.push_back(FailureDomainOf(server.record));
    }
  }
  return domains;
}

ServerRegistry::LiveSpace ServerRegistry::SumLiveSpace(int64_t now_ns) const {
  LiveSpace space;
  for (const auto& [id, server] : servers_) {
    if (!Live(server, now_ns)) continue;
    space.capacity_bytes += server.capacity_bytes;
    space.free_bytes += server.free_bytes;
    ++space.servers;
  }
  return space;
}

std::vector<ServerRegistry::Probe> ServerRegistry::DueProbes(size_t max, int64_t reprobe_ns,
                                                             int64_t now_ns) {
  std::vector<Probe> probes;
  // Round the servers from the one after the cursor, each at most once.
  auto it = servers_.upper_bound(probe_cursor_);
  for (size_t step = 0; step < servers_.size() && probes.size() < max; ++step, ++it) {
    if (it == servers_.end()) it = servers_.begin();
    const ServerState& server = it->second;
    const bool due = server.probed_ns == 0 || !server.unreachable.empty() ||
                     now_ns - server.probed_ns >= reprobe_ns;
    if (!due || !Live(server, now_ns)) continue;
    probes.push_back({it->first, server.incarnation, server.record.address()});
    probe_cursor_ = it->first;
  }
  return probes;
}

bool ServerRegistry::RecordProbe(const Probe& probe, std::string unreachable, int64_t now_ns) {
  ServerState* server = Find(probe.server_id);
  if (server == nullptr || server->incarnation != probe.incarnation) return false;
  if (unreachable != server->unreachable) {
    if (unreachable.empty()) {
      LOG(INFO) << "segment server " << probe.server_id << " answers at " << probe.address;
    } else {
      LOG(WARNING) << "segment server " << probe.server_id << " is registered at an address "
                   << "meta cannot reach (check its --advertise): " << unreachable;
    }
  }
  server->probed_ns = now_ns;
  server->unreachable = std::move(unreachable);
  return true;
}

int ServerRegistry::LastChoiceRank(const ServerState& server, bool avoided) {
  // A slow server still takes appends; one a writer saw fail or meta
  // cannot dial may fail the create and cost its writer a new placement.
  return (Suspect(server) || !server.unreachable.empty() ? kLastResortRank : 0) + (avoided ? 1 : 0);
}

absl::StatusOr<std::vector<uint64_t>> ServerRegistry::Place(uint32_t replication,
                                                            const std::vector<uint64_t>& excluded,
                                                            const std::vector<uint64_t>& kept,
                                                            const std::vector<uint64_t>& avoided,
                                                            int64_t now_ns) {
  struct Candidate {
    const ServerState* server;
    int rank;  // LastChoiceRank
  };
  std::vector<Candidate> live;
  size_t full = 0;
  size_t failed = 0;
  for (const auto& [id, server] : servers_) {
    if (Listed(excluded, id) || !Live(server, now_ns)) continue;
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
  // Last choices go last (LastChoiceRank): for dead_server_ns after a
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
    if (const ServerState* server = Find(id); server != nullptr && Live(*server, now_ns)) {
      kept_domains.push_back(FailureDomainOf(server->record));
    }
  }
  std::vector<uint64_t> ids;
  for (size_t i : Choose(domains, usable, replication, kept_domains)) {
    ids.push_back(live[i].server->record.server_id());
  }
  return ids;
}

}  // namespace logfs::meta
