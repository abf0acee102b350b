#include "fsclient/cache_coherence.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>

#include "fsclient/client_deps.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"

namespace logfs::fsclient {
namespace {

// The part of meta's lease the mount gives up, so that it has dropped its
// cache before meta stops waiting for it (meta adds a margin of its own).
absl::Duration TrustOf(absl::Duration lease) { return lease - lease / 10; }

// How long the poll waits after a failed poll before the next: doubling
// from the first to the second while polls keep failing.
constexpr absl::Duration kRetryDelayMin = absl::Milliseconds(50);
constexpr absl::Duration kRetryDelayMax = absl::Seconds(2);

}  // namespace

CacheCoherence::CacheCoherence(ClientDeps& deps, CacheCoherenceOptions options)
    : deps_(deps), options_(std::move(options)) {}

CacheCoherence::~CacheCoherence() { Stop(); }

void CacheCoherence::Start(KernelCache* kernel) {
  absl::MutexLock lock(&mu_);
  if (poller_.joinable() || stopping_) return;
  kernel_ = kernel;
  lease_ = absl::Milliseconds(deps_.cache_lease_ms());
  if (lease_ <= absl::ZeroDuration()) {
    LOG(INFO) << "meta sends no cache invalidations: names and attributes are kept for "
              << options_.fallback_seconds << " s";
    return;
  }
  watchdog_running_ = true;
  poller_ = std::thread([this] { PollLoop(); });
  watchdog_ = std::thread([this] { WatchdogLoop(); });
}

bool CacheCoherence::StopWithin(absl::Duration wait) {
  if (!DropWithin(wait)) return false;
  if (watchdog_.joinable()) watchdog_.join();
  if (poller_.joinable()) poller_.join();  // within its poll's timeout
  return true;
}

bool CacheCoherence::DropWithin(absl::Duration wait) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // Nothing is given long from now: meta stops waiting for this mount a
    // lease after its last poll, and the mount may still answer requests.
    trusted_until_ = absl::InfinitePast();
    ++generation_;
    auto dropped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !watchdog_running_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&dropped), wait)) {
      stop_notifying_.store(true, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

void CacheCoherence::Stop() { StopWithin(absl::InfiniteDuration()); }

CacheCoherence::Ticket CacheCoherence::Begin() const {
  absl::ReaderMutexLock lock(&mu_);
  return Ticket{generation_};
}

proto::CacheSession CacheCoherence::session() const {
  absl::ReaderMutexLock lock(&mu_);
  proto::CacheSession session;
  if (token_ != 0) {
    session.set_mount_id(deps_.mount_id());
    session.set_token(token_);
  }
  return session;
}

double CacheCoherence::TimeoutLocked(Ticket ticket) const {
  if (lease_ <= absl::ZeroDuration()) return options_.fallback_seconds;
  if (ticket.generation != generation_ || absl::Now() >= trusted_until_) return 0;
  return options_.timeout_seconds;
}

int CacheCoherence::ReplyEntry(Ticket ticket, uint64_t parent, const std::string& name,
                               uint64_t ino, bool attr_cacheable,
                               const std::function<int(double, double)>& reply) {
  absl::ReaderMutexLock lock(&mu_);
  // Without invalidations a missing name is asked for every time, as
  // before 0.2.
  const bool fallback = lease_ <= absl::ZeroDuration();
  const double timeout = fallback && ino == 0 ? 0 : TimeoutLocked(ticket);
  const bool tracked = timeout > 0 && !fallback;
  const Entry entry(parent, name);
  if (tracked) Track(&entry, attr_cacheable ? ino : 0);
  return reply(timeout, attr_cacheable ? timeout : 0);
}

int CacheCoherence::ReplyAttr(Ticket ticket, uint64_t ino, bool attr_cacheable,
                              const std::function<int(double)>& reply) {
  absl::ReaderMutexLock lock(&mu_);
  const double timeout = attr_cacheable ? TimeoutLocked(ticket) : 0;
  if (timeout > 0 && lease_ > absl::ZeroDuration()) Track(nullptr, ino);
  return reply(timeout);
}

std::optional<absl::StatusOr<std::string>> CacheCoherence::CachedXattr(uint64_t ino,
                                                                       const std::string& name) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (lease_ <= absl::ZeroDuration() || absl::Now() >= trusted_until_) return std::nullopt;
  }
  absl::MutexLock lock(&tracked_mu_);
  auto by_ino = xattrs_.find(ino);
  if (by_ino == xattrs_.end()) return std::nullopt;
  auto it = by_ino->second.find(name);
  if (it == by_ino->second.end()) return std::nullopt;
  return it->second;
}

