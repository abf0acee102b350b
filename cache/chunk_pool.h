// Fixed-size memory chunks for the block cache (DESIGN §5). Chunks are carved
// from 1 MiB slabs that the pool allocates on demand and keeps until it is
// destroyed, so a busy cache never returns to malloc and never fragments the
// heap with block-sized allocations of varying length.
//
// Thread-safe: one mutex around the free list, taken once per block
// allocated or freed (not per cache hit).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace logfs::cache {

class ChunkPool {
 public:
  static constexpr size_t kChunkBytes = 16 << 10;
  static constexpr size_t kSlabBytes = 1 << 20;

  ChunkPool() = default;
  ChunkPool(const ChunkPool&) = delete;
  ChunkPool& operator=(const ChunkPool&) = delete;

  // Appends `count` chunks of kChunkBytes each to `out`; grows by whole
  // slabs when the free list runs short (never fails short of std::bad_alloc,
  // which ends the process as any allocation failure does).
  void Allocate(size_t count, std::vector<char*>* out) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns chunks that came from Allocate.
  void Free(const std::vector<char*>& chunks) ABSL_LOCKS_EXCLUDED(mu_);

  // Bytes of all slabs allocated so far (the pool's whole footprint).
  uint64_t reserved_bytes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<char[]>> slabs_ ABSL_GUARDED_BY(mu_);
  std::vector<char*> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::cache
