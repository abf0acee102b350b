// A segment server's failure domain: a path of levels, outermost first
// ("rack/host", or just "host"), given by `segd --failure_domain`. Meta's
// placement (store/meta/namespace/placement.h) spreads a segment's replicas over
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

// The domain prefix that two or more of `replica_domains` share although
// `live_domains` (every live, healthy server's domain) has a distinct one
// for each of them at the level placement spreads over (SpreadLevel of
// the live domains for that many replicas); "" when they are spread as
// placement would, or fewer than two. Sets *level and *distinct (distinct
// live domains at that level) unless "" is returned for fewer than two.
// fsck reports such a segment (MISPLACED) and meta's re-replication moves
// one of its replicas (docs/rpc.md "Re-replication").
std::string NeedlesslySharedDomain(const std::vector<std::string>& replica_domains,
                                   const std::vector<std::string>& live_domains, size_t* level,
                                   size_t* distinct);

// EINVAL (PosixError) unless `domain` is at most kFailureDomainBytesMax
// bytes of non-empty levels separated by '/'; "" is allowed (the host).
absl::Status ValidateFailureDomain(const std::string& domain);

}  // namespace logfs::format
