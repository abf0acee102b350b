#include "store/meta/rereplicator.h"

#include <glog/logging.h>

#include <utility>

#include "absl/time/time.h"
#include "src/status/macros.h"

namespace logfs::meta {
namespace {

// Servers whose advertised address a pass dials (Namespace::
// ProbeServerAddresses, round all servers over passes): each waits at
// most kIdentifyTimeout, so unreachable ones delay a pass by at most this
// many of it, and each server due is dialled within ceil(servers / 4)
// passes.
constexpr size_t kProbesPerPass = 4;

}  // namespace

Rereplicator::Rereplicator(Namespace* ns, CopyFn copy, RereplicatorOptions options)
    : ns_(ns), copy_(std::move(copy)), options_(options) {}

Rereplicator::~Rereplicator() { Stop(); }

void Rereplicator::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void Rereplicator::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

Rereplicator::Progress Rereplicator::GetProgress() const {
  absl::MutexLock lock(&progress_mu_);
  return progress_;
}

void Rereplicator::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(options_.interval_ms));
      if (stop_) return;
    }
    auto added = RunPass();
    {
      absl::MutexLock lock(&progress_mu_);
      ++progress_.passes;
    }
    if (!added.ok()) {
      LOG(WARNING) << "re-replication pass: " << added.status();
    } else if (*added > 0) {
      LOG(INFO) << "re-replication added " << *added << " replicas";
    }
  }
}

absl::StatusOr<size_t> Rereplicator::RunPass() {
  ns_->ProbeServerAddresses(kProbesPerPass);
  // Replicas that servers report lost leave their segments first, so this
  // very pass can copy them again.
  auto reconciled = ns_->ReconcileReplicaReports();
  if (!reconciled.ok()) {
    LOG(WARNING) << "reconciling replica reports: " << reconciled.status();
  } else if (reconciled->dropped > 0 || reconciled->strays > 0) {
    LOG(INFO) << "replica reports of " << reconciled->servers << " servers: dropped "
              << reconciled->dropped << " lost replicas, " << reconciled->strays
              << " strays to delete";
  }
  ASSIGN_OR_RETURN(
      RereplicationPlan plan,
      ns_->PlanRereplication(cursor_ino_, options_.inodes_per_pass, options_.copies_per_pass,
                             options_.spread_copies_per_pass));
  cursor_ino_ = plan.next_ino;
  scan_census_ += plan.census;
  if (plan.next_ino == 0) {  // a scan of the whole namespace ended
    absl::MutexLock lock(&progress_mu_);
    progress_.census = std::exchange(scan_census_, SegmentCensus());
    ++progress_.scans;
  }
  if (plan.tasks.empty()) return 0;
  uint64_t pass_bytes = 0;
  for (const RereplicationTask& task : plan.tasks) pass_bytes += task.length;
  {
    absl::MutexLock lock(&progress_mu_);
    progress_.in_flight_segments = plan.tasks.size();
    progress_.in_flight_bytes = pass_bytes;
  }
  std::vector<absl::Status> copied = copy_(plan.tasks);
  size_t added = 0;
  uint64_t added_bytes = 0;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const RereplicationTask& task = plan.tasks[i];
    absl::Status status = i < copied.size() ? copied[i] : absl::InternalError("no copy result");
    if (status.ok()) status = ns_->CommitReplica(task);
    if (status.ok()) {
      ++added;
      added_bytes += task.length;
    } else {
      LOG(WARNING) << "re-replicating segment " << task.segment_id << " of inode " << task.ino
                   << " to " << task.target_address << ": " << status;
    }
  }
  absl::MutexLock lock(&progress_mu_);
  progress_.in_flight_segments = 0;
  progress_.in_flight_bytes = 0;
  progress_.copied_segments += added;
  progress_.copied_bytes += added_bytes;
  progress_.failed_copies += plan.tasks.size() - added;
  return added;
}

}  // namespace logfs::meta
