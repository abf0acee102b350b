#include "cache/chunk_pool.h"

namespace logfs::cache {

void ChunkPool::Allocate(size_t count, std::vector<char*>* out) {
  absl::MutexLock lock(&mu_);
  while (free_.size() < count) {
    slabs_.push_back(std::make_unique<char[]>(kSlabBytes));
    char* slab = slabs_.back().get();
    for (size_t at = 0; at < kSlabBytes; at += kChunkBytes) free_.push_back(slab + at);
  }
  out->insert(out->end(), free_.end() - count, free_.end());
  free_.resize(free_.size() - count);
}

void ChunkPool::Free(const std::vector<char*>& chunks) {
  absl::MutexLock lock(&mu_);
  free_.insert(free_.end(), chunks.begin(), chunks.end());
}

uint64_t ChunkPool::reserved_bytes() const {
  absl::MutexLock lock(&mu_);
  return slabs_.size() * kSlabBytes;
}

}  // namespace logfs::cache