void CacheCoherence::StoreXattr(Ticket ticket, uint64_t ino, const std::string& name,
                                const absl::StatusOr<std::string>& answer) {
  if (!answer.ok() && AttachedErrno(answer.status()) != ENODATA) return;
  absl::ReaderMutexLock lock(&mu_);
  if (TimeoutLocked(ticket) <= 0 || lease_ <= absl::ZeroDuration()) return;
  absl::MutexLock tracked(&tracked_mu_);
  if (xattr_count_ >= options_.tracked_max) {
    xattrs_.clear();
    xattr_count_ = 0;
  }
  if (xattrs_[ino].insert_or_assign(name, answer).second) ++xattr_count_;
}

void CacheCoherence::ForgetXattrs(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  ++generation_;  // a getxattr in flight may carry the old value
  absl::MutexLock tracked(&tracked_mu_);
  DropXattrsLocked(ino);
}

void CacheCoherence::DropXattrsLocked(uint64_t ino) {
  auto it = xattrs_.find(ino);
  if (it == xattrs_.end()) return;
  xattr_count_ -= it->second.size();
  xattrs_.erase(it);
}

void CacheCoherence::Renamed(uint64_t new_parent, const std::string& new_name) {
  {
    absl::ReaderMutexLock lock(&mu_);
    if (lease_ <= absl::ZeroDuration()) return;
  }
  const Entry entry(new_parent, new_name);
  Track(&entry, 0);
}

void CacheCoherence::Track(const Entry* entry, uint64_t ino) {
  absl::MutexLock lock(&tracked_mu_);
  const bool new_entry = entry != nullptr && entries_.insert(*entry).second;
  const bool new_inode = ino != 0 && inodes_.insert(ino).second;
  if (!new_entry && !new_inode) return;
  std::pair<Entry, uint64_t> slot(new_entry ? *entry : Entry(0, ""), new_inode ? ino : 0);
  if (order_.size() < options_.tracked_max) {
    order_.push_back(std::move(slot));
    return;
  }
  // The oldest goes: out of the kernel too (by the poll thread), since a
  // drop-all would no longer find it.
  std::pair<Entry, uint64_t>& oldest = order_[next_];
  if (oldest.first.first != 0) entries_.erase(oldest.first);
  if (oldest.second != 0) inodes_.erase(oldest.second);
  evicted_.push_back(std::move(oldest));
  oldest = std::move(slot);
  next_ = (next_ + 1) % order_.size();
}

void CacheCoherence::FlushEvicted() {
  std::vector<std::pair<Entry, uint64_t>> evicted;
  {
    absl::MutexLock lock(&tracked_mu_);
    evicted.swap(evicted_);
  }
  if (evicted.empty()) return;
  KernelCache* kernel;
  {
    absl::ReaderMutexLock lock(&mu_);
    kernel = kernel_;
  }
  std::vector<Entry> entries;
  std::vector<uint64_t> inodes;
  for (auto& [entry, ino] : evicted) {
    if (entry.first != 0) entries.push_back(std::move(entry));
    if (ino != 0) inodes.push_back(ino);
  }
  Drop(*kernel, entries, inodes);
}

void CacheCoherence::DropAll() {
  KernelCache* kernel;
  {
    absl::MutexLock lock(&mu_);
    ++generation_;  // answers in flight are not cached either
    trusted_until_ = absl::InfinitePast();
    stats_.trusted = false;
    ++stats_.drops;
    kernel = kernel_;
  }
  absl::flat_hash_set<Entry> entries;
  absl::flat_hash_set<uint64_t> inodes;
  std::vector<std::pair<Entry, uint64_t>> evicted;
  {
    absl::MutexLock lock(&tracked_mu_);
    entries.swap(entries_);
    inodes.swap(inodes_);
    evicted.swap(evicted_);
    order_.clear();
    xattrs_.clear();
    xattr_count_ = 0;
    next_ = 0;
  }
  for (const auto& [entry, ino] : evicted) {
    if (entry.first != 0) entries.insert(entry);
    if (ino != 0) inodes.insert(ino);
  }
  Drop(*kernel, std::vector<Entry>(entries.begin(), entries.end()),
       std::vector<uint64_t>(inodes.begin(), inodes.end()));
}

