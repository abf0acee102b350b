// Namespace: replica reports (docs/rpc.md "Replica reports"). Each segment
// server tells meta which replicas it holds, when meta asks (at the
// server's registration, at meta's start, every replica_report_interval_ms,
// and again to confirm what a report missed); meta compares that with the
// segments that list the server, both ways, as HDFS's block reports do:
//  - missing: a sealed replica listed on the server that it lacks (a wiped
//    or replaced disk, a file removed behind its back) or holds corrupt.
//    Dropped from the segment once two reports in a row miss it, so
//    re-replication copies it back; the last replica is kept.
//  - stray: a replica that no segment lists on the server (left by a
//    deleted file whose deletion was lost, a dropped corrupt copy, a failed
//    create). Handed to the server for deletion, which it does only if the
//    replica's files have been unchanged for stray_replica_grace_ms, so a
//    replica being created or copied right now is never removed.
#include <glog/logging.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "store/format/segment_lengths.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// Inodes per database read of a reconcile's scan.
constexpr size_t kReconcileInodesPerRead = 1024;
// A report in which more than half of the replicas (and more than this
// many) are strays looks like a meta that lost or replaced its database,
// not like leftovers: nothing is deleted then, and the error is logged.
constexpr size_t kStraysAlwaysDeletable = 16;
// Strays waiting to be handed out per server, at most (the rest are found
// again by the next report).
constexpr size_t kStraysQueuedMax = 100000;

// One complete report taken out of a server's state for a reconcile.
struct TakenReport {
  uint64_t server_id = 0;
  uint64_t incarnation = 0;
  uint64_t report_id = 0;
  ReplicaReportState::Replicas replicas;
  // Filled by the scan.
  std::set<std::pair<uint64_t, uint64_t>> missing;  // (ino, segment id)
  absl::flat_hash_set<uint64_t> listed;             // segment ids listing the server
};

// Fills each report's `listed` (segments that list its server) and
// `missing` (sealed replicas listed on it that it lacks or holds corrupt)
// by a scan of every inode. The scan reads RocksDB without the mutex (as
// PlanRereplication); each inode is consistent, and a segment sealed in
// meta was sealed on its replicas before, so a report taken later than the
// scan holds it.
absl::Status ScanListedReplicas(MetadataDb* db, std::vector<TakenReport>& taken) {
  absl::flat_hash_map<uint64_t, TakenReport*> by_server;
  for (auto& report : taken) by_server[report.server_id] = &report;
  for (uint64_t start = 0;;) {
    ASSIGN_OR_RETURN(std::vector<proto::Inode> inodes,
                     db->ListInodes(start, kReconcileInodesPerRead));
    for (const auto& inode : inodes) {
      if (!S_ISREG(inode.attr().mode())) continue;
      for (const auto& segment : inode.segments()) {
        for (const auto& replica : segment.replicas()) {
          auto it = by_server.find(replica.server_id());
          if (it == by_server.end()) continue;
          TakenReport& report = *it->second;
          report.listed.insert(segment.id());
          // An open segment's replica may not be created yet; its writer
          // finds out about a lost one itself.
          if (!format::ReplicasSealed(segment)) continue;
          auto held = report.replicas.find(segment.id());
          if (held == report.replicas.end() || held->second.corrupt) {
            report.missing.emplace(inode.attr().ino(), segment.id());
          }
        }
      }
    }
    if (inodes.size() < kReconcileInodesPerRead) return absl::OkStatus();
    start = inodes.back().attr().ino() + 1;
  }
}

// The replicas a report holds that no segment lists, in id order (the
// order they are handed out in).
std::vector<uint64_t> StraysOf(const TakenReport& report) {
  std::vector<uint64_t> strays;
  for (const auto& [segment_id, replica] : report.replicas) {
    if (!report.listed.contains(segment_id)) strays.push_back(segment_id);
  }
  std::sort(strays.begin(), strays.end());
  return strays;
}

// Deleting nothing keeps data that meta cannot place (space, not loss):
// when most of a server's replicas, or every one of them, are unknown,
// meta more likely lost its database (or the server belongs to another
// cluster) than the server collected strays. Files deleted while their
// server was down reach it as pending deletions, not as strays.
bool StraysAreDeletable(const std::vector<uint64_t>& strays, const TakenReport& report) {
  const bool all_unknown = !strays.empty() && strays.size() == report.replicas.size();
  return !all_unknown &&
         !(strays.size() > kStraysAlwaysDeletable && strays.size() * 2 > report.replicas.size());
}

}  // namespace

