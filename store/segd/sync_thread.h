// Group commit for the segment server: one thread that makes appended bytes
// durable for every replica at once and then answers the appends waiting on
// them (BookKeeper's journal thread; LevelDB's DBImpl::Write leader, but
// with a dedicated leader).
//
// A waiter is (segment, target length, callback). Waiters are kept per
// replica ordered by target. The thread runs a round every
// `sync_interval_ms`, or at once when a waiter asks for sync: one
// ReplicaStore::SyncDirty() (one fdatasync per written replica, shared by
// all of its waiters), then every waiter whose target is covered by its
// replica's durable length is answered with the replica's info. A waiter
// whose replica failed, was deleted, or was sealed below its target is
// answered with that error instead. Nothing is ever answered OK before its
// bytes are durable.
//
// Thread-safety: every public method may be called from any thread.
// Callbacks run on the sync thread or on the caller's thread, without
// locks held, and must not block.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

struct SyncThreadOptions {
  int sync_interval_ms = 5;    // longest a covered waiter waits for a round
  size_t waiters_max = 1 << 16;  // more concurrent waiters: kResourceExhausted
  // A sync request that may lead, finding no round in flight or
  // requested, runs the round on the caller's thread: on an idle server
  // (WaitDurable, no other waiter) that saves waking the sync thread, a
  // context switch per sync; after a burst of appends (RequestRound) the
  // io thread leads the burst's one round. Otherwise the sync thread runs
  // it, right after the round in flight.
  bool inline_rounds = true;
};

class SyncThread {
 public:
  using Callback = std::function<void(absl::StatusOr<ReplicaInfo> info)>;

  // Starts the thread. Does not own `store`, which must outlive this.
  SyncThread(ReplicaStore* store, const SyncThreadOptions& options);
  ~SyncThread();  // Stop()

  SyncThread(const SyncThread&) = delete;
  SyncThread& operator=(const SyncThread&) = delete;

  // Runs `done` once the replica's durable length is >= `target` (at once if
  // it already is), or with its error: the replica's sticky failure,
  // kNotFound (deleted, also when the id was created again since: the
  // waiter belongs to the replica of `incarnation`, ReplicaInfo),
  // kFailedPrecondition (sealed below target),
  // kResourceExhausted (too many waiters), kUnavailable (stopped). With
  // `sync`, a round starts now instead of at the next tick.
  // With `may_lead` (and options.inline_rounds), a sync that finds no
  // round in flight or requested and no other waiter runs the round on
  // this thread.
  void WaitDurable(uint64_t segment_id, uint64_t incarnation, uint64_t target, bool sync,
                   Callback done, bool may_lead = false) ABSL_LOCKS_EXCLUDED(mu_);

  // Starts a round now for the waiters registered so far (WaitDurable
  // without `sync` for a burst of appends, then one request for all), on
  // this thread if `may_lead` (and options.inline_rounds) and no round is
  // in flight or requested (other waiters or not), else on the sync
  // thread. Nothing if no one waits.
  void RequestRound(bool may_lead) ABSL_LOCKS_EXCLUDED(mu_);

  // Re-examines the waiters of one replica after a seal or delete changed it
  // outside a round, answering those that can be answered now.
  void Recheck(uint64_t segment_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops the thread (joins it) and answers every waiter kUnavailable.
  // Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds that called fdatasync at least once.
  uint64_t sync_rounds() const { return sync_rounds_.load(); }

 private:
  struct Waiter {
    uint64_t incarnation;  // of the replica whose bytes it waits for
    Callback done;
  };
  using Waiters = std::multimap<uint64_t, Waiter>;  // by target length
  struct Ready {
    Callback done;
    absl::StatusOr<ReplicaInfo> result;
  };

  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a waiter for `target` bytes of that incarnation is still
  // registered (Collect did not answer it).
  bool StillWaiting(uint64_t segment_id, uint64_t incarnation, uint64_t target) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One round: SyncDirty, then answer every covered waiter. Only the
  // thread that set round_running_ calls it.
  void RunRound() ABSL_LOCKS_EXCLUDED(mu_);
  // A caller's inline round (WaitDurable, RequestRound), then hands back
  // to the thread.
  void LeadRound() ABSL_LOCKS_EXCLUDED(mu_);
  // Moves the answerable waiters of `segment_id` to `ready`.
  void Collect(uint64_t segment_id, std::vector<Ready>* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Answer(std::vector<Ready>* ready);

  // Immutable after construction.
  ReplicaStore* const store_;
  const SyncThreadOptions options_;

  // Internally synchronized.
  std::atomic<uint64_t> sync_rounds_{0};

  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Waiters> waiters_ ABSL_GUARDED_BY(mu_);
  size_t waiter_count_ ABSL_GUARDED_BY(mu_) = 0;
  bool sync_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool round_running_ ABSL_GUARDED_BY(mu_) = false;  // SyncDirty is single-threaded
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // joined by the first Stop()
};

}  // namespace logfs::segd
