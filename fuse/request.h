// One FUSE request from its op callback to its reply, which it gets
// exactly once (DESIGN §2: no process on the mount may be left hanging or
// unkillable):
// - by the op, inline or from a completion (the writer's, the waiting
//   pool's), through Claim();
// - or, if the kernel interrupts it (FUSE_INTERRUPT: its caller got a
//   signal while it waited) and the caller is dying (SIGKILL pending, or
//   exiting after a fatal signal: fuse/process_state.h), with EINTR by the
//   InterruptWatcher, at once. The kernel waits for a FLUSH (every close,
//   also the implicit ones of an exiting process) and for any request
//   already sent without letting even SIGKILL end the wait; only a reply
//   frees such a caller. The op's own completion comes later and finds the
//   request answered (Claim() returns null).
// A caller that is interrupted but not dying (a handled signal: SIGALRM,
// a profiler's SIGPROF) keeps waiting for the op's own reply, as on a
// local file system: an fsync or close must not fail because of a signal
// the application handles. The watcher looks at it again every
// kDyingPollInterval, since a SIGKILL that follows sends no second
// interrupt.
//
// Locking follows libfuse 3.14's: it calls the interrupt callback with the
// request's lock held (fuse_lowlevel.c find_interrupted, and
// fuse_req_interrupt_func at registration), so the callback never replies
// (a reply there can free the request under that lock); it hands the
// request to the watcher's thread. Whoever wins the reply (Claim's atomic
// exchange) first unregisters the callback, which waits out a callback in
// progress, and only then replies.
#pragma once

#include <fuse_lowlevel.h>
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fuse/op_metrics.h"

namespace logfs::fuse {

class InterruptWatcher;

class Request : public std::enable_shared_from_this<Request> {
 public:
  // Starts tracking `req` as op `op` (timed from now; fuse/op_metrics.h)
  // and registers for its interrupts. Call on the op callback's thread,
  // before anything may reply. `watcher` must outlive the request.
  static std::shared_ptr<Request> Start(fuse_req_t req, FuseOp op, InterruptWatcher& watcher);
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // The right to reply: `req` once, to exactly one caller, with its
  // interrupt callback unregistered; null to every later caller and when
  // the request was answered already (interrupted: EINTR). The caller then
  // replies with one fuse_reply_* call and passes its result and errno to
  // Replied(). Thread-safe.
  fuse_req_t Claim();
  // Records the op's latency and errno (`error`, 0 for success) and, when
  // `reply_result` (what fuse_reply_* returned) is a failure other than
  // -ENOENT (the kernel dropped an interrupted request), logs it: that
  // caller now waits for a reply nobody will send (fuse_reply_* frees the
  // request even when the write to /dev/fuse fails), so every reply is
  // built so that the kernel cannot refuse it (ReplyData's gather).
  void Replied(int reply_result, int error) const;

  FuseOp op() const { return op_; }
  pid_t caller() const { return caller_; }  // the calling thread's id

 private:
  friend class InterruptWatcher;
  Request(fuse_req_t req, FuseOp op, InterruptWatcher& watcher);
  static void OnInterrupt(fuse_req_t req, void* self);
  // Replies EINTR if nobody has replied; true if it did.
  bool AnswerInterrupted();
  bool answered() const { return claimed_.load(std::memory_order_acquire); }

  const fuse_req_t req_;
  const FuseOp op_;
  const FuseOpTimer timer_;
  const pid_t caller_;
  InterruptWatcher& watcher_;
  std::atomic<bool> claimed_{false};
};

// The thread that answers interrupted requests of dying callers: the
// interrupt callback hands each request over, and it checks its caller at
// once, then every kDyingPollInterval until the request is answered.
// Started at the first interrupt. Thread-safe.
class InterruptWatcher {
 public:
  static constexpr absl::Duration kDyingPollInterval = absl::Milliseconds(100);

  InterruptWatcher() = default;
  // Stop().
  ~InterruptWatcher();
  InterruptWatcher(const InterruptWatcher&) = delete;
  InterruptWatcher& operator=(const InterruptWatcher&) = delete;

  void Watch(std::shared_ptr<Request> request) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until every request started with this watcher is gone (replied
  // and destroyed, the op's work with it: a request answered as
  // interrupted may still be read by its op), or `wait` has passed
  // (false). What a daemon handing its mount over waits for once its
  // workers read no more requests.
  bool WaitIdle(absl::Duration wait) ABSL_LOCKS_EXCLUDED(idle_mu_);
  // Stops the thread and lets go of the requests it watched; one nobody
  // answered then replies EIO (~Request). Call while the session lives,
  // once nothing more can be interrupted (the mount has drained).
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class Request;
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Counted by every Request's constructor and destructor: an atomic
  // count, and the mutex only once a WaitIdle waits.
  void Started() { live_.fetch_add(1); }
  void Ended() ABSL_LOCKS_EXCLUDED(idle_mu_);

  std::atomic<int64_t> live_{0};
  std::atomic<bool> draining_{false};
  absl::Mutex idle_mu_;

  absl::Mutex mu_;
  std::vector<std::shared_ptr<Request>> watched_ ABSL_GUARDED_BY(mu_);
  bool added_ ABSL_GUARDED_BY(mu_) = false;  // Watch since the last scan
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::fuse
