// Per-chunk CRC32C of a replica (docs/segd_layout.md "Checksums").
//
// A replica of `length` bytes is cut into chunks of kCrcChunkBytes; chunk
// c covers bytes [c * kCrcChunkBytes, min((c + 1) * kCrcChunkBytes,
// length)), so only the last chunk may be partial. Its sidecar file
// `<id>.crc` holds the CRC32C of chunk c as 4 little-endian bytes at
// offset c * kCrcBytes, and nothing else: its size is
// ChunkCount(length) * kCrcBytes.
//
// Pure functions and thin wrappers over a file of the segment server's
// file system (src/env/file_system.h) or, for a short-circuit reader, a raw
// descriptor: thread-safe, no state. Syscall failures come back through
// SyscallError (absl::ErrnoToStatus).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/env/file_system.h"

namespace logfs::format {

// 64 KiB: one CRC costs 4 bytes of .crc file per chunk (1/16384 of the
// data), and a read verifies at most one extra chunk at each end.
inline constexpr uint64_t kCrcChunkBytes = 64u << 10;
inline constexpr uint64_t kCrcBytes = 4;  // one CRC32C, little-endian
static_assert((kCrcChunkBytes & (kCrcChunkBytes - 1)) == 0, "chunk size is a power of two");

// Chunks covering `length_bytes` bytes (the last may be partial).
inline uint64_t ChunkCount(uint64_t length_bytes) {
  return (length_bytes + kCrcChunkBytes - 1) / kCrcChunkBytes;
}
inline uint64_t ChunkStart(uint64_t chunk) { return chunk * kCrcChunkBytes; }
// Size of the .crc file of a replica of `length_bytes` bytes.
inline uint64_t CrcFileBytes(uint64_t length_bytes) { return ChunkCount(length_bytes) * kCrcBytes; }

// The CRCs that change when bytes are appended to a replica.
struct ChunkCrcUpdate {
  uint64_t first_chunk = 0;
  std::vector<uint32_t> crcs;  // of chunks first_chunk, first_chunk + 1, ...
  uint32_t tail_crc = 0;       // of the new last partial chunk; 0 if there is none
};

// Appending `data` to a replica of `length` bytes whose last partial chunk
// has CRC `tail_crc` (ignored when `length` is a multiple of the chunk
// size): returns the new CRC of every chunk the append touches.
ChunkCrcUpdate ExtendChunkCrcs(uint64_t length, uint32_t tail_crc, absl::string_view data);

// CRC of each chunk of `data`, which starts at a chunk boundary.
std::vector<uint32_t> ComputeChunkCrcs(absl::string_view data);

// Index (within `data`, which starts at a chunk boundary) of the first
// chunk whose CRC32C differs from `crcs`, or nullopt if all match. A chunk
// without an expected CRC (crcs too short) counts as bad.
std::optional<uint64_t> FirstBadChunk(absl::string_view data, const std::vector<uint32_t>& crcs);

// Writes `crcs` as the CRCs of chunks first_chunk, first_chunk + 1, ...
absl::Status WriteChunkCrcs(env::WritableFile& crc_file, uint64_t first_chunk,
                           const std::vector<uint32_t>& crcs);

// Reads the CRCs of `count` chunks from `first_chunk`, from the segment
// server's file or a short-circuit reader's descriptor. kDataLoss if the
// file ends before them.
absl::StatusOr<std::vector<uint32_t>> ReadChunkCrcs(const env::RandomAccessFile& crc_file,
                                                    uint64_t first_chunk, uint64_t count);
absl::StatusOr<std::vector<uint32_t>> ReadChunkCrcs(int crc_fd, uint64_t first_chunk,
                                                    uint64_t count);

// Makes the .crc file match the first `length` bytes of the data file:
// recomputes every chunk's CRC from the data, rewrites the ones that
// differ and cuts the file to CrcFileBytes(length). Does not sync.
struct RebuildResult {
  uint32_t tail_crc = 0;        // of the last partial chunk; 0 if none
  uint64_t chunks_changed = 0;  // CRCs that were missing or different
};
absl::StatusOr<RebuildResult> RebuildChunkCrcs(const env::RandomAccessFile& data_file,
                                               env::WritableFile& crc_file, uint64_t length);

}  // namespace logfs::format
