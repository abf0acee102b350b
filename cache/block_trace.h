// Block-cache access traces, to compare eviction policies on the same
// accesses (docs/PERFORMANCE.md "Block cache policy, measured"): a mount
// run with --block_cache_trace=FILE records the key of every block-cache
// lookup, in order; `logfs bench cache-replay` replays such traces (and
// synthetic ones) through a BlockCache of each policy and capacity and
// reports the hit ratios. The method is the usual one of cache studies
// (e.g. the traces behind S3-FIFO, Yang et al., SOSP 2023): one trace,
// every policy, every size.
//
// File format: the 8-byte magic "LGFSBT01" and the cache's block size in
// bytes (a little-endian uint64), then one 16-byte record per lookup:
// segment id and block index, each a little-endian uint64.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cache/block_cache.h"
#include "src/env/file_system.h"

namespace logfs::cache {

inline constexpr char kBlockTraceMagic[] = "LGFSBT01";  // 8 bytes, no NUL written
inline constexpr size_t kBlockTraceHeaderBytes = 16;
inline constexpr size_t kBlockTraceRecordBytes = 16;

// Appends lookups to a trace file. Thread-safe: one mutex around a 64 KiB
// buffer, written out when full, by the FUSE thread whose lookup filled it
// (a diagnostic mode, off by default, that makes such a read wait for a
// write). After `max_records` or a write error (logged once) further
// records are counted as dropped.
class BlockTraceWriter : public BlockCacheTracer {
 public:
  // Creates or truncates `path` (mode 0644, through env::FileSystem) and
  // writes the header for a cache of `block_bytes` blocks. Errors: the
  // open's or the write's (kNotFound for a missing directory, ...).
  static absl::StatusOr<std::unique_ptr<BlockTraceWriter>> Create(const std::string& path,
                                                                  uint64_t block_bytes,
                                                                  uint64_t max_records);
  ~BlockTraceWriter() override;  // writes out what is buffered

  void OnLookup(const BlockKey& key) override ABSL_LOCKS_EXCLUDED(mu_);
  // Writes out the buffer. Errors: the write's errno.
  absl::Status Flush() ABSL_LOCKS_EXCLUDED(mu_);
  // Lookups taken into the buffer (a failed write loses those not yet
  // written), and lookups not taken.
  uint64_t recorded() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t dropped() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  BlockTraceWriter(std::unique_ptr<env::WritableFile> file, uint64_t max_records);
  absl::Status FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t max_records_;
  mutable absl::Mutex mu_;
  const std::unique_ptr<env::WritableFile> file_;  // written under mu_
  uint64_t end_ ABSL_GUARDED_BY(mu_) = kBlockTraceHeaderBytes;  // bytes written
  std::string buffer_ ABSL_GUARDED_BY(mu_);
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
};

struct BlockTrace {
  uint64_t block_bytes = 0;  // of the cache that was traced
  std::vector<BlockKey> keys;
};

// A trace file's block size and lookups (16 bytes of memory per lookup).
// Errors: the open's or the read's errno; EINVAL for a file without the
// header or with a partial record.
absl::StatusOr<BlockTrace> ReadBlockTrace(const std::string& path);

// A synthetic trace: `hot_blocks` blocks read again and again (uniformly
// at random, seeded), interleaved with one-pass sequential scans of
// `scan_blocks` blocks never read again; `scan_share` of the lookups (0-1)
// belong to scans. The pattern a block cache must survive: a table scan or
// compaction read through the cache while point reads hit a hot set.
std::vector<BlockKey> ScanWithHotSetTrace(uint64_t lookups, uint64_t hot_blocks,
                                          uint64_t scan_blocks, double scan_share, uint32_t seed);

struct ReplayResult {
  uint64_t lookups = 0;
  uint64_t hits = 0;
  double hit_ratio() const { return lookups == 0 ? 0 : static_cast<double>(hits) / lookups; }
};

// Replays `trace` through a BlockCache of `policy` holding `capacity_blocks`
// blocks (in `shards` shards, as the mount's): each lookup, and an insert
// after each miss, as the mount's read path does. Blocks are one
// ChunkPool chunk each (the ratio depends on the count of blocks only).
ReplayResult ReplayBlockTrace(const std::vector<BlockKey>& trace, EvictionPolicy policy,
                              uint64_t capacity_blocks, int shards);

// The best any policy could do with `capacity_blocks` (Belady's OPT:
// evict the block used again furthest in the future), one shard: an upper
// bound for the table.
ReplayResult ReplayBeladyOpt(const std::vector<BlockKey>& trace, uint64_t capacity_blocks);

}  // namespace logfs::cache
