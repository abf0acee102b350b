#include "cache/replica_cache.h"

#include <glog/logging.h>
#include <sys/mman.h>
#include <sys/stat.h>

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

absl::string_view ReplicaCache::Ref::mapped() const {
  const Mapping* m = entry_->mapping.load(std::memory_order_acquire);
  return m == nullptr ? absl::string_view() : absl::string_view(m->addr, m->bytes);
}

ReplicaCache::Mapping::~Mapping() {
  if (addr != nullptr) ::munmap(const_cast<char*>(addr), bytes);
}

ReplicaCache::Entry::~Entry() { delete mapping.load(std::memory_order_relaxed); }

ReplicaCache::Doomed::~Doomed() {
  while (entries != nullptr) delete std::exchange(entries, entries->next);
  while (mappings != nullptr) delete std::exchange(mappings, mappings->next);
}

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
  if (e->refs++ == 0) Unlink(e);
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
  // The data file's identity, for DropDeleted (a miss: one more syscall
  // beside the socket exchange that opened the replica).
  if (struct stat st; fresh->files.data.valid() && ::fstat(fresh->files.data.get(), &st) == 0) {
    fresh->data_file = FileId{st.st_dev, st.st_ino};
  }
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = map_.try_emplace(key, nullptr);
  if (inserted) {
    it->second = std::move(fresh);
    ++stats_.opens;
  }
  Entry* e = it->second.get();
  if (e->refs++ == 0 && !inserted) Unlink(e);
  return Ref(this, e);
}

absl::string_view ReplicaCache::Map(const Ref& ref) {
  Entry* e = ref.entry_;
  if (const Mapping* m = e->mapping.load(std::memory_order_acquire); m != nullptr) {
    return absl::string_view(m->addr, m->bytes);
  }
  if (!options_.mmap || e->files.length == 0 || !e->files.data.valid() ||
      e->mmap_failed.load(std::memory_order_relaxed)) {
    return absl::string_view();
  }
  // Unmapped after the lock is released if a racing call won or the
  // replica left the cache meanwhile.
  auto fresh = std::make_unique<Mapping>();
  struct stat st;
  if (::fstat(e->files.data.get(), &st) == 0 &&
      static_cast<uint64_t>(st.st_size) >= e->files.length) {
    void* addr =
        ::mmap(nullptr, e->files.length, PROT_READ, MAP_SHARED, e->files.data.get(), 0);
    if (addr != MAP_FAILED) {
      fresh->addr = static_cast<const char*>(addr);
      fresh->bytes = e->files.length;
    }
  }
  absl::MutexLock lock(&mu_);
  if (fresh->addr == nullptr) {
    if (!e->mmap_failed.exchange(true, std::memory_order_relaxed)) ++stats_.mmap_failures;
    return absl::string_view();
  }
  Mapping* m = e->mapping.load(std::memory_order_relaxed);
  if (m == nullptr) {
    if (!e->cached) return absl::string_view();  // gone from the cache: pread
    m = fresh.release();
    e->mapping.store(m, std::memory_order_release);
    ++mmapped_;
    mmapped_bytes_ += m->bytes;
    ++stats_.mmaps;
  }
  return absl::string_view(m->addr, m->bytes);
}

void ReplicaCache::Invalidate(const Ref& ref) {
  absl::MutexLock lock(&mu_);
  Entry* e = ref.entry_;
  if (!e->cached) return;
  ++stats_.invalidations;
  UncacheLocked(e);  // the last Release frees the entry
}

std::vector<ReplicaCache::DataFileProbe> ReplicaCache::ListDataFiles() const {
  absl::MutexLock lock(&mu_);
  std::vector<DataFileProbe> probes;
  probes.reserve(map_.size());
  for (const auto& [key, e] : map_) {
    if (e->files.data.valid()) probes.push_back({key, e->files.data.get(), e->data_file});
  }
  return probes;
}

size_t ReplicaCache::DropDeleted() {
  // (1) Under the lock, the list; (2) without it, an fstat of each (a
  // few microseconds apiece in a VM: under the lock, a pass over a full
  // cache would hold up every read for a millisecond); (3) under it
  // again, the drops. A descriptor closed meanwhile (its replica evicted)
  // may be reused for another file: only a file that is still the
  // entry's counts, and an entry cached under the key since then is
  // left alone unless it is the same file.
  std::vector<DataFileProbe> probes = ListDataFiles();
  size_t unlinked = 0;
  for (const DataFileProbe& probe : probes) {
    struct stat st;
    if (::fstat(probe.data_fd, &st) == 0 && st.st_nlink == 0 &&
        FileId{st.st_dev, st.st_ino} == probe.data_file) {
      probes[unlinked++] = probe;
    }
  }
  if (unlinked == 0) return 0;
  Doomed doomed;  // closed and unmapped after the lock is released
  size_t dropped = 0;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < unlinked; ++i) {
    auto it = map_.find(probes[i].key);
    if (it == map_.end() || !(it->second->data_file == probes[i].data_file)) continue;
    Entry* e = it->second.get();
    ++dropped;
    ++stats_.deletions;
    if (e->refs == 0) {
      EvictLocked(e, &doomed);
    } else {
      UncacheLocked(e);  // its last Release frees it
    }
  }
  return dropped;
}

