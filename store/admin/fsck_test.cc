#include "store/admin/fsck.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace logfs::admin {
namespace {

TEST(FsckTest, ReplicasSharingARackAreMisplacedWhenThreeRacksAreLive) {
  size_t level = 0, distinct = 0;
  const std::vector<std::string> live = {"r1/a", "r1/b", "r2/c", "r3/d"};
  EXPECT_EQ("r1", NeedlesslySharedDomain({"r1/a", "r1/b", "r2/c"}, live, &level, &distinct));
  EXPECT_EQ(1u, level);
  EXPECT_EQ(3u, distinct);
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a", "r2/c", "r3/d"}, live, &level, &distinct));
}

TEST(FsckTest, WithTwoRacksOnlyDistinctHostsAreNeeded) {
  size_t level = 0, distinct = 0;
  const std::vector<std::string> live = {"r1/a", "r1/b", "r2/c", "r2/d"};
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a", "r1/b", "r2/c"}, live, &level, &distinct));
  EXPECT_EQ(2u, level);
  // Two replicas on one host while other hosts have room.
  EXPECT_EQ("r1/a", NeedlesslySharedDomain({"r1/a", "r1/a", "r2/c"}, live, &level, &distinct));
}

TEST(FsckTest, SharingThatNoLevelCanAvoidIsNotReported) {
  size_t level = 0, distinct = 0;
  // One host holds every server: the replicas must share it.
  EXPECT_EQ("", NeedlesslySharedDomain({"h", "h", "h"}, {"h", "h", "h"}, &level, &distinct));
  // A single replica shares nothing.
  EXPECT_EQ("", NeedlesslySharedDomain({"r1/a"}, {"r1/a", "r2/b"}, &level, &distinct));
}

}  // namespace
}  // namespace logfs::admin
