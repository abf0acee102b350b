#include "store/admin/fsck.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/status/macros.h"
#include "store/client/admin_client.h"
#include "store/format/failure_domain.h"
#include "store/format/segment_lengths.h"

namespace logfs::admin {
namespace {

ReplicaCheck CheckReplica(client::AdminClient& client, const std::map<uint64_t, bool>& live,
                          const proto::Segment& segment, const proto::Replica& replica) {
  ReplicaCheck check;
  check.server_id = replica.server_id();
  check.address = replica.address();
  auto it = live.find(replica.server_id());
  check.server_live = it != live.end() && it->second;
  if (!check.server_live) return check;
  auto info = client.SegmentInfo(replica.address(), segment.id());
  check.status = info.status();
  if (!info.ok()) return check;
  check.info = *info;
  check.good = info->sealed() && !info->corrupt() && info->length() == format::ReplicaLength(segment);
  return check;
}

// A live replica that answered but is not good disagrees with the others.
bool Disagrees(const ReplicaCheck& check) {
  return check.server_live && check.status.ok() && !check.good;
}

std::string Describe(const ReplicaCheck& r) {
  std::string out = absl::StrCat("server ", r.server_id, " ", r.address, " ");
  if (!r.server_live) return out + "dead";
  if (!r.status.ok()) return absl::StrCat(out, "error (", r.status.message(), ")");
  absl::StrAppend(&out, "length ", r.info.length(), r.info.sealed() ? " sealed" : " unsealed");
  if (r.info.corrupt()) out += " corrupt";
  if (!r.good) out += " BAD";
  return out;
}

}  // namespace

ServerDomains ReadServerDomains(const proto::ListServersResponse& servers) {
  ServerDomains out;
  for (const auto& server : servers.servers()) {
    out.domain[server.server_id()] = server.failure_domain();
    if (server.live() && server.disk_failure().empty()) {
      out.live_domains.push_back(server.failure_domain());
    }
  }
  return out;
}

std::vector<MisplacedSegment> MisplacedSegmentsOf(const ServerDomains& servers,
                                                  const proto::Inode& file) {
  std::vector<MisplacedSegment> out;
  // Open segments too: the one being written loses as much with a rack.
  for (const auto& segment : file.segments()) {
    std::vector<std::string> domains;
    for (const auto& replica : segment.replicas()) {
      auto it = servers.domain.find(replica.server_id());
      if (it != servers.domain.end()) domains.push_back(it->second);
    }
    MisplacedSegment misplaced;
    misplaced.shared_domain = NeedlesslySharedDomain(domains, servers.live_domains,
                                                     &misplaced.level, &misplaced.live_domains);
    if (misplaced.shared_domain.empty()) continue;
    misplaced.ino = file.attr().ino();
    misplaced.segment_id = segment.id();
    out.push_back(std::move(misplaced));
  }
  return out;
}

std::string NeedlesslySharedDomain(const std::vector<std::string>& replica_domains,
                                   const std::vector<std::string>& live_domains, size_t* level,
                                   size_t* distinct) {
  // The rule meta's re-replication applies too (it moves such replicas).
  return format::NeedlesslySharedDomain(replica_domains, live_domains, level, distinct);
}

absl::StatusOr<FsckReport> RunFsck(const FsckOptions& options) {
  client::AdminClient client(options.meta_address, absl::Milliseconds(options.rpc_timeout_ms));
  ASSIGN_OR_RETURN(proto::ListServersResponse servers, client.ListServers());
  std::map<uint64_t, bool> live;
  for (const auto& server : servers.servers()) live[server.server_id()] = server.live();
  const ServerDomains domains = ReadServerDomains(servers);
  // Progress needs the total first: one pass over meta's segment lists
  // counts it (and keeps nothing, so memory stays bounded by one page on
  // any namespace), the second checks. Files created between the passes
  // may take `checked` past the count: the total then grows with it.
  uint64_t total = 0;
  if (options.progress) {
    RETURN_IF_ERROR(
        client.ForEachFile([&](const proto::Inode& file) { total += file.segments_size(); }));
    options.progress(0, total);
  }
  FsckReport report;
  uint64_t checked = 0;
  auto count_checked = [&] {
    ++checked;
    total = std::max(total, checked);
    if (options.progress) options.progress(checked, total);
  };
  RETURN_IF_ERROR(client.ForEachFile([&](const proto::Inode& file) {
    ++report.files;
    for (const auto& segment : file.segments()) {
      ++report.segments;
      // A snapshot's prefix of a segment still open is its writer's too.
      if (!format::ReplicasSealed(segment)) {
        ++report.open_segments;
        count_checked();
        continue;
      }
      SegmentCheck check;
      check.ino = file.attr().ino();
      check.segment_id = segment.id();
      check.length = format::ReplicaLength(segment);
      check.wanted = file.replication();
      bool disagree = false;
      for (const auto& replica : segment.replicas()) {
        check.replicas.push_back(CheckReplica(client, live, segment, replica));
        check.good += check.replicas.back().good ? 1 : 0;
        disagree = disagree || Disagrees(check.replicas.back());
      }
      if (check.good < check.wanted || disagree) report.problems.push_back(std::move(check));
      count_checked();
    }
    for (MisplacedSegment& m : MisplacedSegmentsOf(domains, file)) {
      report.misplaced.push_back(std::move(m));
    }
  }));
  absl::StatusOr<proto::CheckSharesResponse> shares = client.CheckShares(options.repair_shares);
  if (shares.ok()) {
    report.shares = std::move(*shares);
  } else {
    report.shares_status = shares.status();
  }
  return report;
}

std::string FormatFsck(const FsckReport& report) {
  std::string out;
  for (const auto& problem : report.problems) {
    absl::StrAppend(&out, problem.good < problem.wanted ? "UNDER-REPLICATED" : "DISAGREEING",
                    " ino ", problem.ino, " segment ", problem.segment_id, " length ",
                    problem.length, ": ", problem.good, " of ", problem.wanted, " good");
    for (const auto& replica : problem.replicas) absl::StrAppend(&out, "; ", Describe(replica));
    out += "\n";
  }
  for (const auto& m : report.misplaced) {
    absl::StrAppend(&out, "MISPLACED ino ", m.ino, " segment ", m.segment_id,
                    ": replicas share failure domain ", m.shared_domain, " though ", m.live_domains,
                    " live domains at level ", m.level, " could hold them apart\n");
  }
  const proto::CheckSharesResponse& shares = report.shares;
  for (const auto& d : shares.disagreements()) {
    absl::StrAppend(&out, "SHARE-RECORD segment ", d.segment_id(), ": meta's record names files [",
                    absl::StrJoin(d.recorded(), ","), "], the files listing it are [",
                    absl::StrJoin(d.listing(), ","), "]",
                    shares.repaired() ? " (repaired)" : "", "\n");
  }
  if (!report.shares_status.ok()) {
    absl::StrAppend(&out, "shares: not checked (", report.shares_status.message(), ")\n");
  } else {
    absl::StrAppend(&out, "shares: ", shares.shared_segments(), " segments listed by more than one file, ",
                    shares.disagreeing(), " share records disagree with the files",
                    shares.disagreeing() == 0 ? ""
                    : shares.repaired()       ? " (repaired)"
                                              : " (logfs fsck --repair_shares rewrites them)",
                    "\n");
  }
  const size_t problems =
      report.problems.size() + (shares.repaired() ? 0 : shares.disagreeing());
  absl::StrAppend(&out, "fsck: ", report.files, " files, ", report.segments, " segments (",
                  report.open_segments, " open: their replicas not asked), ",
                  report.misplaced.size(), " misplaced, ", problems,
                  Healthy(report) ? " problems: HEALTHY\n" : " problems: NOT HEALTHY\n");
  return out;
}

bool Healthy(const FsckReport& report) {
  return report.problems.empty() &&
         (report.shares.disagreeing() == 0 || report.shares.repaired());
}

}  // namespace logfs::admin
