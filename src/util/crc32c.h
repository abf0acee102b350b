// CRC32C (Castagnoli), as used by iSCSI, ext4 metadata and LevelDB.
// Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise.
// Thread-safe; no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace logfs::util {

// Extends `crc` (the CRC32C of some preceding bytes, 0 for none) over
// `n` bytes at `data` and returns the result.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

// CRC32C of `n` bytes at `data`.
inline uint32_t Crc32c(const void* data, size_t n) {
  return Crc32cExtend(0, data, n);
}

}  // namespace logfs::util
