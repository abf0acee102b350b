#include "cache/block_cache.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>

#include "absl/hash/hash.h"

namespace logfs::cache {

Block::Block(std::shared_ptr<ChunkPool> pool, absl::string_view data)
    : pool_(std::move(pool)), size_(data.size()) {
  const size_t count = (data.size() + ChunkPool::kChunkBytes - 1) / ChunkPool::kChunkBytes;
  chunks_.reserve(count);
  pool_->Allocate(count, &chunks_);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = i * ChunkPool::kChunkBytes;
    std::memcpy(chunks_[i], data.data() + at, std::min(ChunkPool::kChunkBytes, data.size() - at));
  }
}

Block::~Block() { pool_->Free(chunks_); }

void Block::AppendIov(size_t offset, size_t length, std::vector<iovec>* iov) const {
  DCHECK_LE(offset + length, size_);
  while (length > 0) {
    const size_t chunk = offset / ChunkPool::kChunkBytes;
    const size_t within = offset % ChunkPool::kChunkBytes;
    const size_t n = std::min(length, ChunkPool::kChunkBytes - within);
    iov->push_back({chunks_[chunk] + within, n});
    offset += n;
    length -= n;
  }
}

BlockCache::BlockCache(const BlockCacheOptions& options)
    : options_(options),
      shard_capacity_(options.capacity_bytes / std::max(options.shards, 1)),
      protected_capacity_(static_cast<uint64_t>(shard_capacity_ * options.protected_fraction)),
      pool_(std::make_shared<ChunkPool>()) {
  CHECK_GT(options.block_bytes, 0u);
  CHECK_EQ(options.block_bytes % ChunkPool::kChunkBytes, 0u);
  for (int i = 0; i < std::max(options.shards, 1); ++i) {
    shards_.push_back(std::make_unique<Shard>());
  }
}

BlockCache::Shard& BlockCache::ShardOf(const BlockKey& key) const {
  return *shards_[absl::HashOf(key) % shards_.size()];
}

bool BlockCache::Contains(const BlockKey& key) const {
  Shard& s = ShardOf(key);
  absl::MutexLock lock(&s.mu);
  return s.index.contains(key);
}

BlockHandle BlockCache::Lookup(const BlockKey& key) {
  if (options_.tracer != nullptr) options_.tracer->OnLookup(key);
  Shard& s = ShardOf(key);
  absl::MutexLock lock(&s.mu);
  auto found = s.index.find(key);
  if (found == s.index.end()) {
    ++s.misses;
    return nullptr;
  }
  ++s.hits;
  Promote(s, found->second);
  return found->second->block;
}

// A hit: to the front of its list, and from probation into the protected
// segment under SLRU. Protected overflow goes back to the front of
// probation, so it gets one more chance before eviction. splice moves list
// nodes without allocating.
void BlockCache::Promote(Shard& s, EntryList::iterator it) {
  if (options_.policy == EvictionPolicy::kLru || it->is_protected) {
    EntryList& list = it->is_protected ? s.protect : s.probation;
    list.splice(list.begin(), list, it);
    return;
  }
  const uint64_t charge = it->block->charge();
  s.probation_bytes -= charge;
  s.protected_bytes += charge;
  it->is_protected = true;
  s.protect.splice(s.protect.begin(), s.probation, it);
  while (s.protected_bytes > protected_capacity_ && s.protect.size() > 1) {
    auto last = std::prev(s.protect.end());
    const uint64_t c = last->block->charge();
    s.protected_bytes -= c;
    s.probation_bytes += c;
    last->is_protected = false;
    s.probation.splice(s.probation.begin(), s.protect, last);
  }
}

BlockHandle BlockCache::Insert(const BlockKey& key, absl::string_view data) {
  CHECK_LE(data.size(), options_.block_bytes);
  // Copy into chunks before taking the shard lock.
  auto block = std::make_shared<const Block>(pool_, data);
  if (shard_capacity_ < block->charge()) return block;  // too small to cache: just serve it
  Shard& s = ShardOf(key);
  absl::MutexLock lock(&s.mu);
  auto found = s.index.find(key);
  if (found != s.index.end()) return found->second->block;
  s.probation.push_front(Entry{key, block, false});
  s.index.emplace(key, s.probation.begin());
  s.probation_bytes += block->charge();
  ++s.inserts;
  EvictOverflow(s);
  return block;
}

BlockHandle BlockCache::Replace(const BlockKey& key, absl::string_view data) {
  {
    Shard& s = ShardOf(key);
    absl::MutexLock lock(&s.mu);
    auto found = s.index.find(key);
    if (found != s.index.end()) {
      if (found->second->block->size() >= data.size()) return found->second->block;
      EntryList::iterator entry = found->second;
      (entry->is_protected ? s.protected_bytes : s.probation_bytes) -= entry->block->charge();
      (entry->is_protected ? s.protect : s.probation).erase(entry);
      s.index.erase(found);
    }
  }
  return Insert(key, data);
}

// Evicts from the tail of probation, then (only if probation is empty) of
// the protected segment, until the shard fits its capacity.
void BlockCache::EvictOverflow(Shard& s) {
  while (s.probation_bytes + s.protected_bytes > shard_capacity_) {
    const bool from_probation = !s.probation.empty();
    EntryList& list = from_probation ? s.probation : s.protect;
    auto last = std::prev(list.end());
    (from_probation ? s.probation_bytes : s.protected_bytes) -= last->block->charge();
    s.index.erase(last->key);
    list.erase(last);
    ++s.evictions;
  }
}

BlockHandle BlockCache::Uncached(absl::string_view data) {
  CHECK_LE(data.size(), options_.block_bytes);
  return std::make_shared<const Block>(pool_, data);
}

void BlockCache::Clear() {
  for (auto& shard : shards_) {
    Shard& s = *shard;
    absl::MutexLock lock(&s.mu);
    s.index.clear();
    s.probation.clear();
    s.protect.clear();
    s.probation_bytes = s.protected_bytes = 0;
  }
}

BlockCacheStats BlockCache::stats() const {
  BlockCacheStats out;
  for (const auto& shard : shards_) {
    absl::MutexLock lock(&shard->mu);
    out.hits += shard->hits;
    out.misses += shard->misses;
    out.inserts += shard->inserts;
    out.evictions += shard->evictions;
    out.blocks += shard->index.size();
    out.bytes += shard->probation_bytes + shard->protected_bytes;
  }
  out.reserved_bytes = pool_->reserved_bytes();
  return out;
}

}  // namespace logfs::cache
