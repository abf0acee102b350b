#include "bench/cache_replay.h"

#include <cerrno>
#include <cstdio>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/block_trace.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"

namespace logfs::bench {
namespace {

// The synthetic trace: 4 Mi lookups; a hot set of 2,048 blocks (128 MiB at
// 64 KiB) read at random; a third of the lookups are scans of 16,384-block
// (1 GiB) segments read once.
std::vector<cache::BlockKey> ScanHot() {
  return cache::ScanWithHotSetTrace(4ull << 20, 2048, 16384, 1.0 / 3, /*seed=*/42);
}

std::string Ratio(const cache::ReplayResult& r) { return absl::StrFormat("%.3f", r.hit_ratio()); }

}  // namespace

absl::StatusOr<std::string> RunCacheReplay(const CacheReplayOptions& options) {
  if (options.traces.empty()) return PosixError(EINVAL, "no trace: --trace=FILE[,FILE...] or scan_hot");
  if (options.capacity_mib.empty()) return PosixError(EINVAL, "no capacity: --capacity_mib=N[,N...]");
  std::string out =
      "| trace | lookups | distinct blocks | cache (MiB) | LRU | segmented LRU | OPT |\n"
      "|---|--:|--:|--:|--:|--:|--:|\n";
  for (const std::string& name : options.traces) {
    cache::BlockTrace loaded;
    if (name == "scan_hot") {
      loaded.block_bytes = 64 << 10;
      loaded.keys = ScanHot();
    } else {
      ASSIGN_OR_RETURN(loaded, cache::ReadBlockTrace(name));
    }
    const std::vector<cache::BlockKey>& trace = loaded.keys;
    absl::flat_hash_set<cache::BlockKey> distinct(trace.begin(), trace.end());
    for (uint64_t mib : options.capacity_mib) {
      const uint64_t blocks = (mib << 20) / loaded.block_bytes;
      const auto lru = cache::ReplayBlockTrace(trace, cache::EvictionPolicy::kLru, blocks,
                                               options.shards);
      const auto slru = cache::ReplayBlockTrace(trace, cache::EvictionPolicy::kSegmentedLru,
                                                blocks, options.shards);
      const auto opt = cache::ReplayBeladyOpt(trace, blocks);
      const size_t slash = name.rfind('/');
      const std::string shown = slash == std::string::npos ? name : name.substr(slash + 1);
      absl::StrAppend(&out, "| ", shown, " | ", trace.size(), " | ", distinct.size(), " | ", mib,
                      " | ", Ratio(lru), " | ", Ratio(slru), " | ", Ratio(opt), " |\n");
    }
  }
  return out;
}

}  // namespace logfs::bench
