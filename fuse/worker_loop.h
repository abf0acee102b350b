// The FUSE session's workers: what fuse_session_loop_mt does, but able to
// stop without losing a request, so that another process can go on
// serving the same /dev/fuse descriptor (`logfs mount --takeover`).
//
// libfuse 3.14's loop cannot: a worker that has read a request when the
// session is told to exit drops it (fuse_loop_mt.c checks for exit after
// the read), and that caller would wait for a reply forever. Here a worker
// reads a request only while the loop is not stopping, and every request
// it reads it processes (replies, or hands to the mount's pools, which
// reply). Stop() leaves every request not yet read queued in the kernel,
// for whoever reads the descriptor next.
//
// Each worker waits in its own epoll instance on the descriptor, with
// EPOLLEXCLUSIVE (one waiter woken per request, as a blocking read(2) of
// /dev/fuse wakes one reader), and on the loop's stop eventfd (all woken);
// the descriptor is non-blocking, and a worker reads again after each
// request before it waits, so under load it makes one read per request as
// libfuse's loop does.
//
// Thread-safety: Run on one thread; Stop from any, also a signal handler.
#pragma once

#include <fuse_lowlevel.h>

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace logfs::fuse {

class WorkerLoop {
 public:
  // `se` (not owned) must outlive the loop; `threads` >= 1 workers.
  WorkerLoop(fuse_session* se, int threads);
  ~WorkerLoop();
  WorkerLoop(const WorkerLoop&) = delete;
  WorkerLoop& operator=(const WorkerLoop&) = delete;

  enum class End {
    kUnmounted,  // the kernel ended the connection (unmount, abort)
    kStopped,    // Stop(): requests not read stay queued in the kernel
  };
  // Serves until one of End happens; the workers have finished the
  // requests they read (their replies may still be pending on the
  // mount's pools: InterruptWatcher::WaitIdle). kInternal if the workers
  // cannot start (epoll, threads).
  absl::StatusOr<End> Run();
  // Makes Run return (kStopped) once each worker is done with the request
  // it is in. Async-signal-safe; idempotent; a Stop before Run makes Run
  // return at once.
  void Stop();

  // The kernel's FUSE_INIT request as a worker read it (empty before).
  std::string init_request() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work(int epoll_fd);

  fuse_session* const se_;
  const int threads_;
  const int stop_fd_;  // eventfd: readable once stopping
  std::atomic<bool> stopping_{false};
  std::atomic<bool> unmounted_{false};
  mutable absl::Mutex mu_;
  std::string init_request_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::fuse
