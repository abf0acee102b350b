// A segment server's failure domain: a path of levels, outermost first
// ("rack/host", or just "host"), given by `segd --failure_domain`. Meta's
// placement (store/meta/placement.h) spreads a segment's replicas over
// distinct domains at the highest level that has enough of them, as HDFS's
// rack-aware placement and Ceph's CRUSH failure-domain rule do; `logfs fsck`
// uses the same rule to report segments whose replicas share a domain they
// need not share. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace logfs::format {

// The first `levels` levels of `domain` ("r1/h2", 1 -> "r1"); all of it if
// it has fewer.
std::string DomainPrefix(const std::string& domain, size_t levels);

// How many levels `domain` has ("r1/h2" -> 2, "h2" -> 1, "" -> 1).
size_t DomainLevels(const std::string& domain);

// The number of leading levels at which `replication` new replicas can
// each take a domain of their own among `candidates`, beside the domains
// the `kept` replicas already take: the fewest levels (the highest level:
// racks before hosts) with at least |distinct kept| + replication distinct
// domains; the deepest level of any domain when none has that many.
size_t SpreadLevel(const std::vector<std::string>& candidates, uint32_t replication,
                   const std::vector<std::string>& kept = {});

// EINVAL (PosixError) unless `domain` is at most kFailureDomainBytesMax
// bytes of non-empty levels separated by '/'; "" is allowed (the host).
absl::Status ValidateFailureDomain(const std::string& domain);

}  // namespace logfs::format
