// The workers of `logfs bench meta` (bench/meta_worker.h), as threads or
// as forked processes, each behind a stream socket of its own, and the
// coordinator's side of their protocol: a phase on every worker, then a
// wait for every report (the barrier between phases).
//
// Not thread-safe: the coordinator's thread alone calls it. Forking needs
// a caller with no other threads (the children get a copy of the process
// with this thread only) and a NamespaceOps that is ForkSafe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/meta_phase_summary.h"
#include "bench/meta_worker.h"
#include "bench/meta_worker_report.h"
#include "bench/namespace_ops.h"
#include "src/util/unique_fd.h"

namespace logfs::bench {

class MetaWorkerPool {
 public:
  // Starts a worker per plan on `ops` (not owned; it must outlive the
  // pool): threads, or forked processes with `processes`. Errors:
  // kFailedPrecondition for processes on an `ops` that is not ForkSafe;
  // the errno of socketpair or fork (workers already started are stopped).
  static absl::StatusOr<std::unique_ptr<MetaWorkerPool>> Start(
      NamespaceOps& ops, const std::vector<MetaWorkerPlan>& plans, bool processes);
  // Stops the workers (Stop) if the caller did not.
  ~MetaWorkerPool();

  // Runs `phase` on every worker and waits for all of their reports.
  // Returns the reports in worker order. Errors, after every worker
  // still there has answered (so that none is still in the phase): the
  // first worker's error as it reported it; a lost worker as
  // kInternal "worker W (pid P): ...; it was killed by signal 9 (Killed)".
  absl::StatusOr<std::vector<WorkerReport>> RunPhase(MetaPhase phase);

  // Tells every worker to quit and waits for it. Errors: kInternal for a
  // worker process that did not exit 0. Idempotent.
  absl::Status Stop();

 private:
  struct Worker {
    util::UniqueFd fd;   // the coordinator's end of the worker's socket
    std::thread thread;  // a thread worker
    pid_t pid = 0;       // a process worker not reaped yet
    pid_t reaped_pid = 0;
    int wait_status = 0;
  };

  MetaWorkerPool() = default;
  absl::Status StartOne(NamespaceOps& ops, const MetaWorkerPlan& plan, bool processes);
  // Waits for process worker `w`; its wait status (also kept for later).
  int Reap(size_t w);
  // The error for worker `w` lost mid-protocol: for a process, how it ended.
  absl::Status Lost(size_t w, const absl::Status& status);

  std::vector<Worker> workers_;
};

}  // namespace logfs::bench
