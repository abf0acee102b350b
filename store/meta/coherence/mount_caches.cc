#include "store/meta/coherence/mount_caches.h"

#include <algorithm>
#include <string>

namespace logfs::meta {
namespace {

// Changes whose replies have not taken what they owe yet (a reply that
// never comes, as when meta stops serving, leaves its entry behind).
constexpr size_t kOwedByCallMax = 8192;

// Meta's clock and a mount's may run at slightly different rates, and a
// mount drops its cache from a timer: meta waits this much past a lease
// before it treats the mount as having dropped it.
absl::Duration LeaseMargin(absl::Duration lease) { return absl::Milliseconds(50) + lease / 20; }

proto::CacheInvalidation EntryInvalidation(uint64_t parent, const std::string& name) {
  proto::CacheInvalidation invalidation;
  invalidation.set_parent(parent);
  invalidation.set_name(name);
  return invalidation;
}

proto::CacheInvalidation InodeInvalidation(uint64_t ino) {
  proto::CacheInvalidation invalidation;
  invalidation.set_ino(ino);
  return invalidation;
}

}  // namespace

MountCaches::MountCaches(MountCachesOptions options, Clock clock)
    : options_(std::move(options)),
      clock_(clock ? std::move(clock) : Clock([] { return absl::Now(); })),
      gate_until_(options_.restarted ? clock_() + options_.lease + LeaseMargin(options_.lease)
                                     : absl::InfinitePast()),
      random_(std::random_device{}()) {
  if (!clock) timer_ = std::thread([this] { TimerLoop(); });
}

MountCaches::~MountCaches() {
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (auto& [mount_id, session] : sessions_) {
      if (session.held) {
        const proto::WatchCacheResponse empty = AnswerOf(session);
        out.push_back([reply = std::move(session.held), empty] { reply(empty); });
      }
    }
    for (Waiter& waiter : waiters_) out.push_back(std::move(waiter.done));
    waiters_.clear();
  }
  if (timer_.joinable()) timer_.join();
  Run(out);
}

void MountCaches::Run(Callbacks& callbacks) {
  for (auto& callback : callbacks) callback();
  callbacks.clear();
}

MountCaches::Session* MountCaches::LiveSession(const proto::CacheSession& session) {
  if (session.mount_id() == 0) return nullptr;
  auto it = sessions_.find(session.mount_id());
  if (it == sessions_.end() || it->second.token != session.token()) return nullptr;
  return &it->second;
}

void MountCaches::Record(Session& session, uint64_t ino) {
  if (session.everything) return;
  session.inodes.insert(ino);
  if (session.inodes.size() > options_.inodes_max) {
    session.everything = true;
    session.inodes.clear();
  }
}

void MountCaches::RecordDir(const proto::CacheSession& session, uint64_t dir) {
  RecordInode(session, dir);
}

void MountCaches::RecordInode(const proto::CacheSession& session, uint64_t ino) {
  absl::MutexLock lock(&mu_);
  if (Session* s = LiveSession(session)) Record(*s, ino);
}

uint64_t MountCaches::ReadPosition() const {
  absl::MutexLock lock(&mu_);
  return published_;
}

bool MountCaches::RecordInodeRead(const proto::CacheSession& session, uint64_t ino,
                                  uint64_t position, bool invalidate) {
  Callbacks out;
  bool maybe_older = false;
  {
    absl::MutexLock lock(&mu_);
    Session* s = LiveSession(session);
    if (s == nullptr) return false;
    Record(*s, ino);
    maybe_older = position < recent_dropped_;
    for (auto it = recent_.rbegin(); !maybe_older && it != recent_.rend() && it->first > position;
         ++it) {
      maybe_older = it->second == ino;
    }
    if (maybe_older && invalidate) {
      Queue(*s, InodeInvalidation(ino));
      AnswerHeld(*s, out);
    }
  }
  Run(out);
  return maybe_older;
}

void MountCaches::Queue(Session& session, proto::CacheInvalidation invalidation) {
  ++seq_;
  if (session.unacked.size() >= options_.queue_max) {
    // The mount drops everything instead; what it records from now on is
    // a new record.
    session.unacked.clear();
    session.reset_seq = seq_;
    session.reset_sent = absl::InfiniteFuture();
    session.inodes.clear();
    session.everything = false;
    ++stats_.resets;
    return;
  }
  session.unacked.push_back({seq_, std::move(invalidation)});
}

void MountCaches::Deliver(uint64_t origin_mount, uint64_t key,
                          const proto::CacheInvalidation& invalidation,
                          std::map<uint64_t, Owed>& owed, std::vector<Session*>& touched) {
  for (auto& [mount_id, session] : sessions_) {
    if (mount_id == origin_mount) {
      Record(session, key);
      continue;
    }
    if (session.everything || session.inodes.contains(key)) {
      Queue(session, invalidation);
      touched.push_back(&session);
      if (!session.unacked.empty() && session.unacked.back().seq == seq_) {
        owed[mount_id] = Owed{mount_id, session.token, seq_};
      }
    }
    // Until it drops everything, what it cached before is unknown.
    if (session.reset_seq != 0) {
      owed[mount_id] =
          Owed{mount_id, session.token, std::max(session.reset_seq, owed[mount_id].seq)};
    }
  }
}

