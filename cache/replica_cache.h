// The mount's short-circuit replica cache (DESIGN §5, after HDFS's
// ShortCircuitCache and its two eviction maps): read-only descriptors of
// sealed replicas on this host, keyed by (segment id, server id), shared
// by every reader with reference counts, and for each a read-only mapping
// of its data file made on the first read that wants one (Map), so that a
// block-cache fill or a large read copies its bytes once, from the mapping.
//
// A replica nobody references is evictable and waits in one of two
// eviction maps, each ordered by the time its entries became evictable:
//  - the mmapped map holds evictable replicas that are still mapped. Past
//    `max_evictable_mmapped` entries, `max_evictable_mmapped_bytes` mapped
//    bytes or `max_mmapped_idle` of waiting, the oldest is unmapped and
//    moves to the other map, its wait starting again (as HDFS's
//    demoteOldEvictableMmaped);
//  - the descriptor map holds evictable replicas that are not mapped. Past
//    `max_evictable` evictable replicas in both maps together, or
//    `max_idle` of waiting, the oldest is closed (the descriptor map's
//    first, then the mmapped map's).
// A replica may therefore stay open max_mmapped_idle + max_idle after its
// last reader lets go.
//
// The maps are intrusive lists inside the entries (an entry's evictable
// time comes from a monotonic clock and only grows, so appending keeps a
// list ordered), which makes a hit, a release and a trim O(1) per entry
// moved, with no allocation and nothing that throws: a trim unlinks
// entries and chains them, and their descriptors close and mappings go
// away after the lock is released. Only a miss allocates (its entry) and
// only Map maps. Compare HDFS-14541, where trimming the eviction maps
// threw NoSuchElementException on the hot path.
//
// A replica its server deletes stays readable (and its disk space stays
// allocated) until its descriptors close and its mapping goes, so the
// cache must not wait for the limits above to let go of it (issue 44: a
// mount held 1 GiB of deleted WAL replicas for minutes, and the servers
// refused writes with ENOSPC). DropDeleted, called with each periodic
// trim, asks the kernel whether each cached replica's data file still has
// a name (fstat's st_nlink; 0 once its server unlinked it, whatever made
// it delete it) and drops those that do not: unreferenced ones close and
// unmap at once, referenced ones at their last release. No message from
// the server is needed, so servers of any version work (the part the
// "valid" bit of HDFS's shared-memory slots, ShortCircuitShm, plays when
// the DataNode clears it; docs/client.md says why not a message).
// Sealed replicas are never truncated by their server
// (store/segd/replica_store.h), and Map checks the data file holds the
// sealed length, so a mapped read cannot fault past the end of the file
// unless someone truncates it by hand.
//
// Thread-safe: one mutex, held for map and list updates only, never
// across opening, mapping, reading, unmapping or closing a replica.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "store/format/replica_fds.h"

namespace logfs::cache {

struct ReplicaCacheOptions {
  // Unreferenced replicas kept open, mapped or not (2 descriptors each).
  size_t max_evictable = 128;
  // Longest an unreferenced replica stays open (from when it became
  // evictable, or lost its mapping).
  absl::Duration max_idle = absl::Minutes(5);
  // Whether Map maps replicas; off: every read is a pread.
  bool mmap = true;
  // Unreferenced replicas kept mapped, their mapped bytes, and the
  // longest one stays mapped.
  size_t max_evictable_mmapped = 64;
  uint64_t max_evictable_mmapped_bytes = uint64_t{4} << 30;
  absl::Duration max_mmapped_idle = absl::Minutes(1);
  // A monotonic clock (tests pass their own).
  std::function<absl::Time()> now = [] {
    return absl::UnixEpoch() + absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
  };
};

// Counters since the cache was made, and gauges (now).
struct ReplicaCacheStats {
  uint64_t hits = 0;
  uint64_t opens = 0;  // misses that opened a replica
  uint64_t invalidations = 0;
  uint64_t deletions = 0;  // dropped: the replica's data file was unlinked (DropDeleted)
  uint64_t evictions_by_count = 0;  // closed: past max_evictable
  uint64_t evictions_by_age = 0;    // closed: past max_idle
  uint64_t mmaps = 0;               // mappings made
  uint64_t mmap_failures = 0;       // mmap or fstat failed, or the file is short: pread instead
  uint64_t unmaps_by_count = 0;     // unmapped: past max_evictable_mmapped
  uint64_t unmaps_by_bytes = 0;     // unmapped: past max_evictable_mmapped_bytes
  uint64_t unmaps_by_age = 0;       // unmapped: past max_mmapped_idle
  uint64_t open_replicas = 0;       // gauge: cached now (referenced or evictable)
  uint64_t evictable = 0;           // gauge: of them, unreferenced (both maps)
  uint64_t mmapped = 0;             // gauge: cached replicas mapped now
  uint64_t mmapped_bytes = 0;       // gauge: their mapped bytes
  uint64_t evictable_mmapped = 0;   // gauge: of them, unreferenced

  uint64_t evictions() const { return evictions_by_count + evictions_by_age; }
};

class ReplicaCache {
 private:
  struct Entry;

 public:
  using Key = std::pair<uint64_t, uint64_t>;  // (segment id, server id)

