// The file handles the kernel holds for one mount (fuse_file_info.fh): small
// integer ids, each naming a shared_ptr<T> (an open file, an open
// directory), instead of heap addresses. An id means the same thing to any
// process that holds the table's contents, so a successor daemon serves the
// handles its predecessor gave out (`logfs mount --takeover`): AddAt puts
// each back under its old id.
//
// Lookups take no lock: ids index fixed blocks of slots, which are never
// moved or freed while the table lives. A slot is written before its id is
// handed to the kernel and read only after the kernel sent it back, and the
// kernel sends nothing for an id after its RELEASE was answered, so a slot
// is never read and written at once (the /dev/fuse write and read order
// them, as they ordered the heap pointers this replaced). Add, AddAt and
// Take lock. Thread-safe in that sense.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace logfs::fuse {

template <typename T>
class HandleTable {
 public:
  static constexpr uint64_t kBlockSlots = 4096;
  static constexpr uint64_t kBlocksMax = 4096;  // 16 Mi handles open at once
  static constexpr uint64_t kIdMax = kBlockSlots * kBlocksMax;  // ids are 1..kIdMax

  HandleTable() = default;
  ~HandleTable() {
    for (auto& block : blocks_) delete[] block.load(std::memory_order_relaxed);
  }
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Stores `value` (not null) under a free id, the one freed last
  // first; 0 when kIdMax handles are open (the caller answers ENFILE).
  uint64_t Add(std::shared_ptr<T> value) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    uint64_t id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else if (next_ <= kIdMax) {
      id = next_++;
    } else {
      return 0;
    }
    SlotLocked(id) = std::move(value);
    return id;
  }

  // Stores `value` under `id`, as a predecessor gave it out; false if `id`
  // is out of range or holds a handle. Call before any Add, best in id
  // order.
  bool AddAt(uint64_t id, std::shared_ptr<T> value) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (id == 0 || id > kIdMax) return false;
    if (id < next_) {
      // Below the ids given out: only a free one (linear, but a successor
      // adds its handles in id order, which takes the branch below).
      auto it = std::find(free_.begin(), free_.end(), id);
      if (it == free_.end()) return false;
      free_.erase(it);
    } else {
      for (; next_ < id; ++next_) free_.push_back(next_);
      next_ = id + 1;
    }
    SlotLocked(id) = std::move(value);
    return true;
  }

  // The handle under `id`; null for an id that names none.
  std::shared_ptr<T> Get(uint64_t id) const {
    if (id == 0 || id > kIdMax) return nullptr;
    const Slot* block = blocks_[(id - 1) / kBlockSlots].load(std::memory_order_acquire);
    return block == nullptr ? nullptr : block[(id - 1) % kBlockSlots];
  }

  // Removes and returns the handle under `id` (null if none); the id may
  // be given out again.
  std::shared_ptr<T> Take(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_) {
    if (Get(id) == nullptr) return nullptr;
    absl::MutexLock lock(&mu_);
    std::shared_ptr<T> value = std::move(SlotLocked(id));
    free_.push_back(id);
    return value;
  }

  // Every handle with its id, in id order. Call when nothing adds or
  // takes (a drained session).
  std::vector<std::pair<uint64_t, std::shared_ptr<T>>> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::vector<std::pair<uint64_t, std::shared_ptr<T>>> out;
    for (uint64_t id = 1; id < next_; ++id) {
      if (std::shared_ptr<T> value = Get(id)) out.emplace_back(id, std::move(value));
    }
    return out;
  }

 private:
  using Slot = std::shared_ptr<T>;

  Slot& SlotLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::atomic<Slot*>& block = blocks_[(id - 1) / kBlockSlots];
    Slot* slots = block.load(std::memory_order_relaxed);
    if (slots == nullptr) {
      slots = new Slot[kBlockSlots];
      block.store(slots, std::memory_order_release);
    }
    return slots[(id - 1) % kBlockSlots];
  }

  mutable absl::Mutex mu_;
  std::array<std::atomic<Slot*>, kBlocksMax> blocks_{};
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 1;           // ids below it were given out
  std::vector<uint64_t> free_ ABSL_GUARDED_BY(mu_);  // given out, then taken
};

}  // namespace logfs::fuse
