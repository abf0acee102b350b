// `logfs bench read`: random reads of `read_bytes` (or range scans: seek to
// a random offset and read `scan_bytes` sequentially, `read_bytes` at a
// time) from sealed files by `threads` threads, in up to three phases:
// - cold: kernel caches dropped (which also empties the mount's page
//   cache), the mount's block cache emptied (user.logfs.drop_block_cache),
//   and no span read twice, so no read is served by an earlier one;
// - warm: every file read once first, then offsets at random;
// - block: the files read once (kernel caches dropped first), then reads
//   with O_DIRECT, which bypass the kernel's page cache: on logfs each
//   reaches the mount and its block cache, on ext4 the disk. Needs
//   --read_bytes to be a multiple of 512.
// Works on any directory, so one tool measures ext4, a FUSE passthrough and
// a logfs mount alike.
//
// Files: <dir>/bench-read-<i>.dat, `file_bytes` each, reused when they
// exist with that size (created, fsynced and closed otherwise, which seals
// them on logfs). Each 8-byte word holds a function of (file, offset), and
// every read checks its first word: a wrong byte fails the run.
//
// Per phase it prints the latency histogram of one read (or scan) in ns,
// ops/s, bytes/s and the mount's block-cache hit ratio when the mount
// reports one (user.logfs.stats: block_cache_hits, block_cache_misses),
// else "n/a" (also when no read reached the mount: the page cache served
// them all).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace logfs::bench {

struct ReadBenchOptions {
  std::string dir;
  int threads = 1;
  int files = 1;
  uint64_t file_bytes = 64ull << 20;
  uint64_t read_bytes = 4096;
  uint64_t scan_bytes = 0;   // 0: single random reads
  uint64_t ops = 0;          // per thread per phase; 0 with seconds == 0: 1000
  double seconds = 0;        // per phase, instead of ops
  std::string cache = "both";  // "cold", "warm", "block", "both" (cold, warm) or "all"
  bool keep = false;         // leave the files for the next run
  // Non-empty: also write the read latency chart (a series per phase,
  // bench/svg_plot.h) as SVG to this path.
  std::string plot;
};

// Returns the report. kInvalidArgument for bad options; kDataLoss if a
// read returned wrong bytes; errno statuses of failed syscalls (cold needs
// root for /proc/sys/vm/drop_caches); the errno of writing `plot`.
absl::StatusOr<std::string> RunReadBench(const ReadBenchOptions& options);

}  // namespace logfs::bench
