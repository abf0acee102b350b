// Pieces shared by the `logfs bench` workloads: CPU time of the logfs
// processes, the counters of a mount and of the segment servers, and
// "key=value" parsing. Thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
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

// The summed ServerStats counters of every live segment server that the
// meta server at `meta_address` lists. kUnavailable if meta or a server
// does not answer within 5 s.
absl::StatusOr<std::map<std::string, uint64_t>> SegdCounters(const std::string& meta_address);

// `after - before` per key of `after` (0 where `before` lacks it).
std::map<std::string, uint64_t> Delta(const std::map<std::string, uint64_t>& before,
                                      const std::map<std::string, uint64_t>& after);

// a / b, or 0 when b is 0.
double Ratio(double a, double b);

// Empties the kernel's page, dentry and inode caches (sync, then
// /proc/sys/vm/drop_caches = 3). Needs root; errno status otherwise.
absl::Status DropKernelCaches();

}  // namespace logfs::bench
