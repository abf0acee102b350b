// Pieces shared by the `logfs bench` workloads: CPU time of the logfs
// processes, the counters of a mount and of the segment servers, and
// "key=value" parsing. Thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace logfs::bench {

// CPU seconds (user + system) used so far by each live process whose
// command name starts with "logfs" (a copy such as "logfs.new" counts), by
// pid; this process only if `include_self`.
std::map<int, double> LogfsCpuSeconds(bool include_self);

// CPU used between two LogfsCpuSeconds snapshots: by processes alive in
// both, plus all of what processes started meanwhile used. A process that
// exited meanwhile is missed.
double CpuSecondsBetween(const std::map<int, double>& before, const std::map<int, double>& after);

// "a=1 b=2\n" -> {a: 1, b: 2}; tokens without '=' or a number are skipped.
std::map<std::string, uint64_t> ParseCounters(absl::string_view text);

// The value of extended attribute `name` of `path`; nullopt if it has none
// (not a logfs path).
std::optional<std::string> GetXattr(const std::string& path, const std::string& name);

// The ServerStats counters of the live segment servers that the meta
// server at `meta_address` lists: of each that answered within 5 s, by
// server id, and the ids of those that did not.
struct SegdSnapshot {
  std::map<uint64_t, std::map<std::string, uint64_t>> answered;
  std::set<uint64_t> unanswered;
};
// kUnavailable if meta does not answer; a server that does not is only
// left out (SegdSnapshot::unanswered).
absl::StatusOr<SegdSnapshot> SegdCounters(const std::string& meta_address);

// The counters' growth between two snapshots, summed over the servers
// that answered both times (`answered` of `servers`: every server live in
// either snapshot).
struct SegdDelta {
  std::map<std::string, uint64_t> sum;
  int answered = 0;
  int servers = 0;
};
SegdDelta SegdCountersBetween(const SegdSnapshot& before, const SegdSnapshot& after);

// `after - before` per key of `after` (0 where `before` lacks it).
std::map<std::string, uint64_t> Delta(const std::map<std::string, uint64_t>& before,
                                      const std::map<std::string, uint64_t>& after);

// a / b, or 0 when b is 0.
double Ratio(double a, double b);

// Empties the kernel's page, dentry and inode caches (sync, then
// /proc/sys/vm/drop_caches = 3). Needs root; errno status otherwise.
absl::Status DropKernelCaches();

}  // namespace logfs::bench
