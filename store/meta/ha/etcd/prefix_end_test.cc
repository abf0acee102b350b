// PrefixEnd (etcd_client.h) against etcd's clientv3.GetPrefixRangeEnd rule.
#include <gtest/gtest.h>

#include <string>

#include "store/meta/ha/etcd/etcd_client.h"

namespace logfs::etcd {
namespace {

TEST(PrefixEndTest, IncrementsTheLastByte) {
  EXPECT_EQ("/logfs/meta/journam", PrefixEnd("/logfs/meta/journal"));
  EXPECT_EQ("/logfs/meta0", PrefixEnd("/logfs/meta/"));
  EXPECT_EQ("b", PrefixEnd("a"));
}

TEST(PrefixEndTest, DropsTrailingFfBytes) {
  EXPECT_EQ("b", PrefixEnd(std::string("a\xff\xff", 3)));
  EXPECT_EQ(std::string("a\x01", 2), PrefixEnd(std::string("a\x00", 2)));
  EXPECT_EQ(std::string("\xff\x7f", 2), PrefixEnd(std::string("\xff\x7e\xff", 3)));
}

TEST(PrefixEndTest, NoUpperBoundMeansEveryKeyFromThePrefixOn) {
  EXPECT_EQ(std::string(1, '\0'), PrefixEnd(""));
  EXPECT_EQ(std::string(1, '\0'), PrefixEnd(std::string("\xff\xff", 2)));
}

// Every key with the prefix sorts in [prefix, PrefixEnd(prefix)), and the
// first key without it (in byte order) does not.
TEST(PrefixEndTest, CoversExactlyThePrefixedKeys) {
  const std::string prefix = "/j/";
  const std::string end = PrefixEnd(prefix);
  for (const std::string& key :
       {std::string("/j/"), std::string("/j/0"), std::string("/j/\xff\xff", 5)}) {
    EXPECT_TRUE(prefix <= key && key < end) << key;
  }
  for (const std::string key : {"/j", "/j0", "/k", "/i/zzz"}) {
    EXPECT_FALSE(prefix <= key && key < end) << key;
  }
}

}  // namespace
}  // namespace logfs::etcd
