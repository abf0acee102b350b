#include "store/format/failure_domain.h"

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/status/posix_error.h"
#include "store/format/limits.h"

namespace logfs::format {

std::string DomainPrefix(const std::string& domain, size_t levels) {
  size_t end = 0;
  for (size_t i = 0; i < levels; ++i) {
    end = domain.find('/', i == 0 ? 0 : end + 1);
    if (end == std::string::npos) return domain;
  }
  return domain.substr(0, end);
}

size_t DomainLevels(const std::string& domain) {
  return static_cast<size_t>(std::count(domain.begin(), domain.end(), '/')) + 1;
}

size_t SpreadLevel(const std::vector<std::string>& candidates, uint32_t replication,
                   const std::vector<std::string>& kept) {
  size_t deepest = 1;
  for (const auto& d : candidates) deepest = std::max(deepest, DomainLevels(d));
  for (const auto& d : kept) deepest = std::max(deepest, DomainLevels(d));
  for (size_t levels = 1; levels <= deepest; ++levels) {
    std::set<std::string> distinct_kept;
    for (const auto& d : kept) distinct_kept.insert(DomainPrefix(d, levels));
    std::set<std::string> distinct = distinct_kept;
    for (const auto& d : candidates) distinct.insert(DomainPrefix(d, levels));
    if (distinct.size() >= distinct_kept.size() + replication) return levels;
  }
  return deepest;
}

std::string NeedlesslySharedDomain(const std::vector<std::string>& replica_domains,
                                   const std::vector<std::string>& live_domains, size_t* level,
                                   size_t* distinct) {
  if (replica_domains.size() < 2) return "";
  const auto n = static_cast<uint32_t>(replica_domains.size());
  *level = SpreadLevel(live_domains, n);
  std::set<std::string> live;
  for (const auto& d : live_domains) live.insert(DomainPrefix(d, *level));
  *distinct = live.size();
  if (live.size() < n) return "";  // no level has room for a spread
  std::set<std::string> seen;
  for (const auto& d : replica_domains) {
    std::string prefix = DomainPrefix(d, *level);
    if (!seen.insert(prefix).second) return prefix;
  }
  return "";
}

absl::Status ValidateFailureDomain(const std::string& domain) {
  if (domain.size() > kFailureDomainBytesMax) {
    return PosixError(
        EINVAL, absl::StrCat("failure domain longer than ", kFailureDomainBytesMax, " bytes"));
  }
  if (domain.empty()) return absl::OkStatus();
  for (absl::string_view level : absl::StrSplit(domain, '/')) {
    if (level.empty()) {
      return PosixError(
          EINVAL, absl::StrCat("failure domain '", domain, "' has an empty level (use rack/host)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace logfs::format