void ReplicaCache::Release(Entry* e) {
  Doomed doomed;  // freed after the lock is released
  absl::MutexLock lock(&mu_);
  if (--e->refs > 0) return;
  if (!e->cached) {
    doomed.entries = e;  // invalidated or evicted: it goes now
    e->next = nullptr;
    return;
  }
  const absl::Time now = options_.now();
  LinkEvictable(e, now);
  TrimLocked(now, &doomed);
}

void ReplicaCache::Trim() {
  Doomed doomed;
  absl::MutexLock lock(&mu_);
  TrimLocked(options_.now(), &doomed);
}

void ReplicaCache::LinkEvictable(Entry* e, absl::Time now) {
  e->evictable_since = now;
  Link(e->mapping.load(std::memory_order_relaxed) != nullptr ? evictable_mmapped_ : evictable_, e);
}

void ReplicaCache::Link(EvictionMap& map, Entry* e) {
  e->map = &map;
  e->prev = map.newest;
  e->next = nullptr;
  (map.newest != nullptr ? map.newest->next : map.oldest) = e;
  map.newest = e;
  ++map.count;
  if (const Mapping* m = e->mapping.load(std::memory_order_relaxed); m != nullptr) {
    map.mapped_bytes += m->bytes;
  }
}

void ReplicaCache::Unlink(Entry* e) {
  EvictionMap& map = *e->map;
  (e->prev != nullptr ? e->prev->next : map.oldest) = e->next;
  (e->next != nullptr ? e->next->prev : map.newest) = e->prev;
  --map.count;
  if (const Mapping* m = e->mapping.load(std::memory_order_relaxed); m != nullptr) {
    map.mapped_bytes -= m->bytes;
  }
  e->map = nullptr;
  e->prev = e->next = nullptr;
}

void ReplicaCache::UncacheLocked(Entry* e) {
  if (const Mapping* m = e->mapping.load(std::memory_order_relaxed); m != nullptr) {
    --mmapped_;
    mmapped_bytes_ -= m->bytes;
  }
  auto it = map_.find(e->key);
  it->second.release();
  map_.erase(it);
  e->cached = false;
}

void ReplicaCache::EvictLocked(Entry* e, Doomed* doomed) {
  Unlink(e);
  UncacheLocked(e);  // now owned by `doomed`
  e->next = doomed->entries;
  doomed->entries = e;
}

void ReplicaCache::TrimLocked(absl::Time now, Doomed* doomed) {
  // Entries evictable since these times or earlier are past an age limit.
  const absl::Time unmap_before = now - options_.max_mmapped_idle;
  const absl::Time close_before = now - options_.max_idle;
  // Unmap the oldest mapped replicas past the mmapped limits; they stay
  // open, waiting in the descriptor map from now.
  while (Entry* e = evictable_mmapped_.oldest) {
    uint64_t* reason;
    if (evictable_mmapped_.count > options_.max_evictable_mmapped) {
      reason = &stats_.unmaps_by_count;
    } else if (evictable_mmapped_.mapped_bytes > options_.max_evictable_mmapped_bytes) {
      reason = &stats_.unmaps_by_bytes;
    } else if (e->evictable_since <= unmap_before) {
      reason = &stats_.unmaps_by_age;
    } else {
      break;
    }
    ++*reason;
    Unlink(e);
    Mapping* m = e->mapping.exchange(nullptr, std::memory_order_relaxed);
    --mmapped_;
    mmapped_bytes_ -= m->bytes;
    m->next = doomed->mappings;
    doomed->mappings = m;
    LinkEvictable(e, now);
  }
  // Close the oldest past the count (descriptor map first) or the age.
  for (;;) {
    const bool over_count = evictable_.count + evictable_mmapped_.count > options_.max_evictable;
    Entry* e = evictable_.oldest;
    if (e != nullptr && (over_count || e->evictable_since <= close_before)) {
      ++(over_count ? stats_.evictions_by_count : stats_.evictions_by_age);
    } else if (over_count) {
      e = evictable_mmapped_.oldest;
      ++stats_.evictions_by_count;
    } else {
      break;
    }
    EvictLocked(e, doomed);
  }
}

ReplicaCacheStats ReplicaCache::stats() const {
  absl::MutexLock lock(&mu_);
  ReplicaCacheStats out = stats_;
  out.open_replicas = map_.size();
  out.evictable = evictable_.count + evictable_mmapped_.count;
  out.mmapped = mmapped_;
  out.mmapped_bytes = mmapped_bytes_;
  out.evictable_mmapped = evictable_mmapped_.count;
  return out;
}

}  // namespace logfs::cache
