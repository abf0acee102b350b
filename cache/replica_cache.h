// The mount's short-circuit replica cache (DESIGN §5, after HDFS's
// ShortCircuitCache): read-only descriptors of sealed replicas on this
// host, keyed by (segment id, server id), shared by every reader
// with reference counts. A replica nobody references waits in the
// eviction map, ordered by the time it became evictable, and is closed
// when more than `max_evictable` wait or it has waited `max_idle`.
//
// The eviction map is an intrusive list inside the entries (the time a
// replica becomes evictable, on a monotonic clock, only grows, so appending
// keeps it ordered): a hit, a release and a trim neither allocate nor
// throw. Only an insert allocates its entry. DESIGN §5 also has an
// eviction map for mmapped replicas and a bytes limit: there are no mmaps
// here, so one map trimmed by count and age serves.
//
// A replica its server deletes stays readable (and its disk space stays
// allocated) until its descriptors close: at most `max_idle` after the
// last reader lets go.
//
// Thread-safe: one mutex, held for map and list updates only, never
// across opening, reading or closing a replica.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/format/replica_fds.h"

namespace logfs::cache {

struct ReplicaCacheOptions {
  size_t max_evictable = 128;            // unreferenced replicas kept open (2 fds each)
  absl::Duration max_idle = absl::Minutes(5);  // longest an unreferenced replica stays open
  // A monotonic clock (tests pass their own).
  std::function<absl::Time()> now = [] {
    return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  };
};

struct ReplicaCacheStats {
  uint64_t hits = 0;
  uint64_t opens = 0;       // misses that opened a replica
  uint64_t evictions = 0;   // closed by count or age
  uint64_t invalidations = 0;
  uint64_t open_replicas = 0;  // cached now (referenced or evictable)
  uint64_t evictable = 0;      // of them, unreferenced
};

class ReplicaCache {
 private:
  struct Entry;

 public:
  using Key = std::pair<uint64_t, uint64_t>;  // (segment id, server id)

  // A counted reference to a cached replica; movable. The descriptors stay
  // open while any reference lives.
  class Ref {
   public:
    Ref() = default;
    Ref(Ref&& o) noexcept : cache_(std::exchange(o.cache_, nullptr)), entry_(o.entry_) {}
    Ref& operator=(Ref&& o) noexcept;
    ~Ref();
    const format::ReplicaFds& files() const;
    explicit operator bool() const { return cache_ != nullptr; }

   private:
    friend class ReplicaCache;
    Ref(ReplicaCache* cache, Entry* entry) : cache_(cache), entry_(entry) {}
    ReplicaCache* cache_ = nullptr;
    Entry* entry_ = nullptr;
  };

  explicit ReplicaCache(ReplicaCacheOptions options = {});
  ~ReplicaCache();  // every Ref must be gone
  ReplicaCache(const ReplicaCache&) = delete;
  ReplicaCache& operator=(const ReplicaCache&) = delete;

  // A reference to the cached replica `key`, or an empty Ref on a miss.
  Ref Lookup(const Key& key);
  // Whether Lookup(key) would hit, without counting or referencing it.
  bool Contains(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Caches `files` as `key` and references it. If a racing miss inserted
  // the key first, references that one and closes `files`.
  Ref Insert(const Key& key, format::ReplicaFds files);

  // Drops `ref`'s replica from the cache (a read through it failed): new
  // Gets open it afresh; its descriptors close with the last reference.
  void Invalidate(const Ref& ref);

  // Closes evictable replicas past the count or age limit.
  void Trim();

  ReplicaCacheStats stats() const;

 private:
  struct Entry {
    Key key;
    format::ReplicaFds files;
    int refs = 0;
    bool cached = true;  // in the map (false once invalidated)
    absl::Time evictable_since;
    Entry* prev = nullptr;  // eviction map links, while refs == 0 and cached
    Entry* next = nullptr;
  };

  void Release(Entry* entry);
  void LinkEvictable(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnlinkEvictable(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes the oldest evictable entries past the limits out of the map and
  // chains them (through `next`) onto `*doomed`, for FreeChain after the
  // lock is released.
  void TrimLocked(absl::Time now, Entry** doomed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frees a chain from TrimLocked, closing descriptors (no lock held).
  static void FreeChain(Entry* doomed);

  const ReplicaCacheOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::unique_ptr<Entry>> map_ ABSL_GUARDED_BY(mu_);
  Entry* oldest_ ABSL_GUARDED_BY(mu_) = nullptr;  // eviction map head
  Entry* newest_ ABSL_GUARDED_BY(mu_) = nullptr;  // eviction map tail
  size_t evictable_ ABSL_GUARDED_BY(mu_) = 0;
  ReplicaCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::cache
