#include "fuse/request.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "fuse/process_state.h"
#include "src/util/log_rate_limit.h"

namespace logfs::fuse {

std::shared_ptr<Request> Request::Start(fuse_req_t req, FuseOp op, InterruptWatcher& watcher) {
  std::shared_ptr<Request> request(new Request(req, op, watcher));
  // If the interrupt came first, libfuse calls OnInterrupt from here.
  fuse_req_interrupt_func(req, &Request::OnInterrupt, request.get());
  return request;
}

Request::Request(fuse_req_t req, FuseOp op, InterruptWatcher& watcher)
    : req_(req), op_(op), timer_(op), caller_(fuse_req_ctx(req)->pid), watcher_(watcher) {
  watcher_.Started();
}

Request::~Request() {
  // Every path of every op replies; a request dropped unanswered (a
  // completion destroyed without being run) would leave its caller
  // waiting in the kernel for good, so it gets EIO here.
  if (fuse_req_t req = Claim()) {
    LOG(ERROR) << "FUSE " << FuseOpName(op_) << " request of thread " << caller_
               << " was dropped without a reply; replying EIO";
    Replied(fuse_reply_err(req, EIO), EIO);
  }
  watcher_.Ended();
}

void InterruptWatcher::Ended() {
  if (live_.fetch_sub(1) == 1 && draining_.load()) {
    absl::MutexLock lock(&idle_mu_);  // wakes WaitIdle, which checks live_
  }
}

bool InterruptWatcher::WaitIdle(absl::Duration wait) {
  draining_.store(true);
  absl::MutexLock lock(&idle_mu_);
  auto idle = [this] { return live_.load() == 0; };
  return idle_mu_.AwaitWithTimeout(absl::Condition(&idle), wait);
}

fuse_req_t Request::Claim() {
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return nullptr;
  // Waits for an OnInterrupt in progress (libfuse holds the request's
  // lock around it); none follows.
  fuse_req_interrupt_func(req_, nullptr, nullptr);
  return req_;
}

void Request::Replied(int reply_result, int error) const {
  timer_.Done(error);
  if (reply_result == 0 || reply_result == -ENOENT) return;
  RecordFuseReplyFailure();
  LOGFS_LOG_EVERY_MS(ERROR, 1000) << "FUSE " << FuseOpName(op_) << " reply to thread " << caller_
                                  << " was refused by the kernel: " << std::strerror(-reply_result);
}

void Request::OnInterrupt(fuse_req_t, void* self) {
  // Under the request's lock: hand it over, reply nowhere here. The
  // request is alive (its op holds it until Claim, which waits for this
  // callback), unless it is being destroyed right now: then lock() fails.
  if (auto request = static_cast<Request*>(self)->weak_from_this().lock()) {
    request->watcher_.Watch(std::move(request));
  }
}

bool Request::AnswerInterrupted() {
  fuse_req_t req = Claim();
  if (req == nullptr) return false;
  Replied(fuse_reply_err(req, EINTR), EINTR);
  return true;
}

InterruptWatcher::~InterruptWatcher() { Stop(); }

void InterruptWatcher::Stop() {
  std::thread thread;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    thread = std::move(thread_);
  }
  if (thread.joinable()) thread.join();
  std::vector<std::shared_ptr<Request>> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(watched_);
  }
}

void InterruptWatcher::Watch(std::shared_ptr<Request> request) {
  absl::MutexLock lock(&mu_);
  // Kept even while stopping: the request must not be destroyed here,
  // under its lock (its destructor's Claim takes that lock).
  watched_.push_back(std::move(request));
  added_ = true;
  if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { Run(); });
}

void InterruptWatcher::Run() {
  std::vector<std::shared_ptr<Request>> scan;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      // Back what the last scan kept, then wait for a new interrupt, the
      // next poll, or the end.
      for (auto& r : scan) watched_.push_back(std::move(r));
      scan.clear();
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return added_ || stopping_; };
      if (watched_.empty()) {
        mu_.Await(absl::Condition(&woken));
      } else {
        mu_.AwaitWithTimeout(absl::Condition(&woken), kDyingPollInterval);
      }
      if (stopping_) return;
      added_ = false;
      scan.swap(watched_);
    }
    // No lock held: Claim takes each request's libfuse lock, which an
    // interrupt callback holds while it calls Watch.
    std::vector<std::shared_ptr<Request>> keep;
    for (auto& request : scan) {
      if (request->answered()) continue;
      if (CallerIsDying(request->caller())) {
        if (request->AnswerInterrupted()) {
          LOG(WARNING) << "FUSE " << FuseOpName(request->op()) << " of thread " << request->caller()
                       << ", which is being killed, answered EINTR";
        }
        continue;
      }
      keep.push_back(std::move(request));
    }
    scan.swap(keep);
  }
}

}  // namespace logfs::fuse
