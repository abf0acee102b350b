#include "src/util/crc32c.h"

#include <gtest/gtest.h>

namespace logfs::util {
namespace {

TEST(Crc32cTest, KnownVectors) {
  // From RFC 3720 B.4 and LevelDB's crc32c_test.
  char zeros[32] = {0};
  EXPECT_EQ(0x8a9136aau, Crc32c(zeros, sizeof(zeros)));
  EXPECT_EQ(0xe3069283u, Crc32c("123456789", 9));
  EXPECT_EQ(Crc32c("hello world", 11), Crc32cExtend(Crc32c("hello ", 6), "world", 5));
}

}  // namespace
}  // namespace logfs::util
