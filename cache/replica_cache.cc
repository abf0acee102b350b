#include "cache/replica_cache.h"

#include <glog/logging.h>

namespace logfs::cache {

ReplicaCache::Ref& ReplicaCache::Ref::operator=(Ref&& o) noexcept {
  if (this != &o) {
    if (cache_ != nullptr) cache_->Release(entry_);
    cache_ = std::exchange(o.cache_, nullptr);
    entry_ = o.entry_;
  }
  return *this;
}

ReplicaCache::Ref::~Ref() {
  if (cache_ != nullptr) cache_->Release(entry_);
}

const format::ReplicaFds& ReplicaCache::Ref::files() const { return entry_->files; }

ReplicaCache::ReplicaCache(ReplicaCacheOptions options) : options_(std::move(options)) {}

ReplicaCache::~ReplicaCache() {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, entry] : map_) {
    CHECK_EQ(entry->refs, 0) << "replica cache destroyed with segment " << key.first
                             << " still referenced";
  }
}

ReplicaCache::Ref ReplicaCache::Lookup(const Key& key) {
  absl::MutexLock lock(&mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return Ref();
  Entry* e = it->second.get();
  if (e->refs++ == 0) UnlinkEvictable(e);
  ++stats_.hits;
  return Ref(this, e);
}

bool ReplicaCache::Contains(const Key& key) {
  absl::MutexLock lock(&mu_);
  return map_.contains(key);
}

ReplicaCache::Ref ReplicaCache::Insert(const Key& key, format::ReplicaFds files) {
  // Declared before the lock, so if a racing insert won, `fresh` closes its
  // descriptors after the lock is released.
  auto fresh = std::make_unique<Entry>();
  fresh->key = key;
  fresh->files = std::move(files);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = map_.try_emplace(key, nullptr);
  if (inserted) {
    it->second = std::move(fresh);
    ++stats_.opens;
  }
  Entry* e = it->second.get();
  if (e->refs++ == 0 && !inserted) UnlinkEvictable(e);
  return Ref(this, e);
}

void ReplicaCache::Invalidate(const Ref& ref) {
  absl::MutexLock lock(&mu_);
  Entry* e = ref.entry_;
  if (!e->cached) return;
  e->cached = false;
  ++stats_.invalidations;
  // The map gives up ownership; the last Release frees the entry.
  auto it = map_.find(e->key);
  it->second.release();
  map_.erase(it);
}

void ReplicaCache::Release(Entry* e) {
  Entry* doomed = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (--e->refs > 0) return;
    if (!e->cached) {
      doomed = e;  // invalidated: its descriptors close below
      e->next = nullptr;
    } else {
      const absl::Time now = options_.now();
      e->evictable_since = now;
      LinkEvictable(e);
      TrimLocked(now, &doomed);
    }
  }
  FreeChain(doomed);
}

void ReplicaCache::Trim() {
  Entry* doomed = nullptr;
  {
    absl::MutexLock lock(&mu_);
    TrimLocked(options_.now(), &doomed);
  }
  FreeChain(doomed);
}

void ReplicaCache::FreeChain(Entry* doomed) {
  while (doomed != nullptr) {
    Entry* next = doomed->next;
    delete doomed;
    doomed = next;
  }
}

void ReplicaCache::LinkEvictable(Entry* e) {
  e->prev = newest_;
  e->next = nullptr;
  if (newest_ != nullptr) newest_->next = e;
  newest_ = e;
  if (oldest_ == nullptr) oldest_ = e;
  ++evictable_;
}

void ReplicaCache::UnlinkEvictable(Entry* e) {
  (e->prev != nullptr ? e->prev->next : oldest_) = e->next;
  (e->next != nullptr ? e->next->prev : newest_) = e->prev;
  e->prev = e->next = nullptr;
  --evictable_;
}

void ReplicaCache::TrimLocked(absl::Time now, Entry** doomed) {
  while (oldest_ != nullptr &&
         (evictable_ > options_.max_evictable ||
          now - oldest_->evictable_since >= options_.max_idle)) {
    Entry* e = oldest_;
    UnlinkEvictable(e);
    ++stats_.evictions;
    auto it = map_.find(e->key);
    it->second.release();  // now owned by the chain
    map_.erase(it);
    e->cached = false;
    e->next = *doomed;
    *doomed = e;
  }
}

ReplicaCacheStats ReplicaCache::stats() const {
  absl::MutexLock lock(&mu_);
  ReplicaCacheStats out = stats_;
  out.open_replicas = map_.size();
  out.evictable = evictable_;
  return out;
}

}  // namespace logfs::cache
