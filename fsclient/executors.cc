#include "fsclient/executors.h"

#include <glog/logging.h>

#include <utility>

namespace logfs::fsclient {
namespace {

thread_local Executor current_executor = Executor::kCaller;

// Runs `job` as a job of `executor` (pool threads are asio's: each job
// tags the thread it runs on).
void RunAs(Executor executor, const std::function<void()>& job) {
  const Executor outer = current_executor;
  current_executor = executor;
  job();
  current_executor = outer;
}

}  // namespace

const char* ExecutorName(Executor executor) {
  switch (executor) {
    case Executor::kCaller:
      return "caller";
    case Executor::kWaiting:
      return "waiting";
    case Executor::kRecovery:
      return "recovery";
    case Executor::kHeartbeat:
      return "heartbeat";
    case Executor::kIo:
      return "io";
  }
  return "unknown";
}

Executors::Executors(Options options)
    : options_(options),
      waiting_(static_cast<size_t>(options.waiting_threads)),
      recovery_(static_cast<size_t>(options.recovery_threads)) {
  CHECK_GT(options.io_threads, 0);
  CHECK_GT(options.waiting_threads, 0);
  CHECK_GT(options.recovery_threads, 0);
}

Executors::~Executors() { Shutdown(); }

Executor Executors::Current() { return current_executor; }

void Executors::CheckMayWaitOn(Executor on, const char* what) {
  CHECK(MayWaitOn(current_executor, on))
      << "a thread of executor '" << ExecutorName(current_executor) << "' would wait on '"
      << ExecutorName(on) << "' (" << what << "): it may wait only on the executors after its "
      << "own (fsclient/executors.h)";
}

void Executors::StartIo() {
  if (!io_threads_.empty()) return;
  work_.emplace(asio::make_work_guard(io_));
  for (int i = 0; i < options_.io_threads; ++i) {
    io_threads_.emplace_back([this] { RunAs(Executor::kIo, [this] { io_.run(); }); });
  }
}

void Executors::PostWaiting(std::function<void()> job) {
  asio::post(waiting_, [job = std::move(job)] { RunAs(Executor::kWaiting, job); });
}

void Executors::PostRecovery(std::function<void()> job) {
  asio::post(recovery_, [job = std::move(job)] { RunAs(Executor::kRecovery, job); });
}

void Executors::StartHeartbeat(std::function<void()> loop) {
  CHECK(!heartbeat_.joinable()) << "one heartbeat per client";
  heartbeat_ = std::thread([loop = std::move(loop)] { RunAs(Executor::kHeartbeat, loop); });
}

void Executors::JoinPools() {
  CheckMayWaitOn(Executor::kWaiting, "Executors::JoinPools");
  if (heartbeat_.joinable()) heartbeat_.join();
  waiting_.join();
  recovery_.join();
}

void Executors::StopIo() {
  work_.reset();
  io_.stop();
  for (auto& thread : io_threads_) thread.join();
  io_threads_.clear();
}

}  // namespace logfs::fsclient
