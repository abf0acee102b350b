#include "fsclient/cache_coherence.h"

#include <glog/logging.h>

#include <algorithm>

#include "fsclient/client_deps.h"
#include "src/util/log_rate_limit.h"

namespace logfs::fsclient {
namespace {

// The part of meta's lease the mount gives up, so that it has dropped its
// cache before meta stops waiting for it (meta adds a margin of its own).
absl::Duration TrustOf(absl::Duration lease) { return lease - lease / 10; }

// How long the poll waits after a failed poll before the next.
constexpr absl::Duration kRetryDelay = absl::Milliseconds(50);

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
  poller_ = std::thread([this] { PollLoop(); });
}

void CacheCoherence::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (poller_.joinable()) poller_.join();
}

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
  const double timeout = TimeoutLocked(ticket);
  const bool tracked = timeout > 0 && lease_ > absl::ZeroDuration();
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
  for (const auto& [entry, ino] : evicted) {
    if (entry.first != 0) kernel->InvalidateEntry(entry.first, entry.second);
    if (ino != 0) kernel->InvalidateInode(ino);
  }
}

void CacheCoherence::DropAll() {
  KernelCache* kernel;
  {
    absl::MutexLock lock(&mu_);
    ++generation_;  // answers in flight are not cached either
    trusted_until_ = absl::InfinitePast();
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
    next_ = 0;
  }
  for (const auto& [entry, ino] : evicted) {
    if (entry.first != 0) entries.insert(entry);
    if (ino != 0) inodes.insert(ino);
  }
  for (const Entry& entry : entries) kernel->InvalidateEntry(entry.first, entry.second);
  for (uint64_t ino : inodes) kernel->InvalidateInode(ino);
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
  std::vector<const proto::CacheInvalidation*> held;
  {
    absl::MutexLock lock(&tracked_mu_);
    for (const proto::CacheInvalidation& invalidation : response.invalidations()) {
      const bool given = invalidation.name().empty()
                             ? inodes_.contains(invalidation.ino())
                             : entries_.contains(Entry(invalidation.parent(), invalidation.name()));
      if (given) held.push_back(&invalidation);
    }
  }
  for (const proto::CacheInvalidation* invalidation : held) {
    if (!invalidation->name().empty()) {
      kernel->InvalidateEntry(invalidation->parent(), invalidation->name());
    } else {
      kernel->InvalidateInode(invalidation->ino());
    }
  }
  FlushEvicted();
  absl::MutexLock lock(&mu_);
  stats_.invalidations += response.invalidations_size();
  // Applied: now the answer may renew the lease.
  trusted_until_ = sent + TrustOf(lease_);
  stats_.trusted = true;
}

void CacheCoherence::PollLoop() {
  uint64_t acked_seq = 0;
  for (;;) {
    proto::WatchCacheRequest request;
    absl::Duration timeout;
    absl::Time trusted_until;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      request.set_mount_id(deps_.mount_id());
      request.set_token(token_);
      request.set_acked_seq(acked_seq);
      trusted_until = trusted_until_;
      timeout = lease_;
    }
    const absl::Time sent = absl::Now();
    // A poll that outlives the trust ends with it: the cache goes then.
    if (trusted_until > sent) timeout = std::min(timeout, trusted_until - sent);
    absl::StatusOr<proto::WatchCacheResponse> response = deps_.WatchCache(request, timeout);
    if (response.ok()) {
      Apply(*response, sent);
      acked_seq = response->seq();
      continue;
    }
    bool drop;
    {
      absl::MutexLock lock(&mu_);
      drop = trusted_until_ != absl::InfinitePast() && absl::Now() >= trusted_until_;
      stats_.trusted = !drop && trusted_until_ != absl::InfinitePast();
    }
    if (drop) {
      LOGFS_LOG_EVERY_MS(WARNING, 10000)
          << "no answer from meta within the cache lease (" << response.status()
          << "): dropping cached names and attributes until it answers again";
      DropAll();
    }
    absl::MutexLock lock(&mu_);
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    mu_.AwaitWithTimeout(absl::Condition(&stopping), kRetryDelay);
  }
}

CacheCoherence::Stats CacheCoherence::stats() const {
  absl::ReaderMutexLock lock(&mu_);
  return stats_;
}

}  // namespace logfs::fsclient
