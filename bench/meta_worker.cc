#include "bench/meta_worker.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "src/status/syscall_error.h"

namespace logfs::bench {
namespace {

int64_t NowNs() {
  // steady_clock is CLOCK_MONOTONIC, one clock for every process of the
  // host: the coordinator compares forked workers' times directly.
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// "worker 3, stat: stat /d/f.3.7: No such file or directory (errno 2, ENOENT)".
absl::Status WorkerError(int worker, MetaPhase phase, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("worker ", worker, ", ", MetaPhaseName(phase),
                                                   ": ", status.message(), ErrnoText(status)));
}

// The create, stat, rename and unlink phases: one timed call per file.
absl::Status RunPerFile(NamespaceOps& ops, const MetaWorkerPlan& plan, MetaPhase phase,
                        WorkerReport& report) {
  for (int i = 0; i < plan.files; ++i) {
    const std::string name = MetaFileName(plan.worker, i);
    const std::string renamed = MetaRenamedName(plan.worker, i);
    absl::Status status;
    const int64_t begin_ns = NowNs();
    switch (phase) {
      case MetaPhase::kCreate:
        status = ops.CreateFile(plan.dir, name);
        break;
      case MetaPhase::kStat: {
        absl::StatusOr<uint32_t> mode = ops.StatMode(plan.dir, name);
        status = mode.status();
        if (mode.ok() && !S_ISREG(*mode)) {
          status = absl::DataLossError(
              absl::StrCat("stat ", plan.dir.path, "/", name, ": mode ", *mode,
                           " is not a regular file's"));
        }
        break;
      }
      case MetaPhase::kRename:
        status = ops.Rename(plan.dir, name, renamed);
        break;
      case MetaPhase::kUnlink:
        status = ops.Unlink(plan.dir, renamed);
        break;
      case MetaPhase::kReaddir:
        return absl::InternalError("readdir is not a per-file phase");
    }
    const int64_t end_ns = NowNs();
    if (!status.ok()) return status;
    report.latency_ns.push_back(static_cast<uint64_t>(end_ns - begin_ns));
    report.ops++;
    report.end_ns = end_ns;
  }
  return absl::OkStatus();
}

// What a listing must hold, sorted.
std::vector<std::string> ExpectedNames(const MetaWorkerPlan& plan) {
  std::vector<std::string> names;
  const int first = plan.shared_dir ? 0 : plan.worker;
  const int last = plan.shared_dir ? plan.workers - 1 : plan.worker;
  names.reserve(static_cast<size_t>(last - first + 1) * plan.files);
  for (int w = first; w <= last; ++w) {
    for (int i = 0; i < plan.files; ++i) names.push_back(MetaFileName(w, i));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// kDataLoss naming the first missing and the first unexpected name.
absl::Status CheckListing(const MetaWorkerPlan& plan, std::vector<std::string> listed) {
  const std::vector<std::string> expected = ExpectedNames(plan);
  std::sort(listed.begin(), listed.end());
  if (listed == expected) return absl::OkStatus();
  std::vector<std::string> missing, unexpected;
  std::set_difference(expected.begin(), expected.end(), listed.begin(), listed.end(),
                      std::back_inserter(missing));
  std::set_difference(listed.begin(), listed.end(), expected.begin(), expected.end(),
                      std::back_inserter(unexpected));
  std::string message = absl::StrCat("readdir ", plan.dir.path, ": listed ", listed.size(),
                                     " names, want ", expected.size());
  if (!missing.empty()) {
    absl::StrAppend(&message, "; ", missing.size(), " missing, such as ", missing.front());
  }
  if (!unexpected.empty()) {
    absl::StrAppend(&message, "; ", unexpected.size(), " unexpected, such as ",
                    unexpected.front());
  }
  if (missing.empty() && unexpected.empty()) absl::StrAppend(&message, "; some listed twice");
  return absl::DataLossError(message);
}

// The readdir phase: one timed listing of the whole directory; each name
// listed counts as an op. The check runs after the clock stops.
absl::Status RunListing(NamespaceOps& ops, const MetaWorkerPlan& plan, WorkerReport& report) {
  const int64_t begin_ns = NowNs();
  absl::StatusOr<std::vector<std::string>> names = ops.ListNames(plan.dir);
  const int64_t end_ns = NowNs();
  if (!names.ok()) return names.status();
  report.latency_ns.push_back(static_cast<uint64_t>(end_ns - begin_ns));
  report.ops = names->size();
  report.end_ns = end_ns;
  return CheckListing(plan, std::move(*names));
}

}  // namespace

std::string ErrnoText(const absl::Status& status) {
  const int e = AttachedErrno(status);
  if (e == 0) return "";
  const char* name = strerrorname_np(e);  // null for an errno glibc does not know
  return absl::StrCat(" (errno ", e, name != nullptr ? absl::StrCat(", ", name) : "", ")");
}

std::string MetaFileName(int worker, int index) { return absl::StrCat("f.", worker, ".", index); }
std::string MetaRenamedName(int worker, int index) {
  return absl::StrCat("r.", worker, ".", index);
}

WorkerReport RunMetaPhase(NamespaceOps& ops, const MetaWorkerPlan& plan, MetaPhase phase) {
  WorkerReport report;
  report.latency_ns.reserve(phase == MetaPhase::kReaddir ? 1 : plan.files);
  report.start_ns = NowNs();
  report.end_ns = report.start_ns;
  const absl::Status status = phase == MetaPhase::kReaddir
                                  ? RunListing(ops, plan, report)
                                  : RunPerFile(ops, plan, phase, report);
  if (!status.ok()) report.error = WorkerError(plan.worker, phase, status);
  return report;
}

absl::Status ServeMetaWorker(NamespaceOps& ops, const MetaWorkerPlan& plan, int fd) {
  for (;;) {
    uint8_t command = 0;
    const ssize_t n = ::recv(fd, &command, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "recv of a bench meta command");
    if (n == 0 || command == kMetaWorkerQuit) return absl::OkStatus();
    if (command > static_cast<uint8_t>(MetaPhase::kUnlink)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown bench meta command ", command));
    }
    const WorkerReport report = RunMetaPhase(ops, plan, static_cast<MetaPhase>(command));
    if (absl::Status s = SendWorkerReport(fd, report); !s.ok()) return s;
  }
}

absl::Status SendMetaWorkerCommand(int fd, uint8_t command) {
  for (;;) {
    const ssize_t n = ::send(fd, &command, 1, MSG_NOSIGNAL);
    if (n == 1) return absl::OkStatus();
    if (n < 0 && errno == EINTR) continue;
    return SyscallError(n < 0 ? errno : EIO, "send of a bench meta command");
  }
}

}  // namespace logfs::bench
