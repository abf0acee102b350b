// Meta's side of coherent mount caches (docs/coherence.md): what each
// mount's kernel may cache, the invalidations a change owes the mounts, and
// the wait that holds a change's reply until they are applied.
//
// Each mount has one cache session (named by a random token). Before meta
// answers a lookup or getattr that carries the session, it records the
// directory or inode the answer lets the mount cache (RecordDir,
// RecordInode, RecordInodeRead). Once a change is durable, MetadataDb hands
// its changed keys to Publish, which queues an invalidation to every other
// session that recorded the key; the change's own mount records the keys
// instead (its kernel already knows the change). A mount's long poll
// (Watch) takes its invalidations and acknowledges the ones it applied.
// AfterInvalidated holds a change's reply until the invalidations it made
// are acknowledged, or their mount's cache lease has run out: a mount
// trusts its cache only for one lease after it sent a poll that was
// answered, so one whose polls stopped arriving (dead, partitioned, or
// stuck), or that left an invalidation unacknowledged for a lease, has
// dropped its cache by then. A change that returned had its own
// invalidations applied, so a change that follows it need not wait for
// them again: each change waits for its own only. As CephFS's MDS revokes a client's
// capabilities before a conflicting change, and NFSv4 recalls a delegation;
// a session that does not answer times out as a CephFS session does.
//
// Bounded: a session records at most `inodes_max` inodes, then receives
// every invalidation; more than `queue_max` unacknowledged invalidations
// end in a reset (the mount drops everything it cached, and its record
// starts over). While a session's reset is unacknowledged (a new session
// starts with one), every change owes it that reset.
//
// Thread-safe. Callbacks (WatchReply, AfterInvalidated's) run without the
// mutex, on the calling thread or on the class's timer thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/format/logfs.pb.h"
#include "store/meta/db/metadata_db.h"

namespace logfs::meta {

struct MountCachesOptions {
  // How long a mount trusts its cache after it sent a poll that was
  // answered (the mount learns it from the answer). A held poll is
  // answered after a quarter of it.
  absl::Duration lease = absl::Seconds(1);
  // A meta that may have had predecessors (a restart, a failover): for
  // one lease from construction a change's reply waits in
  // AfterInvalidated, since mounts may still trust what the previous meta
  // process told them. False for a cluster created just now.
  bool restarted = true;
  size_t inodes_max = 1 << 18;  // recorded per session, then "everything"
  size_t queue_max = 1 << 16;   // unacknowledged per session, then a reset
  size_t recent_max = 4096;     // inode invalidations remembered for RecordInodeRead
};

class MountCaches {
 public:
  // Time source for the lease and hold arithmetic (tests pass a fake
  // clock; TEST_Tick then does the timer thread's work).
  using Clock = std::function<absl::Time()>;
  // The answer to one Watch; called exactly once.
  using WatchReply = std::function<void(const proto::WatchCacheResponse&)>;

  // With `clock` null, uses absl::Now and starts the timer thread, which
  // answers held polls and releases waits whose mounts' leases ran out.
  explicit MountCaches(MountCachesOptions options, Clock clock = nullptr);
  // Answers every held poll (empty) and runs every waiting callback.
  ~MountCaches();
  MountCaches(const MountCaches&) = delete;
  MountCaches& operator=(const MountCaches&) = delete;

  const MountCachesOptions& options() const { return options_; }

  // Before a read for `session`: the mount may cache the entries of
  // directory `dir` (names, and names that do not exist), or the
  // attributes of `ino`. No-op unless `session` is a live session's.
  void RecordDir(const proto::CacheSession& session, uint64_t dir) ABSL_LOCKS_EXCLUDED(mu_);
  void RecordInode(const proto::CacheSession& session, uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);
  // A read position: call before a read whose inode is known only after
  // it (a lookup), then RecordInodeRead with it.
  uint64_t ReadPosition() const ABSL_LOCKS_EXCLUDED(mu_);
  // After such a read: records `ino` and returns true if an invalidation
  // of it was published since `position` (the read may have seen the older
  // value, and the change that made it need not have waited for this
  // session): the caller reads again. With `invalidate`, the session then
  // also gets an invalidation of it (its kernel drops the answer soon).
  bool RecordInodeRead(const proto::CacheSession& session, uint64_t ino, uint64_t position,
                       bool invalidate) ABSL_LOCKS_EXCLUDED(mu_);

  // Durable changes (MetadataDb::DurableObserver): queues their
  // invalidations and answers the held polls they concern.
  void Publish(const std::vector<ChangedKeys>& changes) ABSL_LOCKS_EXCLUDED(mu_);