void MountCaches::Publish(const std::vector<ChangedKeys>& changes) {
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Session*> touched;
    for (const ChangedKeys& change : changes) {
      ++published_;
      std::map<uint64_t, Owed> owed;  // by mount
      for (uint64_t ino : change.inodes) {
        recent_.emplace_back(published_, ino);
        Deliver(change.origin_mount, ino, InodeInvalidation(ino), owed, touched);
      }
      for (const auto& entry : change.entries) {
        Deliver(change.origin_mount, entry.first, EntryInvalidation(entry.first, entry.second), owed,
                touched);
      }
      if (change.origin_call != 0) {
        const std::pair<uint64_t, uint64_t> call(change.origin_mount, change.origin_call);
        std::vector<Owed>& entry = owed_by_call_[call];
        for (const auto& [mount_id, o] : owed) entry.push_back(o);
        owed_order_.push_back(call);
        while (owed_order_.size() > kOwedByCallMax) {
          owed_by_call_.erase(owed_order_.front());
          owed_order_.pop_front();
        }
      }
    }
    while (recent_.size() > options_.recent_max) {
      recent_dropped_ = recent_.front().first;
      recent_.pop_front();
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (Session* session : touched) AnswerHeld(*session, out);
  }
  Run(out);
}

proto::WatchCacheResponse MountCaches::AnswerOf(Session& session) {
  const absl::Time now = clock_();
  proto::WatchCacheResponse response;
  response.set_token(session.token);
  response.set_cache_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.lease)));
  uint64_t seq = seq_;
  if (session.reset_seq != 0) {
    response.set_reset(true);
    session.reset_sent = std::min(session.reset_sent, now);
  }
  for (Pending& pending : session.unacked) {
    *response.add_invalidations() = pending.invalidation;
    pending.sent = std::min(pending.sent, now);
  }
  if (session.reset_seq != 0 || !session.unacked.empty()) {
    seq = std::max(session.reset_seq,
                   session.unacked.empty() ? uint64_t{0} : session.unacked.back().seq);
  }
  response.set_seq(seq);
  stats_.invalidations_sent += response.invalidations_size();
  return response;
}

void MountCaches::AnswerHeld(Session& session, Callbacks& out) {
  if (!session.held) return;
  out.push_back([reply = std::move(session.held), response = AnswerOf(session)] { reply(response); });
  session.held = nullptr;
}

void MountCaches::Watch(const proto::WatchCacheRequest& request, WatchReply reply) {
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_();
    auto it = sessions_.find(request.mount_id());
    if (it == sessions_.end() || request.token() == 0 || it->second.token != request.token()) {
      // A new session: whatever the mount cached before may be stale.
      if (it != sessions_.end()) AnswerHeld(it->second, out);
      Session& session = sessions_[request.mount_id()];
      StartSession(session, now);
      out.push_back([reply = std::move(reply), response = AnswerOf(session)] { reply(response); });
      wake_ = true;
      ReleaseWaiters(now, out);
    } else {
      Session& session = it->second;
      AnswerHeld(session, out);  // superseded: the mount gave up on it
      session.last_poll = now;
      session.acked = std::max(session.acked, request.acked_seq());
      while (!session.unacked.empty() && session.unacked.front().seq <= request.acked_seq()) {
        session.unacked.pop_front();
      }
      if (session.reset_seq != 0 && session.reset_seq <= request.acked_seq()) {
        session.reset_seq = 0;
        session.reset_sent = absl::InfiniteFuture();
      }
      if (session.reset_seq != 0 || !session.unacked.empty()) {
        out.push_back(
            [reply = std::move(reply), response = AnswerOf(session)] { reply(response); });
      } else {
        session.held = std::move(reply);
        session.hold_until = now + options_.lease / 4;
        wake_ = true;
      }
      ReleaseWaiters(now, out);
    }
  }
  Run(out);
}

void MountCaches::StartSession(Session& session, absl::Time now) {
  session = Session();
  do {
    session.token = random_();
  } while (session.token == 0);
  session.reset_seq = ++seq_;
  session.last_poll = now;
}

bool MountCaches::Lapsed(const Session& session, absl::Time now) const {
  const absl::Duration bound = options_.lease + LeaseMargin(options_.lease);
  // No poll for a lease: the mount's trust ran out. Polls, but an answer
  // it was sent a lease ago is still unacknowledged (answers lost, or its
  // poll thread stuck): it has not renewed its trust since.
  absl::Time oldest_sent = session.reset_sent;
  if (!session.unacked.empty()) oldest_sent = std::min(oldest_sent, session.unacked.front().sent);
  return now >= session.last_poll + bound || now >= oldest_sent + bound;
}

