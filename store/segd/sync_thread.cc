#include "store/segd/sync_thread.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/segd_metrics.h"

namespace logfs::segd {

SyncThread::SyncThread(ReplicaStore* store, const SyncThreadOptions& options)
    : store_(store), options_(options) {
  thread_ = std::thread([this] { Run(); });
}

SyncThread::~SyncThread() { Stop(); }

void SyncThread::WaitDurable(uint64_t segment_id, uint64_t incarnation, uint64_t target, bool sync,
                             Callback done, bool may_lead) {
  std::vector<Ready> ready;
  bool lead = false;
  {
    absl::MutexLock lock(&mu_);
    if (stop_) {
      ready.push_back({std::move(done), absl::UnavailableError("segment server is stopping")});
    } else if (waiter_count_ >= options_.waiters_max) {
      ready.push_back({std::move(done), absl::ResourceExhaustedError(absl::StrCat(
                                            "more than ", options_.waiters_max,
                                            " appends waiting for sync"))});
    } else {
      // Checked under mu_ against the store's current durable length: a round
      // that raised it either finished before (we see it here) or collects
      // after we release mu_ (and sees this waiter).
      waiters_[segment_id].emplace(target, Waiter{incarnation, std::move(done)});
      ++waiter_count_;
      Collect(segment_id, &ready);
      if (sync && StillWaiting(segment_id, incarnation, target)) {
        if (options_.inline_rounds && may_lead && !round_running_ && !sync_requested_ &&
            waiter_count_ == 1) {
          // No round in flight: this thread leads one itself instead of
          // waking the sync thread (LevelDB's DBImpl::Write leader).
          round_running_ = true;
          lead = true;
        } else {
          sync_requested_ = true;
        }
      }
    }
  }
  Answer(&ready);
  if (lead) LeadRound();
}

void SyncThread::RequestRound(bool may_lead) {
  bool lead = false;
  {
    absl::MutexLock lock(&mu_);
    if (stop_ || waiter_count_ == 0) return;
    if (options_.inline_rounds && may_lead && !round_running_ && !sync_requested_) {
      round_running_ = true;
      lead = true;
    } else {
      sync_requested_ = true;
    }
  }
  if (lead) LeadRound();
}

void SyncThread::LeadRound() {
  RunRound();
  absl::MutexLock lock(&mu_);
  round_running_ = false;
  // Syncs asked for during our round are the sync thread's: this thread
  // serves a connection and must not stay here under load.
}

void SyncThread::Recheck(uint64_t segment_id) {
  std::vector<Ready> ready;
  {
    absl::MutexLock lock(&mu_);
    Collect(segment_id, &ready);
  }
  Answer(&ready);
}

void SyncThread::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    stop_ = true;
  }
  thread_.join();
  std::vector<Ready> ready;
  {
    absl::MutexLock lock(&mu_);
    // A caller may be leading a round; it must not outlive the store.
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !round_running_; };
    mu_.Await(absl::Condition(&idle));
    for (auto& [id, waiters] : waiters_) {
      for (auto& [target, waiter] : waiters) {
        ready.push_back(
            {std::move(waiter.done), absl::UnavailableError("segment server is stopping")});
      }
    }
    waiters_.clear();
    waiter_count_ = 0;
  }
  Answer(&ready);
}

void SyncThread::Run() {
  const absl::Duration interval = absl::Milliseconds(options_.sync_interval_ms);
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (sync_requested_ && !round_running_);
      };
      mu_.AwaitWithTimeout(absl::Condition(&wake), interval);
      if (stop_) return;
      if (round_running_) continue;  // a leader's round; it covers the tick too
      sync_requested_ = false;
      round_running_ = true;
    }
    RunRound();
    absl::MutexLock lock(&mu_);
    round_running_ = false;
  }
}

void SyncThread::RunRound() {
  // Without mu_: appends and new waiters keep coming while we fdatasync.
  const absl::Time start = absl::Now();
  if (store_->SyncDirty() > 0) {
    sync_rounds_.fetch_add(1);
    GlobalSegdMetrics().sync_round.Observe(absl::Now() - start);
  }
  std::vector<Ready> ready;
  {
    absl::MutexLock lock(&mu_);
    std::vector<uint64_t> ids;
    ids.reserve(waiters_.size());
    for (const auto& [id, waiters] : waiters_) ids.push_back(id);
    for (uint64_t id : ids) Collect(id, &ready);
  }
  if (!ready.empty()) GlobalSegdMetrics().round_waiters.Observe(ready.size());
  Answer(&ready);
}

void SyncThread::Collect(uint64_t segment_id, std::vector<Ready>* ready) {
  auto it = waiters_.find(segment_id);
  if (it == waiters_.end()) return;
  Waiters& waiters = it->second;
  absl::StatusOr<ReplicaInfo> info = store_->Info(segment_id);
  auto take = [&](Waiters::iterator w, absl::StatusOr<ReplicaInfo> result)
                  ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                    ready->push_back({std::move(w->second.done), std::move(result)});
                    --waiter_count_;
                    return waiters.erase(w);
                  };
  for (auto w = waiters.begin(); w != waiters.end();) {
    if (!info.ok()) {
      w = take(w, info.status());
    } else if (w->second.incarnation != info->incarnation) {
      // Deleted (a copy starting over) and created again: the bytes it
      // waits for went with the old replica.
      w = take(w, absl::NotFoundError(absl::StrCat("segment ", segment_id, " was deleted before ",
                                                   w->first, " bytes became durable")));
    } else if (w->first <= info->durable_length) {
      w = take(w, *info);
    } else if (info->sealed) {
      // Sealed below the target: these bytes were cut off and never will be
      // durable here.
      w = take(w, absl::FailedPreconditionError(
                      absl::StrCat("segment ", segment_id, " was sealed at ", info->length,
                                   " before ", w->first, " became durable")));
    } else {
      ++w;  // not covered yet (a later one may be a deleted replica's)
    }
  }
  if (waiters.empty()) waiters_.erase(it);
}

bool SyncThread::StillWaiting(uint64_t segment_id, uint64_t incarnation, uint64_t target) const {
  // Collect answers waiters of one target and incarnation alike: if one
  // such is left, so is the caller's.
  auto it = waiters_.find(segment_id);
  if (it == waiters_.end()) return false;
  auto [begin, end] = it->second.equal_range(target);
  for (auto w = begin; w != end; ++w) {
    if (w->second.incarnation == incarnation) return true;
  }
  return false;
}

void SyncThread::Answer(std::vector<Ready>* ready) {
  // The callbacks reply to appends; a round's replies to one client leave
  // in one write.
  rpc::ResponseBatch batch;
  for (Ready& r : *ready) r.done(std::move(r.result));
  ready->clear();
}

}  // namespace logfs::segd