void CacheCoherence::Drop(KernelCache& kernel, const std::vector<Entry>& entries,
                          const std::vector<uint64_t>& inodes) {
  // Attributes first: their drop takes no lock in the kernel, and an
  // entry's may wait for its directory's.
  for (uint64_t ino : inodes) {
    if (stop_notifying_.load(std::memory_order_relaxed)) return;
    kernel.InvalidateInode(ino);
  }
  for (const Entry& entry : entries) {
    if (stop_notifying_.load(std::memory_order_relaxed)) return;
    kernel.InvalidateEntry(entry.first, entry.second);
  }
}

void CacheCoherence::Apply(const proto::WatchCacheResponse& response, absl::Time sent) {
  bool reset;
  KernelCache* kernel;
  {
    absl::MutexLock lock(&mu_);
    ++stats_.polls;
    reset = response.reset() || response.token() != token_;
    if (response.invalidations_size() > 0 || reset) ++generation_;
    token_ = response.token();
    if (response.cache_lease_ms() > 0) lease_ = absl::Milliseconds(response.cache_lease_ms());
    kernel = kernel_;
  }
  if (reset) DropAll();
  // Meta records whole directories; the kernel holds only what was given
  // long (the rest expired at once), and a drop of an entry waits for
  // its directory's lock: only those are dropped.
  std::vector<Entry> entries;
  std::vector<uint64_t> inodes;
  {
    absl::MutexLock lock(&tracked_mu_);
    for (const proto::CacheInvalidation& invalidation : response.invalidations()) {
      if (invalidation.name().empty()) {
        DropXattrsLocked(invalidation.ino());
        if (inodes_.contains(invalidation.ino())) inodes.push_back(invalidation.ino());
      } else {
        Entry entry(invalidation.parent(), invalidation.name());
        if (entries_.contains(entry)) entries.push_back(std::move(entry));
      }
    }
  }
  Drop(*kernel, entries, inodes);
  FlushEvicted();
  absl::MutexLock lock(&mu_);
  stats_.invalidations += response.invalidations_size();
  // Applied: now the answer may renew the lease (not once Stop began:
  // the watchdog's last drop must be the last word).
  if (stopping_) return;
  trusted_until_ = sent + TrustOf(lease_);
  stats_.trusted = true;
}

void CacheCoherence::PollLoop() {
  uint64_t acked_seq = 0;
  absl::Duration retry_delay = kRetryDelayMin;
  for (;;) {
    proto::WatchCacheRequest request;
    absl::Duration timeout;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
      request.set_mount_id(deps_.mount_id());
      request.set_token(token_);
      request.set_acked_seq(acked_seq);
      timeout = lease_;  // a held poll is answered after a quarter of it
    }
    const absl::Time sent = absl::Now();
    absl::StatusOr<proto::WatchCacheResponse> response = deps_.WatchCache(request, timeout);
    if (response.ok()) {
      Apply(*response, sent);
      acked_seq = response->seq();
      retry_delay = kRetryDelayMin;
      continue;
    }
    // The watchdog drops the cache when the lease runs out; here, only
    // the next try, later and later while meta does not answer (a meta
    // replica that predates WatchCache refuses each one).
    absl::MutexLock lock(&mu_);
    if (stopping_) break;  // Client::Shutdown closed the connection under the poll
    LOGFS_LOG_EVERY_MS(WARNING, 10000) << "cache poll to meta failed: " << response.status();
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), retry_delay);
    retry_delay = std::min(retry_delay * 2, kRetryDelayMax);
  }
}

void CacheCoherence::WatchdogLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (trusted_until_ != absl::InfinitePast() && absl::Now() >= trusted_until_) {
      mu_.Unlock();
      LOGFS_LOG_EVERY_MS(WARNING, 10000)
          << "no answer from meta within the cache lease: dropping cached names and "
             "attributes until it answers again";
      DropAll();
      mu_.Lock();
      continue;
    }
    // Until the lease runs out, or is renewed, or the mount stops.
    const absl::Time observed = trusted_until_;
    auto changed = [this, observed]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || trusted_until_ != observed;
    };
    mu_.AwaitWithDeadline(absl::Condition(&changed), observed == absl::InfinitePast()
                                                         ? absl::InfiniteFuture()
                                                         : observed);
  }
  // Stopping: the kernel keeps nothing long past the mount's end.
  mu_.Unlock();
  DropAll();
  mu_.Lock();
  watchdog_running_ = false;
}

CacheCoherence::Stats CacheCoherence::stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return stats_;
}

}  // namespace logfs::fsclient
