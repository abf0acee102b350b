#include "bench/meta_bench.h"

#include <unistd.h>

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/meta_phase_summary.h"
#include "bench/meta_worker.h"
#include "bench/meta_worker_pool.h"
#include "bench/namespace_ops.h"
#include "src/status/macros.h"

namespace logfs::bench {
namespace {

absl::Status CheckOptions(const MetaBenchOptions& options) {
  if (options.dir.empty() == options.meta.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --dir (a directory) and --meta (the client library)");
  }
  if (options.workers < 1 || options.workers > kMetaWorkersMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threads must be in [1, ", kMetaWorkersMax, "]"));
  }
  if (options.files < 1 ||
      static_cast<int64_t>(options.files) * options.workers > kMetaFilesTotalMax) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--files must be at least 1, and --threads times --files at most ", kMetaFilesTotalMax));
  }
  if (options.processes && !options.meta.empty()) {
    return absl::InvalidArgumentError(
        "--processes needs --dir: the client library (--meta) runs in this process");
  }
  return absl::OkStatus();
}

// The run directory and what is in it so far, so that it can be removed
// whatever step failed.
struct RunDir {
  std::string name;   // in the root
  NamespaceDir dir;
  std::vector<std::pair<std::string, NamespaceDir>> subdirs;  // name, dir
};

// Makes the run directory's subdirectories: "w<k>" per worker, or one
// "shared". Each one made is in `run.subdirs`, also after a failure.
absl::Status MakeSubdirs(NamespaceOps& ops, const MetaBenchOptions& options, RunDir& run) {
  std::vector<std::string> names;
  if (options.shared_dir) names.push_back("shared");
  for (int w = 0; !options.shared_dir && w < options.workers; ++w) {
    names.push_back(absl::StrCat("w", w));
  }
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(NamespaceDir dir, ops.MakeDir(run.dir, name));
    run.subdirs.emplace_back(name, std::move(dir));
  }
  return absl::OkStatus();
}

std::vector<MetaWorkerPlan> MakePlans(const MetaBenchOptions& options, const RunDir& run) {
  std::vector<MetaWorkerPlan> plans;
  for (int w = 0; w < options.workers; ++w) {
    MetaWorkerPlan plan;
    plan.worker = w;
    plan.workers = options.workers;
    plan.files = options.files;
    plan.dir = run.subdirs[options.shared_dir ? 0 : w].second;
    plan.shared_dir = options.shared_dir;
    plans.push_back(std::move(plan));
  }
  return plans;
}

// Removes the run directory and whatever files a failed run left in its
// subdirectories. Goes on after an error; returns the first.
absl::Status RemoveRunDir(NamespaceOps& ops, const RunDir& run) {
  absl::Status first_error;
  auto note = [&first_error](absl::Status s) {
    if (!s.ok() && first_error.ok()) first_error = std::move(s);
  };
  for (const auto& [name, dir] : run.subdirs) {
    absl::StatusOr<std::vector<std::string>> files = ops.ListNames(dir);
    note(files.status());
    if (files.ok()) {
      for (const std::string& file : *files) note(ops.Unlink(dir, file));
    }
    note(ops.RemoveDir(run.dir, name));
  }
  note(ops.RemoveDir(ops.Root(), run.name));
  return first_error;
}

// The phases, one after the other, each after every worker finished the
// one before. Stops at the first failure.
absl::StatusOr<std::vector<PhaseSummary>> RunPhases(MetaWorkerPool& workers) {
  std::vector<PhaseSummary> summaries;
  for (MetaPhase phase : kMetaPhases) {
    ASSIGN_OR_RETURN(std::vector<WorkerReport> reports, workers.RunPhase(phase));
    ASSIGN_OR_RETURN(PhaseSummary summary, SummarizePhase(phase, reports));
    summaries.push_back(summary);
  }
  return summaries;
}

// Makes the subdirectories, runs the workers through the phases and stops
// them.
absl::StatusOr<std::vector<PhaseSummary>> RunInRunDir(NamespaceOps& ops,
                                                      const MetaBenchOptions& options,
                                                      RunDir& run) {
  RETURN_IF_ERROR(MakeSubdirs(ops, options, run));
  ASSIGN_OR_RETURN(std::unique_ptr<MetaWorkerPool> workers,
                   MetaWorkerPool::Start(ops, MakePlans(options, run), options.processes));
  absl::StatusOr<std::vector<PhaseSummary>> summaries = RunPhases(*workers);
  absl::Status stopped = workers->Stop();
  if (!summaries.ok()) return summaries.status();
  if (!stopped.ok()) return stopped;
  return summaries;
}

std::string Report(const MetaBenchOptions& options, const NamespaceOps& ops, const RunDir& run,
                   const std::vector<PhaseSummary>& summaries) {
  std::string report = absl::StrFormat(
      "bench meta: %s %s=%d files=%d per worker, %s\n", ops.Describe(),
      options.processes ? "processes" : "threads", options.workers, options.files,
      options.shared_dir ? "all in one shared directory" : "each in a directory of its own");
  absl::StrAppend(&report, "run dir: ", run.dir.path, " (removed)\n",
                  FormatPhaseTable(summaries));
  absl::StrAppend(&report, "readdir: ops are names listed (each worker lists ",
                  options.shared_dir ? "the shared directory" : "its directory",
                  " once); its latency is that of one whole listing\n");
  if (!options.meta.empty()) {
    absl::StrAppend(&report,
                    "through the client library: create is meta's Create (no open or close), "
                    "stat is meta's Lookup, readdir meta's Readdir pages\n");
  }
  for (const PhaseSummary& summary : summaries) absl::StrAppend(&report, FormatPhaseLine(summary));
  return report;
}

// Setup and cleanup errors say their errno as the workers' do.
absl::Status Described(const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(status.message(), ErrnoText(status)));
}

}  // namespace

absl::StatusOr<std::string> RunMetaBench(const MetaBenchOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  std::unique_ptr<NamespaceOps> ops;
  if (!options.dir.empty()) {
    ops = NewPosixNamespaceOps(options.dir);
  } else {
    ASSIGN_OR_RETURN(ops, ConnectLibraryNamespaceOps(options.meta));
  }
  RunDir run;
  run.name = absl::StrCat("bench-meta-", getpid(), "-", absl::ToUnixMicros(absl::Now()));
  absl::StatusOr<NamespaceDir> run_dir = ops->MakeDir(ops->Root(), run.name);
  if (!run_dir.ok()) return Described(run_dir.status());
  run.dir = std::move(*run_dir);
  absl::StatusOr<std::vector<PhaseSummary>> summaries = RunInRunDir(*ops, options, run);
  // Worker errors carry their errno text already and no errno payload.
  if (!summaries.ok()) summaries = Described(summaries.status());
  const absl::Status removed = Described(RemoveRunDir(*ops, run));
  if (!summaries.ok()) {
    if (removed.ok()) return summaries.status();
    return absl::Status(summaries.status().code(),
                        absl::StrCat(summaries.status().message(), "; the run directory ",
                                     run.dir.path, " was not removed: ", removed.message()));
  }
  if (!removed.ok()) {
    return absl::Status(removed.code(), absl::StrCat("removing the run directory: ",
                                                     removed.message()));
  }
  return Report(options, *ops, run, *summaries);
}

}  // namespace logfs::bench
