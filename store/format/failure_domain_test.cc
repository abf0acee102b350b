#include "store/format/failure_domain.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "src/status/posix_error.h"

namespace logfs::format {
namespace {

TEST(FailureDomainTest, PrefixesAndLevels) {
  EXPECT_EQ("r1", DomainPrefix("r1/h2", 1));
  EXPECT_EQ("r1/h2", DomainPrefix("r1/h2", 2));
  EXPECT_EQ("r1/h2", DomainPrefix("r1/h2", 5));
  EXPECT_EQ("h2", DomainPrefix("h2", 1));
  EXPECT_EQ(2u, DomainLevels("r1/h2"));
  EXPECT_EQ(1u, DomainLevels("h2"));
  EXPECT_EQ(1u, DomainLevels(""));
}

TEST(FailureDomainTest, SpreadLevelIsTheHighestLevelWithEnoughDomains) {
  // 3 racks: spread over racks.
  EXPECT_EQ(1u, SpreadLevel({"r1/a", "r1/b", "r2/c", "r3/d"}, 3));
  // 2 racks, 4 hosts: spread over hosts.
  EXPECT_EQ(2u, SpreadLevel({"r1/a", "r1/b", "r2/c", "r2/d"}, 3));
  // Not enough anywhere: the deepest level.
  EXPECT_EQ(2u, SpreadLevel({"r1/a", "r1/a"}, 3));
  // Kept replicas take their domains: one more replica beside r1 and r2
  // needs a third rack.
  EXPECT_EQ(1u, SpreadLevel({"r3/x"}, 1, {"r1/a", "r2/b"}));
  EXPECT_EQ(2u, SpreadLevel({"r1/x"}, 1, {"r1/a", "r1/b"}));
}

TEST(FailureDomainTest, DomainsAreCheckedAtRegistration) {
  EXPECT_TRUE(ValidateFailureDomain("").ok());
  EXPECT_TRUE(ValidateFailureDomain("rack1/host3").ok());
  for (const std::string& bad :
       std::vector<std::string>{"/h", "r//h", "r/", std::string(256, 'x')}) {
    EXPECT_EQ(EINVAL, AttachedErrno(ValidateFailureDomain(bad))) << bad;
  }
}

}  // namespace
}  // namespace logfs::format