void Namespace::HandleReports(ServerState& server, const proto::HeartbeatRequest& request,
                              proto::HeartbeatResponse* response) {
  ReplicaReportState& reports = server.reports;
  const int64_t now = NowNs();
  if (request.report_id() != 0) {
    // Pages of a report not (or no longer) asked for are dropped.
    if (request.report_id() == reports.asked_id && reports.done_id == 0) {
      reports.last_page_ns = now;
      for (const auto& entry : request.report()) {
        reports.building[entry.segment_id()] =
            ReportedReplicaState{entry.length(), entry.sealed(), entry.corrupt()};
      }
      if (request.report_done()) {
        reports.done = std::move(reports.building);
        reports.building = ReplicaReportState::Replicas();
        reports.done_id = reports.asked_id;
        reports.completed_id = reports.asked_id;
      }
    }
  } else if (reports.done_id == 0) {
    // Never while one waits for its reconcile: a confirming report must be
    // asked after the reconcile that found what it confirms.
    const bool due = reports.asked_ns == 0 ||
                     now - reports.asked_ns >= options_.replica_report_interval_ms * kNanosPerMilli;
    // A report asked for whose pages stopped coming (a page failed to
    // send, the server restarted): ask again after dead_server_ms, not a
    // whole report interval later, which would leave a wiped disk's
    // replicas unrepaired that long.
    const bool stalled = reports.asked_id != reports.completed_id &&
                         now - std::max(reports.asked_ns, reports.last_page_ns) >=
                             options_.dead_server_ms * kNanosPerMilli;
    if (reports.wanted || due || stalled) {
      reports.asked_id += 1;
      reports.asked_ns = now;
      reports.wanted = false;
      reports.building.clear();
      response->set_report_id(reports.asked_id);
    }
  }
  if (!reports.strays.empty()) {
    // Few per heartbeat: the server deletes them on its heartbeat thread,
    // each with a directory fsync, and must not miss its next heartbeat.
    const size_t n = std::min(reports.strays.size(), kStraysPerHeartbeatMax);
    for (size_t i = 0; i < n; ++i) response->add_delete_strays(reports.strays[i]);
    reports.strays.erase(reports.strays.begin(), reports.strays.begin() + n);
    response->set_stray_grace_ms(options_.stray_replica_grace_ms);
  }
}

absl::StatusOr<Namespace::ReconcileStats> Namespace::ReconcileReplicaReports() {
  std::vector<TakenReport> taken;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, server] : servers_.servers()) {
      ReplicaReportState& reports = server.reports;
      if (reports.done_id == 0) continue;
      TakenReport report;
      report.server_id = id;
      report.incarnation = server.incarnation;
      report.report_id = reports.done_id;
      report.replicas = std::move(reports.done);
      reports.done = ReplicaReportState::Replicas();
      reports.done_id = 0;
      taken.push_back(std::move(report));
    }
  }
  ReconcileStats stats;
  if (taken.empty()) return stats;
  RETURN_IF_ERROR(ScanListedReplicas(db_, taken));
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(
                    mu_) -> absl::StatusOr<Namespace::ReconcileStats> {
    Txn txn(db_);
    for (auto& report : taken) {
      ServerState* server = servers_.Find(report.server_id);
      // A report of an earlier process of this server says nothing of now.
      if (server == nullptr || server->incarnation != report.incarnation) continue;
      ReplicaReportState& reports = server->reports;
      ++stats.servers;
      stats.dropped +=
          ConfirmMissingReplicas(txn, report.server_id, report.report_id, report.missing, reports);
      std::vector<uint64_t> strays = StraysOf(report);
      if (!StraysAreDeletable(strays, report)) {
        LOG(ERROR) << "server " << report.server_id << " holds " << strays.size() << " of "
                   << report.replicas.size()
                   << " replicas that no file lists; deleting none (did meta lose its database?)";
        continue;
      }
      for (uint64_t segment_id : strays) {
        if (reports.strays.size() >= kStraysQueuedMax) break;
        reports.strays.push_back(segment_id);
        ++stats.strays;
      }
    }
    RETURN_IF_ERROR(txn.Commit());
    return stats;
  });
}

size_t Namespace::ConfirmMissingReplicas(Txn& txn, uint64_t server_id, uint64_t report_id,
                                         const std::set<std::pair<uint64_t, uint64_t>>& missing,
                                         ReplicaReportState& reports) {
  const bool may_confirm =
      reports.missing_confirm_from != 0 && report_id >= reports.missing_confirm_from;
  size_t dropped = 0;
  std::set<std::pair<uint64_t, uint64_t>> unconfirmed;
  for (const auto& [ino, segment_id] : missing) {
    if (may_confirm && reports.missing.count({ino, segment_id}) != 0) {
      dropped += DropMissingReplica(txn, ino, segment_id, server_id) ? 1 : 0;
    } else {
      unconfirmed.emplace(ino, segment_id);
    }
  }
  reports.missing = std::move(unconfirmed);
  if (!reports.missing.empty()) {
    // Confirm soon, by a report asked after this scan.
    reports.wanted = true;
    reports.missing_confirm_from = reports.asked_id + 1;
    LOG(WARNING) << "server " << server_id << " lacks " << reports.missing.size()
                 << " sealed replicas that meta lists on it; confirming with another report";
  }
  return dropped;
}

bool Namespace::DropMissingReplica(Txn& txn, uint64_t ino, uint64_t segment_id,
                                   uint64_t server_id) {
  auto inode = txn.Get(ino);
  if (!inode.ok()) return false;  // deleted meanwhile
  for (auto& segment : *(*inode)->mutable_segments()) {
    if (segment.id() != segment_id) continue;
    auto* replicas = segment.mutable_replicas();
    auto listed = std::find_if(replicas->begin(), replicas->end(),
                               [&](const proto::Replica& r) { return r.server_id() == server_id; });
    if (!segment.sealed() || listed == replicas->end()) return false;
    if (replicas->size() <= 1) {
      LOGFS_LOG_EVERY_MS(ERROR, 1000)
          << "the only replica of segment " << segment_id << " (inode " << ino
          << ") is gone from server " << server_id << "; keeping it listed";
      return false;
    }
    // No deletion is queued: the server has no good copy, and
    // re-replication may copy the segment back to it.
    replicas->erase(listed);
    txn.Put(*inode);
    if (absl::Status synced = SyncSharedReplicas(txn, ino, segment); !synced.ok()) {
      LOG(ERROR) << "segment " << segment_id << ": " << synced;
    }
    LOGFS_LOG_EVERY_MS(WARNING, 1000)
        << "server " << server_id << " lost its replica of segment " << segment_id << " (inode "
        << ino << "); dropped it, re-replication copies it again";
    return true;
  }
  return false;
}

}  // namespace logfs::meta
