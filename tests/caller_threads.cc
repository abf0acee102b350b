#include "tests/caller_threads.h"

#include <signal.h>

#include "absl/time/clock.h"

namespace logfs::testing {

bool StalledServers::Stall() {
  for (int i = 0; i < cluster_.segment_servers(); ++i) {
    stopped_.push_back(cluster_.segd_pid(i));
    if (!StopProcess(stopped_.back())) return false;
  }
  return true;
}

void StalledServers::Resume() {
  for (pid_t pid : stopped_) kill(pid, SIGCONT);
  stopped_.clear();
}

void CallerThreads::Start(std::function<void()> body) {
  threads_.emplace_back([this, body = std::move(body)] {
    body();
    ++ended_;
  });
}

bool CallerThreads::JoinWithin(absl::Duration deadline) {
  const absl::Time give_up = absl::Now() + deadline;
  while (ended() < static_cast<int>(threads_.size()) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const bool all_ended = ended() == static_cast<int>(threads_.size());
  if (!all_ended) cluster_.KillMount(mount_);
  for (auto& t : threads_) t.join();
  threads_.clear();
  ended_ = 0;
  return all_ended;
}

}  // namespace logfs::testing
