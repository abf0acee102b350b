// `logfs bench cache-replay`: the block cache's eviction policy against
// plain LRU, measured by replaying the same lookups through each
// (cache/block_trace.h), at several capacities. Traces come from a mount
// run with --block_cache_trace=FILE, or are made up: "scan_hot" is a hot
// set read at random with one-pass scans mixed in. Prints one markdown
// table: per trace and capacity, the hit ratio of LRU, of segmented LRU
// (the mount's policy) and of Belady's OPT (the best possible; it may
// decline to cache a block), and the lookups and distinct blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace logfs::bench {

struct CacheReplayOptions {
  // Trace files, or "scan_hot" for the synthetic trace.
  std::vector<std::string> traces;
  // Cache sizes to replay at (MiB of each trace's blocks; scan_hot's are
  // 64 KiB).
  std::vector<uint64_t> capacity_mib = {16, 64, 256};
  int shards = 16;  // as the mount's cache
};

// The table. Errors: a trace that cannot be read (its errno, EINVAL for
// a file that is not a trace), no traces or capacities (EINVAL).
absl::StatusOr<std::string> RunCacheReplay(const CacheReplayOptions& options);

}  // namespace logfs::bench