  // One poll: acknowledges what `request.acked_seq` covers, then answers
  // at once (invalidations queued, or a new session: reset) or holds the
  // answer for up to a quarter of the lease. A newer poll of the same
  // session answers the one held before it (empty).
  void Watch(const proto::WatchCacheRequest& request, WatchReply reply) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `done` once the invalidations of the change `call_seq` of mount
  // `origin_mount` (ChangedKeys::origin_call) are acknowledged, or their
  // session's lease has run out, and the restart gate has passed; inline
  // when that holds already. A change without a call id (call_seq 0), or
  // one published nothing for (a retry answered from meta's record, a
  // change that wrote nothing), waits for every invalidation published so
  // far instead. A session whose mount has a change of its own in flight is
  // not waited for: its kernel may hold the directory lock a drop needs
  // until that change returns (and that change may be waiting here), so it
  // drops what it owes right after; waiting for it could deadlock two
  // mounts changing one directory at once.
  void AfterInvalidated(uint64_t origin_mount, uint64_t call_seq, std::function<void()> done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Bracket a change of `mount_id` (0: none) that holds an inode lock in
  // its kernel (create, unlink, rename, setattr, setxattr, removexattr:
  // MetaService::LockingChangeMount) from its arrival to its reply.
  void BeginChange(uint64_t mount_id) ABSL_LOCKS_EXCLUDED(mu_);
  void EndChange(uint64_t mount_id) ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    size_t sessions = 0;
    uint64_t invalidations_sent = 0;
    uint64_t resets = 0;
    uint64_t lapsed_waits = 0;  // waits released by a lease running out, not an ack
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

  // The timer thread's work, now (fake clocks).
  void TEST_Tick() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    uint64_t seq;
    proto::CacheInvalidation invalidation;
    absl::Time sent = absl::InfiniteFuture();  // first answered with it
  };
  struct Session {
    uint64_t token = 0;
    uint64_t acked = 0;                    // every invalidation up to it applied
    absl::flat_hash_set<uint64_t> inodes;  // directories and inodes recorded
    bool everything = false;               // past inodes_max
    std::deque<Pending> unacked;           // in seq order
    uint64_t reset_seq = 0;                // a reset owed (new session, overflow), unacked
    absl::Time reset_sent = absl::InfiniteFuture();
    // When its latest poll arrived: the mount trusts its cache at most a
    // lease past it (it counts from when it sent a poll meta answered).
    absl::Time last_poll;
    WatchReply held;                       // a held poll, or empty
    absl::Time hold_until;
  };
  // What one change waits for: mount `mount_id`'s session `token` to
  // acknowledge `seq`.
  struct Owed {
    uint64_t mount_id;
    uint64_t token;
    uint64_t seq;
  };
  struct Waiter {
    std::vector<Owed> owed;
    std::function<void()> done;
  };
  using Callbacks = std::vector<std::function<void()>>;

  Session* LiveSession(const proto::CacheSession& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Record(Session& session, uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Queue(Session& session, proto::CacheInvalidation invalidation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues `invalidation` of `key` (an inode, or an entry's directory) to
  // every session that recorded it but `origin_mount`'s, which records it
  // instead; notes in `owed` what each session then owes the change, and
  // in `touched` the sessions whose held polls to answer.
  void Deliver(uint64_t origin_mount, uint64_t key, const proto::CacheInvalidation& invalidation,
               std::map<uint64_t, Owed>& owed, std::vector<Session*>& touched)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers session's held poll (if any) with what it owes.
  void AnswerHeld(Session& session, Callbacks& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  proto::WatchCacheResponse AnswerOf(Session& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Lapsed(const Session& session, absl::Time now) const;
  // Makes `session` a new one: a fresh token and a reset owed.
  void StartSession(Session& session, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every session's newest invalidation not yet acknowledged.
  std::vector<Owed> AllOwedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PaidLocked(const std::vector<Owed>& owed, absl::Time now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waiters now free to run, into `out`.
  void ReleaseWaiters(absl::Time now, Callbacks& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Held polls due, lapsed sessions dropped, waiters freed; returns when
  // the next of these falls due.
  absl::Time TickLocked(absl::Time now, Callbacks& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  static void Run(Callbacks& callbacks);

  // Immutable after construction.
  const MountCachesOptions options_;
  const Clock clock_;
  const absl::Time gate_until_;  // options_.restarted: a lease from construction

  mutable absl::Mutex mu_;
  std::map<uint64_t, Session> sessions_ ABSL_GUARDED_BY(mu_);  // by mount id
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;                      // last invalidation queued
  uint64_t published_ ABSL_GUARDED_BY(mu_) = 0;                // read positions
  // (published_, ino) of recent inode invalidations, oldest first, and the
  // last position dropped from it.
  std::deque<std::pair<uint64_t, uint64_t>> recent_ ABSL_GUARDED_BY(mu_);
  uint64_t recent_dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::list<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  // What each published change with a call id owes, until its reply takes
  // it (AfterInvalidated); the oldest go past kOwedByCallMax.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<Owed>> owed_by_call_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, uint64_t>> owed_order_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, int> changes_in_flight_ ABSL_GUARDED_BY(mu_);  // by mount id
  std::mt19937_64 random_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace logfs::meta
