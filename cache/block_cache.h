// The mount's block cache (DESIGN §5): bytes of sealed segments in
// fixed-size blocks keyed by (segment id, block index). Sealed segments
// never change and segment ids are never reused (meta's counter), so a
// cached block never goes stale and needs no invalidation.
//
// Eviction is segmented LRU (SLRU, as in Karedla et al., "Caching
// strategies to improve disk system performance", 1994, and the main
// region of Caffeine's W-TinyLFU): a new block enters the probationary
// segment; a second hit promotes it to the protected segment
// (`protected_fraction` of the capacity), whose overflow falls back to the
// head of probation. Eviction takes the probationary tail first, so a scan
// that reads every block once only churns probation and cannot flush the
// hot set, as it does under plain LRU. kLru keeps one list, for comparison.
//
// Memory comes from ChunkPool chunks; a block spans block_bytes /
// kChunkBytes chunks and is read as a scatter-gather vector (AppendIov),
// never copied into one buffer. Blocks are reference counted: a handle
// keeps its bytes alive after eviction, so the pool may briefly hold more
// than `capacity_bytes` while replies are in flight.
//
// Thread-safe: `shards` independent shards, each with its own mutex and
// counters on cache lines of its own, chosen by the key's hash. A hit
// takes one shard mutex, writes no memory another shard's hit writes,
// does no allocation and throws nothing.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "cache/chunk_pool.h"

namespace logfs::cache {

struct BlockKey {
  uint64_t segment_id = 0;
  uint64_t index = 0;  // block index: segment offset / block_bytes

  bool operator==(const BlockKey& o) const {
    return segment_id == o.segment_id && index == o.index;
  }
  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& k) {
    return H::combine(std::move(h), k.segment_id, k.index);
  }
};

enum class EvictionPolicy { kLru, kSegmentedLru };

// Sees the key of every Lookup, before the cache's lock is taken
// (cache/block_trace.h records them to a file). Called on the reading
// thread (a FUSE worker in the mount): must be thread-safe, and should not
// block.
class BlockCacheTracer {
 public:
  virtual ~BlockCacheTracer() = default;
  virtual void OnLookup(const BlockKey& key) = 0;
};

struct BlockCacheOptions {
  uint64_t capacity_bytes = 256ull << 20;  // 0 disables the cache
  uint32_t block_bytes = 64u << 10;        // a positive multiple of kChunkBytes
  int shards = 16;
  EvictionPolicy policy = EvictionPolicy::kSegmentedLru;
  double protected_fraction = 0.8;  // SLRU: share of each shard's capacity
  BlockCacheTracer* tracer = nullptr;  // not owned; outlives the cache; null: no trace
};

// The immutable bytes of one cached block.
class Block {
 public:
  Block(std::shared_ptr<ChunkPool> pool, absl::string_view data);
  ~Block();
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  size_t size() const { return size_; }
  // Memory the block holds: its chunks (bytes).
  size_t charge() const { return chunks_.size() * ChunkPool::kChunkBytes; }
  // Appends iovecs covering bytes [offset, offset + length) of the block;
  // offset + length <= size(). The iovecs point into the block: keep a
  // handle until they are consumed.
  void AppendIov(size_t offset, size_t length, std::vector<iovec>* iov) const;

 private:
  std::shared_ptr<ChunkPool> pool_;
  std::vector<char*> chunks_;
  size_t size_ = 0;
};

using BlockHandle = std::shared_ptr<const Block>;

struct BlockCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t inserts = 0;
  uint64_t evictions = 0;
  uint64_t blocks = 0;          // blocks cached now
  uint64_t bytes = 0;           // their charge (bytes)
  uint64_t reserved_bytes = 0;  // the chunk pool's footprint (bytes)
};

class BlockCache {
 public:
  explicit BlockCache(const BlockCacheOptions& options);
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The cached block, or null; counts a hit or a miss. Pins the block for
  // as long as the handle lives.
  BlockHandle Lookup(const BlockKey& key);
  // Whether `key` is cached, without counting, tracing or promoting it: for
  // a caller that must know before it commits to a read (file_read.cc).
  bool Contains(const BlockKey& key) const;
  // Caches `data` (at most block_bytes; shorter only for a segment's last
  // block) under `key` and returns it, evicting as needed. If the key is
  // already cached (a concurrent miss filled it), returns that block.
  BlockHandle Insert(const BlockKey& key, absl::string_view data);
  // Insert, in place of a shorter block cached under `key`: a segment's
  // last block, cached before the segment was continued (a WAL file
  // reopened for append) and sealed longer. A block at least as long
  // stays and is returned.
  BlockHandle Replace(const BlockKey& key, absl::string_view data);
  // A block holding `data` (at most block_bytes) that is not cached, for
  // bytes that must be served but not kept.
  BlockHandle Uncached(absl::string_view data);
  // Drops every block (held handles stay valid).
  void Clear();

  BlockCacheStats stats() const;
  uint32_t block_bytes() const { return options_.block_bytes; }

 private:
  struct Entry {
    BlockKey key;
    BlockHandle block;
    bool is_protected = false;
  };
  using EntryList = std::list<Entry>;
  // Aligned to a cache line, so that two shards never share one.
  struct alignas(64) Shard {
    mutable absl::Mutex mu;
    EntryList probation ABSL_GUARDED_BY(mu);  // front = most recently used
    EntryList protect ABSL_GUARDED_BY(mu);    // SLRU only
    absl::flat_hash_map<BlockKey, EntryList::iterator> index ABSL_GUARDED_BY(mu);
    uint64_t probation_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t protected_bytes ABSL_GUARDED_BY(mu) = 0;
    uint64_t hits ABSL_GUARDED_BY(mu) = 0;
    uint64_t misses ABSL_GUARDED_BY(mu) = 0;
    uint64_t inserts ABSL_GUARDED_BY(mu) = 0;
    uint64_t evictions ABSL_GUARDED_BY(mu) = 0;
  };

  Shard& ShardOf(const BlockKey& key) const;
  void Promote(Shard& s, EntryList::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);
  void EvictOverflow(Shard& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu);

  const BlockCacheOptions options_;
  const uint64_t shard_capacity_;   // bytes
  const uint64_t protected_capacity_;  // bytes per shard
  std::shared_ptr<ChunkPool> pool_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace logfs::cache
