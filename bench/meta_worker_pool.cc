#include "bench/meta_worker_pool.h"

#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"

namespace logfs::bench {
namespace {

// "exited with status 1", "was killed by signal 9 (Killed)".
std::string DescribeExit(int wait_status) {
  if (WIFEXITED(wait_status)) return absl::StrCat("exited with status ", WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(wait_status), " (",
                        strsignal(WTERMSIG(wait_status)), ")");
  }
  return absl::StrCat("ended with wait status ", wait_status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetaWorkerPool>> MetaWorkerPool::Start(
    NamespaceOps& ops, const std::vector<MetaWorkerPlan>& plans, bool processes) {
  if (processes && !ops.ForkSafe()) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker processes cannot use ", ops.Describe(), " (not fork-safe)"));
  }
  auto pool = std::unique_ptr<MetaWorkerPool>(new MetaWorkerPool());
  for (const MetaWorkerPlan& plan : plans) {
    RETURN_IF_ERROR(pool->StartOne(ops, plan, processes));
  }
  return pool;
}

MetaWorkerPool::~MetaWorkerPool() {
  // A caller that cared about Stop's error called it already.
  Stop().IgnoreError();
}

absl::StatusOr<std::vector<WorkerReport>> MetaWorkerPool::RunPhase(MetaPhase phase) {
  absl::Status first_error;
  std::vector<bool> sent(workers_.size(), false);
  for (size_t w = 0; w < workers_.size(); ++w) {
    absl::Status s = SendMetaWorkerCommand(workers_[w].fd.get(), static_cast<uint8_t>(phase));
    sent[w] = s.ok();
    if (!s.ok() && first_error.ok()) first_error = Lost(w, s);
  }
  std::vector<WorkerReport> reports(workers_.size());
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!sent[w]) continue;
    absl::StatusOr<WorkerReport> report = ReceiveWorkerReport(workers_[w].fd.get());
    if (!report.ok()) {
      if (first_error.ok()) first_error = Lost(w, report.status());
      continue;
    }
    if (!report->error.ok() && first_error.ok()) first_error = report->error;
    reports[w] = std::move(*report);
  }
  if (!first_error.ok()) return first_error;
  return reports;
}

absl::Status MetaWorkerPool::Stop() {
  absl::Status first_error;
  for (Worker& worker : workers_) {
    if (!worker.fd.valid()) continue;
    // A worker gone already cannot take the command; shutting the socket
    // down also ends a worker blocked sending a report nobody reads.
    SendMetaWorkerCommand(worker.fd.get(), kMetaWorkerQuit).IgnoreError();
    ::shutdown(worker.fd.get(), SHUT_RDWR);
  }
  for (size_t w = 0; w < workers_.size(); ++w) {
    Worker& worker = workers_[w];
    if (worker.thread.joinable()) worker.thread.join();
    if (worker.pid > 0) {
      const int status = Reap(w);
      if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0) && first_error.ok()) {
        first_error = absl::InternalError(
            absl::StrCat("worker ", w, " (pid ", worker.reaped_pid, ") ", DescribeExit(status)));
      }
    }
    worker.fd.Reset();
  }
  return first_error;
}

absl::Status MetaWorkerPool::StartOne(NamespaceOps& ops, const MetaWorkerPlan& plan,
                                      bool processes) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return SyscallError(errno, "socketpair for a bench meta worker");
  }
  util::UniqueFd worker_end(fds[1]);
  Worker& worker = workers_.emplace_back();
  worker.fd.Reset(fds[0]);
  if (!processes) {
    worker.thread = std::thread([&ops, plan, fd = std::move(worker_end)] {
      // Fails only when the coordinator's end is gone, which the
      // coordinator knows already.
      ServeMetaWorker(ops, plan, fd.get()).IgnoreError();
    });
    return absl::OkStatus();
  }
  std::fflush(nullptr);  // the child must not write the parent's buffered output again
  const pid_t pid = ::fork();
  if (pid < 0) return SyscallError(errno, "fork of a bench meta worker");
  if (pid == 0) {
    // The child keeps only its own end: the others' ends would hide
    // their EOF from them if the coordinator died.
    for (Worker& other : workers_) ::close(other.fd.Release());
    const absl::Status status = ServeMetaWorker(ops, plan, worker_end.get());
    ::_exit(status.ok() ? 0 : 1);  // no atexit handlers or destructors of the parent's state
  }
  worker.pid = pid;
  return absl::OkStatus();
}

int MetaWorkerPool::Reap(size_t w) {
  Worker& worker = workers_[w];
  if (worker.pid > 0) {
    while (::waitpid(worker.pid, &worker.wait_status, 0) < 0 && errno == EINTR) {
    }
    worker.reaped_pid = std::exchange(worker.pid, 0);
  }
  return worker.wait_status;
}

absl::Status MetaWorkerPool::Lost(size_t w, const absl::Status& status) {
  Worker& worker = workers_[w];
  if (worker.pid <= 0 && worker.reaped_pid <= 0) {
    return absl::InternalError(absl::StrCat("worker ", w, ": ", status.message()));
  }
  worker.fd.Reset();  // so that a live one cannot block on a socket nobody reads
  const int wait_status = Reap(w);
  return absl::InternalError(absl::StrCat("worker ", w, " (pid ", worker.reaped_pid, "): ",
                                          status.message(), "; it ", DescribeExit(wait_status)));
}

}  // namespace logfs::bench
