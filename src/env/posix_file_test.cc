// The env helpers without a crash (their durability under a power cut is
// tested on PowerCutFs in tests/power_cut_test.cc).
#include "src/env/posix_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace logfs::env {
namespace {

class PosixFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs-env-test-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  static std::string Contents(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string dir_;
};

TEST(DirnameTest, NamesTheDirectoryHoldingTheLastComponent) {
  EXPECT_EQ("a", Dirname("a/b"));
  EXPECT_EQ("a", Dirname("a/b/"));
  EXPECT_EQ("a", Dirname("a//b"));
  EXPECT_EQ("/", Dirname("/a"));
  EXPECT_EQ("/", Dirname("/"));
  EXPECT_EQ(".", Dirname("a"));
  EXPECT_EQ("/x/y", Dirname("/x/y/z"));
}

TEST_F(PosixFileTest, MakeDirsCreatesEveryMissingLevel) {
  const std::string deep = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(deep).ok());
  struct stat st;
  ASSERT_EQ(0, stat(deep.c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(MakeDirs(deep).ok());  // existing: fine
}

TEST_F(PosixFileTest, MakeDirsRefusesAFileInThePath) {
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/f", "x").ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, MakeDirs(dir_ + "/f").code());
  EXPECT_FALSE(MakeDirs(dir_ + "/f/g").ok());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, MakeDirs("").code());
}

TEST_F(PosixFileTest, WriteFileAtomicallyReplacesAndLeavesNoTempFile) {
  const std::string path = dir_ + "/state";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  EXPECT_EQ("two", Contents(path));
  EXPECT_NE(0, access((path + ".tmp").c_str(), F_OK));
}

TEST_F(PosixFileTest, WriteFileAtomicallyIntoAMissingDirectoryFails) {
  absl::Status s = WriteFileAtomically(dir_ + "/missing/state", "x");
  EXPECT_EQ(absl::StatusCode::kNotFound, s.code()) << s;
}

}  // namespace
}  // namespace logfs::env
