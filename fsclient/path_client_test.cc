#include "fsclient/path_client.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "src/status/posix_error.h"

namespace logfs::fsclient {
namespace {

using Names = std::vector<std::string>;

TEST(SplitPathTest, SplitsAbsolutePaths) {
  EXPECT_EQ(Names{}, *SplitPath("/"));
  EXPECT_EQ(Names({"a"}), *SplitPath("/a"));
  EXPECT_EQ(Names({"a", "b"}), *SplitPath("//a//b/"));
}

TEST(SplitPathTest, RefusesWhatLogfsCannotResolve) {
  EXPECT_EQ(EINVAL, AttachedErrno(SplitPath("").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(SplitPath("a/b").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(SplitPath("/a/./b").status()));
  EXPECT_EQ(EINVAL, AttachedErrno(SplitPath("/a/..").status()));
  EXPECT_EQ(ENAMETOOLONG, AttachedErrno(SplitPath("/" + std::string(256, 'n')).status()));
  EXPECT_TRUE(SplitPath("/" + std::string(255, 'n')).ok());
}

}  // namespace
}  // namespace logfs::fsclient