  // A counted reference to a cached replica; movable. The descriptors, and
  // a mapping made while any reference lives, stay valid while it lives.
  class Ref {
   public:
    Ref() = default;
    Ref(Ref&& o) noexcept : cache_(std::exchange(o.cache_, nullptr)), entry_(o.entry_) {}
    Ref& operator=(Ref&& o) noexcept;
    ~Ref();
    const format::ReplicaFds& files() const;
    // The replica's sealed bytes through its mapping, or empty if it is
    // not mapped (see ReplicaCache::Map).
    absl::string_view mapped() const;
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
  Ref Lookup(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether Lookup(key) would hit, without counting or referencing it.
  bool Contains(const Key& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Caches `files` as `key` and references it. If a racing miss inserted
  // the key first, references that one and closes `files`.
  Ref Insert(const Key& key, format::ReplicaFds files) ABSL_LOCKS_EXCLUDED(mu_);

  // The replica's bytes through a read-only shared mapping of its data
  // file (its first files().length bytes), mapping it first if it is not
  // mapped yet; valid while `ref` lives. Empty when mapping is off, the
  // replica is empty, or mapping it failed (then counted once, and the
  // replica is read with pread from then on). Mapping runs without the
  // lock; two racing calls keep one mapping.
  absl::string_view Map(const Ref& ref) ABSL_LOCKS_EXCLUDED(mu_);

  // Drops `ref`'s replica from the cache (a read through it failed): new
  // lookups miss; its descriptors close, and its mapping goes, with the
  // last reference.
  void Invalidate(const Ref& ref) ABSL_LOCKS_EXCLUDED(mu_);

  // Unmaps and closes evictable replicas past the limits (call now and
  // then: releases trim too, but only age limits need a clock to pass).
  void Trim() ABSL_LOCKS_EXCLUDED(mu_);

  // Drops every cached replica whose data file has no name left (fstat
  // st_nlink == 0: its server deleted the replica, or the file was
  // removed by hand), as Invalidate does: new lookups miss; an
  // unreferenced replica is closed and unmapped before this returns, a
  // referenced one at its last release. A .crc file renamed over (a
  // reopened replica, docs/segd_layout.md "Reopen") does not count: the
  // cached descriptors still serve the sealed length they were opened at.
  // A replica cached while the pass runs waits for the next one. Returns
  // how many were dropped. Costs one fstat per cached replica (a few
  // microseconds each in a VM), made without the lock, and a list of the
  // cached replicas (allocated): call it with Trim, now and then, never
  // per read. Thread-safe; never throws.
  size_t DropDeleted() ABSL_LOCKS_EXCLUDED(mu_);

  ReplicaCacheStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A read-only mapping of a replica's data file. Owned by its entry;
  // once taken off it (an unmap by a trim), by the chain it is put on.
  struct Mapping {
    const char* addr = nullptr;
    size_t bytes = 0;
    Mapping* next = nullptr;  // in a chain of mappings to unmap
    ~Mapping();
  };

  // An eviction map: evictable entries, oldest first.
  struct EvictionMap {
    Entry* oldest = nullptr;
    Entry* newest = nullptr;
    size_t count = 0;
    uint64_t mapped_bytes = 0;
  };

  // Which file a descriptor is open on (fstat's st_dev, st_ino); zero
  // when fstat failed.
  struct FileId {
    uint64_t device = 0;
    uint64_t inode = 0;
    bool operator==(const FileId& o) const { return device == o.device && inode == o.inode; }
  };

  struct Entry {
    Key key;
    format::ReplicaFds files;
    FileId data_file;  // of files.data, taken by Insert before the entry is shared
    int refs = 0;
    bool cached = true;  // in the map (false once invalidated or evicted)
    // Set (by Map) only while referenced; cleared (by a trim) only while
    // evictable, under mu_. Readers holding a reference load it without
    // the lock.
    std::atomic<Mapping*> mapping{nullptr};
    std::atomic<bool> mmap_failed{false};
    absl::Time evictable_since;
    // Eviction map links, while refs == 0 and cached; `next` also chains
    // entries to free after a trim.
    EvictionMap* map = nullptr;
    Entry* prev = nullptr;
    Entry* next = nullptr;
    ~Entry();
  };

  // What a trim takes out under the lock, to free after it.
  struct Doomed {
    Entry* entries = nullptr;
    Mapping* mappings = nullptr;
    ~Doomed();  // closes and unmaps them
  };

  void Release(Entry* entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Puts an entry that lost its last reference in the map for its state.
  void LinkEvictable(Entry* e, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Link(EvictionMap& map, Entry* e);
  static void Unlink(Entry* e);
  // A cached replica's data descriptor, as a DropDeleted pass lists it:
  // the number may be closed, even reused, by the time it is used, and
  // `data_file` says whether it still names the same file.
  struct DataFileProbe {
    Key key;
    int data_fd = -1;
    FileId data_file;
  };
  std::vector<DataFileProbe> ListDataFiles() const ABSL_LOCKS_EXCLUDED(mu_);
  // Takes a cached entry out of map_ (cached = false): its owner is then
  // its last reference, or whoever frees it.
  void UncacheLocked(Entry* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes an evictable entry out of the cache onto `doomed`.
  void EvictLocked(Entry* e, Doomed* doomed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unmaps and closes, oldest first, what is past the limits at `now`.
  void TrimLocked(absl::Time now, Doomed* doomed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ReplicaCacheOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, std::unique_ptr<Entry>> map_ ABSL_GUARDED_BY(mu_);
  EvictionMap evictable_ ABSL_GUARDED_BY(mu_);          // not mapped
  EvictionMap evictable_mmapped_ ABSL_GUARDED_BY(mu_);  // mapped
  uint64_t mmapped_ ABSL_GUARDED_BY(mu_) = 0;           // cached entries mapped
  uint64_t mmapped_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  ReplicaCacheStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::cache
