// Meta's re-replication loop (docs/rpc.md "Re-replication"): every
// `interval_ms` it plans, from a cursor over the inodes (Namespace::
// PlanRereplication), copies of under-replicated sealed segments and, at
// lower priority, copies that restore the spread of segments whose
// replicas share a failure domain they need not share; has the target
// servers make them (CopyFn: CopySegment RPCs), and records each finished
// copy (Namespace::CommitReplica, which then drops a spread copy's excess
// replica). Work per pass is bounded by `inodes_per_pass`,
// `copies_per_pass` and `spread_copies_per_pass`; a pass waits for its
// copies, so passes never overlap and a target gets at most
// `copies_per_pass` copies from meta at once.
//
// Thread-safety: Start and Stop from one thread; GetProgress from any.
#pragma once

#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/rereplication_task.h"

namespace logfs::meta {

struct RereplicatorOptions {
  int interval_ms = 2500;          // between passes
  size_t inodes_per_pass = 4096;   // inodes looked at per pass
  size_t copies_per_pass = 8;      // copies started per pass
  // Of those, at most this many restore a spread (RereplicationTask::
  // spread); they come after every missing replica the pass found.
  size_t spread_copies_per_pass = 2;
};

class Rereplicator {
 public:
  // Runs the copies of `tasks` (all at once) and returns one status per
  // task, in order. Blocks until every copy answered or timed out.
  using CopyFn = std::function<std::vector<absl::Status>(const std::vector<RereplicationTask>&)>;

  // Keeps `ns`, which must outlive this object. Does not start the loop.
  Rereplicator(Namespace* ns, CopyFn copy, RereplicatorOptions options);
  ~Rereplicator();  // Stop()

  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the loop after the pass in flight (fail its copies first to make
  // that quick) and joins it. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // The re-replication backlog as this loop sees it, for `logfs status`
  // (ListServersResponse.rereplication_*) and meta's metrics. Segments
  // still to copy are not here: a pass plans at most copies_per_pass, so
  // the whole backlog is counted from the segment list (admin::
  // GetClusterStatus). Bytes are sealed segment lengths.
  struct Progress {
    uint64_t in_flight_segments = 0;  // copies of the pass in flight, unanswered
    uint64_t in_flight_bytes = 0;
    uint64_t copied_segments = 0;  // recorded copies since Start
    uint64_t copied_bytes = 0;
    uint64_t failed_copies = 0;  // copies that failed since Start (retried later)
    uint64_t passes = 0;         // passes finished since Start
    // The segment counts of the last complete scan of the namespace (a scan
    // takes several passes on a large one), and how many scans completed
    // (0: none yet, `census` is empty).
    SegmentCensus census;
    uint64_t scans = 0;
  };
  // A consistent snapshot; never blocks on a pass (a short mutex).
  Progress GetProgress() const ABSL_LOCKS_EXCLUDED(progress_mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  // One pass from the cursor: reconcile the replica reports that came in
  // (Namespace::ReconcileReplicaReports), plan, copy, commit. Returns the
  // replicas added; errors of the plan (database). Failed copies are
  // logged and retried by a later pass. Runs on the loop's thread only.
  absl::StatusOr<size_t> RunPass();

  // Immutable after construction.
  Namespace* const ns_;
  const CopyFn copy_;
  const RereplicatorOptions options_;

  // Used by the pass thread only.
  uint64_t cursor_ino_ = 0;
  SegmentCensus scan_census_;  // of the scan in progress

  mutable absl::Mutex progress_mu_;
  Progress progress_ ABSL_GUARDED_BY(progress_mu_);

  std::thread thread_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace logfs::meta
