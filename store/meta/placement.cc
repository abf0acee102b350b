#include "store/meta/placement.h"

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/status/posix_error.h"
#include "store/format/limits.h"

namespace logfs::meta {
namespace {

// The first `levels` levels of `domain` ("r1/h2", 1 -> "r1"); all of it if
// it has fewer.
std::string Prefix(const std::string& domain, size_t levels) {
  size_t end = 0;
  for (size_t i = 0; i < levels; ++i) {
    end = domain.find('/', i == 0 ? 0 : end + 1);
    if (end == std::string::npos) return domain;
  }
  return domain.substr(0, end);
}

size_t Levels(const std::string& domain) {
  return static_cast<size_t>(std::count(domain.begin(), domain.end(), '/')) + 1;
}

// Takes, in order, the servers whose prefix at `levels` is not taken yet
// (by `kept` or an earlier choice); then, while short, the rest in order.
std::vector<size_t> TakeDistinct(const std::vector<std::string>& domains, size_t levels,
                                 uint32_t replication, const std::vector<std::string>& kept) {
  std::vector<size_t> chosen;
  std::vector<bool> used(domains.size(), false);
  std::set<std::string> taken;
  for (const auto& d : kept) taken.insert(Prefix(d, levels));
  for (size_t i = 0; i < domains.size() && chosen.size() < replication; ++i) {
    if (taken.insert(Prefix(domains[i], levels)).second) {
      chosen.push_back(i);
      used[i] = true;
    }
  }
  for (size_t i = 0; i < domains.size() && chosen.size() < replication; ++i) {
    if (!used[i]) chosen.push_back(i);
  }
  return chosen;
}

}  // namespace

std::vector<size_t> SpreadOverDomains(const std::vector<std::string>& domains, uint32_t replication,
                                      const std::vector<std::string>& kept) {
  size_t deepest = 1;
  for (const auto& d : domains) deepest = std::max(deepest, Levels(d));
  for (const auto& d : kept) deepest = std::max(deepest, Levels(d));
  // The highest level with a distinct domain for each new replica beyond
  // those the kept ones occupy; the full path (the host) if none has.
  for (size_t levels = 1; levels <= deepest; ++levels) {
    std::set<std::string> distinct, distinct_kept;
    for (const auto& d : kept) distinct_kept.insert(Prefix(d, levels));
    distinct = distinct_kept;
    for (const auto& d : domains) distinct.insert(Prefix(d, levels));
    if (distinct.size() >= distinct_kept.size() + replication) {
      return TakeDistinct(domains, levels, replication, kept);
    }
  }
  return TakeDistinct(domains, deepest, replication, kept);
}

std::string FailureDomainOf(const proto::RegisterServerRequest& record) {
  return record.failure_domain().empty() ? record.host() : record.failure_domain();
}

absl::Status ValidateFailureDomain(const std::string& domain) {
  if (domain.size() > format::kFailureDomainBytesMax) {
    return PosixError(EINVAL, absl::StrCat("failure domain longer than ",
                                           format::kFailureDomainBytesMax, " bytes"));
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

}  // namespace logfs::meta