std::vector<MountCaches::Owed> MountCaches::AllOwedLocked() const {
  std::vector<Owed> owed;
  for (const auto& [mount_id, session] : sessions_) {
    uint64_t newest = session.reset_seq;
    if (!session.unacked.empty()) newest = std::max(newest, session.unacked.back().seq);
    if (newest != 0) owed.push_back(Owed{mount_id, session.token, newest});
  }
  return owed;
}

bool MountCaches::PaidLocked(const std::vector<Owed>& owed, absl::Time now) const {
  for (const Owed& o : owed) {
    auto it = sessions_.find(o.mount_id);
    // Gone or replaced: that session lapsed (its mount dropped its cache)
    // or its mount started over with an empty one.
    if (it == sessions_.end() || it->second.token != o.token) continue;
    const Session& session = it->second;
    if (session.acked >= o.seq || Lapsed(session, now)) continue;
    if (changes_in_flight_.count(o.mount_id) != 0) continue;
    return false;
  }
  return true;
}

void MountCaches::ReleaseWaiters(absl::Time now, Callbacks& out) {
  if (waiters_.empty() || now < gate_until_) return;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (PaidLocked(it->owed, now)) {
      out.push_back(std::move(it->done));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
}

void MountCaches::AfterInvalidated(uint64_t origin_mount, uint64_t call_seq,
                                   std::function<void()> done) {
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    std::vector<Owed> owed;
    auto it = call_seq == 0 ? owed_by_call_.end() : owed_by_call_.find({origin_mount, call_seq});
    if (it != owed_by_call_.end()) {
      owed = std::move(it->second);
      owed_by_call_.erase(it);  // its key in owed_order_ goes when it comes up
    } else {
      owed = AllOwedLocked();
    }
    const absl::Time now = clock_();
    if (now >= gate_until_ && PaidLocked(owed, now)) {
      out.push_back(std::move(done));
    } else {
      waiters_.push_back({std::move(owed), std::move(done)});
      wake_ = true;
    }
  }
  Run(out);
}

void MountCaches::BeginChange(uint64_t mount_id) {
  if (mount_id == 0) return;
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    ++changes_in_flight_[mount_id];
    ReleaseWaiters(clock_(), out);
  }
  Run(out);
}

void MountCaches::EndChange(uint64_t mount_id) {
  if (mount_id == 0) return;
  absl::MutexLock lock(&mu_);
  auto it = changes_in_flight_.find(mount_id);
  if (it != changes_in_flight_.end() && --it->second <= 0) changes_in_flight_.erase(it);
}

absl::Time MountCaches::TickLocked(absl::Time now, Callbacks& out) {
  absl::Time next = now + options_.lease / 4;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    Session& session = it->second;
    if (session.held && now >= session.hold_until) AnswerHeld(session, out);
    if (Lapsed(session, now)) {
      // Its mount has dropped its cache (or never answers again): it owes
      // nothing, and a later poll starts a new session. An answer renews a
      // mount's trust, so a poll still held gets the new session's reset.
      if (session.reset_seq != 0 || !session.unacked.empty()) ++stats_.lapsed_waits;
      if (!session.held) {
        it = sessions_.erase(it);
        continue;
      }
      WatchReply held = std::move(session.held);
      StartSession(session, now);
      out.push_back([held = std::move(held), response = AnswerOf(session)] { held(response); });
    }
    const absl::Duration bound = options_.lease + LeaseMargin(options_.lease);
    if (session.held) next = std::min(next, session.hold_until);
    next = std::min(next, session.last_poll + bound);
    if (session.reset_sent != absl::InfiniteFuture()) next = std::min(next, session.reset_sent + bound);
    if (!session.unacked.empty() && session.unacked.front().sent != absl::InfiniteFuture()) {
      next = std::min(next, session.unacked.front().sent + bound);
    }
    ++it;
  }
  ReleaseWaiters(now, out);
  if (!waiters_.empty() && now < gate_until_) next = std::min(next, gate_until_);
  return next;
}

void MountCaches::TEST_Tick() {
  Callbacks out;
  {
    absl::MutexLock lock(&mu_);
    TickLocked(clock_(), out);
  }
  Run(out);
}

void MountCaches::TimerLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    Callbacks out;
    const absl::Time next = TickLocked(clock_(), out);
    if (!out.empty()) {
      mu_.Unlock();
      Run(out);
      mu_.Lock();
      continue;
    }
    wake_ = false;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
    mu_.AwaitWithDeadline(absl::Condition(&woken), next);
  }
}

MountCaches::Stats MountCaches::stats() const {
  absl::MutexLock lock(&mu_);
  Stats stats = stats_;
  stats.sessions = sessions_.size();
  return stats;
}

}  // namespace logfs::meta
