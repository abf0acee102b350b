// One worker of `logfs bench meta`: it runs the phases on its own files
// (bench/meta_phase_summary.h), one at a time, when the coordinator says
// so, and answers each with a WorkerReport (bench/meta_worker_report.h).
// Workers are threads or forked processes; either way they talk to the
// coordinator over a stream socket, so the barrier between phases is the
// same for both: the coordinator sends the next phase only after every
// worker's report of the last one came in.
//
// Protocol on the socket: the coordinator sends one byte, a MetaPhase, or
// kMetaWorkerQuit; the worker answers a phase with one report and ends on
// kMetaWorkerQuit or EOF.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "bench/meta_phase_summary.h"
#include "bench/meta_worker_report.h"
#include "bench/namespace_ops.h"

namespace logfs::bench {

inline constexpr uint8_t kMetaWorkerQuit = 0xff;

struct MetaWorkerPlan {
  int worker = 0;        // this worker's index, in [0, workers)
  int workers = 1;
  int files = 1;         // files this worker makes
  NamespaceDir dir;      // where they go: its own directory, or the shared one
  bool shared_dir = false;  // readdir then expects every worker's files in `dir`
};

// Name of file `index` of `worker` in the create/stat/readdir phases, and
// after the rename phase: "f.<worker>.<index>", "r.<worker>.<index>".
std::string MetaFileName(int worker, int index);
std::string MetaRenamedName(int worker, int index);

// Runs `phase` of `plan` on `ops`: every call timed, the phase's check
// done (stat: a regular file; readdir: every expected name and nothing
// else, as many as expected). Stops at the first failure, which the
// report's error states as "worker W, PHASE: what failed (errno N, NAME)".
WorkerReport RunMetaPhase(NamespaceOps& ops, const MetaWorkerPlan& plan, MetaPhase phase);

// The worker's loop on socket `fd`: a phase per command, until
// kMetaWorkerQuit or EOF. Returns OK then; the error of a failed send or
// receive, or kInvalidArgument for an unknown command, otherwise. Does
// not close `fd`.
absl::Status ServeMetaWorker(NamespaceOps& ops, const MetaWorkerPlan& plan, int fd);

// " (errno 2, ENOENT)" for a status with an attached errno
// (src/status/posix_error.h), else "".
std::string ErrnoText(const absl::Status& status);

// The coordinator's side: sends `command` (a MetaPhase, or
// kMetaWorkerQuit). Errors: the errno of send (EPIPE: the worker is gone).
absl::Status SendMetaWorkerCommand(int fd, uint8_t command);

}  // namespace logfs::bench
