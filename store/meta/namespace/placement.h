// Spreading a segment's replicas over failure domains. A server's domain
// is a path, outermost level first ("rack/host", or "host"); placement
// takes distinct domains at the highest level that has enough of them
// (distinct racks when there are at least `replication` racks among the
// candidates, else distinct hosts), as HDFS's rack-aware placement and
// Ceph's CRUSH failure-domain rule do; where no level has enough, it
// takes as many distinct hosts as there are and fills up with the
// remaining servers. When it spreads over hosts, it still takes every
// rack there is before a second host of one rack, so the spread at each
// level is as wide as the candidates allow whatever their order of
// preference. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "store/format/logfs.pb.h"

namespace logfs::meta {

// The indexes into `domains` of the `replication` servers to use (fewer if
// there are fewer servers), taken in `domains`' order (the caller's
// preference: most free space first) subject to the spread above: the
// ones in distinct domains in that order, then the fill-ups.
// `kept`: the domains of replicas the segment keeps (re-replication adds
// to them): the spread counts them as taken.
std::vector<size_t> SpreadOverDomains(const std::vector<std::string>& domains, uint32_t replication,
                                      const std::vector<std::string>& kept = {});

// A registered server's failure domain: its failure_domain, else its
// host name (servers that registered before domains existed).
std::string FailureDomainOf(const proto::RegisterServerRequest& record);

}  // namespace logfs::meta
