#include "store/meta/namespace/placement.h"

#include <algorithm>
#include <set>

#include "store/format/failure_domain.h"

namespace logfs::meta {
namespace {

// Takes, in order, the servers whose prefix at `levels` is not taken yet
// (by `kept` or an earlier choice), level by level from the outermost: a
// server in a rack not taken yet before a new host in a taken rack, so
// that the spread at every level above `levels` is as wide as the
// candidates allow, whatever their order. Then, while short, the rest in
// order.
std::vector<size_t> TakeDistinct(const std::vector<std::string>& domains, size_t levels,
                                 uint32_t replication, const std::vector<std::string>& kept) {
  std::vector<size_t> chosen;
  std::vector<bool> used(domains.size(), false);
  for (size_t level = 1; level <= levels; ++level) {
    // A server whose prefix at `level` is new has a new prefix at `levels`.
    std::set<std::string> taken;
    for (const auto& d : kept) taken.insert(format::DomainPrefix(d, level));
    for (size_t i : chosen) taken.insert(format::DomainPrefix(domains[i], level));
    for (size_t i = 0; i < domains.size() && chosen.size() < replication; ++i) {
      if (!used[i] && taken.insert(format::DomainPrefix(domains[i], level)).second) {
        chosen.push_back(i);
        used[i] = true;
      }
    }
  }
  // The distinct ones in order of preference, then the fill.
  std::sort(chosen.begin(), chosen.end());
  for (size_t i = 0; i < domains.size() && chosen.size() < replication; ++i) {
    if (!used[i]) chosen.push_back(i);
  }
  return chosen;
}

}  // namespace

std::vector<size_t> SpreadOverDomains(const std::vector<std::string>& domains, uint32_t replication,
                                      const std::vector<std::string>& kept) {
  return TakeDistinct(domains, format::SpreadLevel(domains, replication, kept), replication, kept);
}

std::string FailureDomainOf(const proto::RegisterServerRequest& record) {
  return record.failure_domain().empty() ? record.host() : record.failure_domain();
}

}  // namespace logfs::meta
