// The cluster secret's file: refused when group or others may access it,
// or when too short; trailing newline dropped; created with mode 0600.
#include "src/env/secret_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace logfs::env {
namespace {

class SecretFileTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/secret_file_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& contents, mode_t mode) {
    const std::string path = dir_ + "/secret";
    std::filesystem::remove(path);
    std::ofstream(path) << contents;
    EXPECT_EQ(0, ::chmod(path.c_str(), mode));
    return path;
  }
  std::string dir_;
};

const std::string kHex = "8d2f63c1b5a7e90412f3d6c8b0a9e7f18d2f63c1b5a7e90412f3d6c8b0a9e7f1";

TEST_F(SecretFileTest, OwnerOnlyFileIsReadWithoutItsNewline) {
  auto secret = ReadSecretFile(Write(kHex + "\n", 0600));
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(kHex, *secret);
  EXPECT_TRUE(ReadSecretFile(Write(kHex, 0400)).ok());
}

TEST_F(SecretFileTest, LooseModesAreRefusedNamingPathAndMode) {
  for (mode_t mode : {0640, 0604, 0660, 0602, 0620, 0644}) {
    const std::string path = Write(kHex, mode);
    auto secret = ReadSecretFile(path);
    EXPECT_EQ(absl::StatusCode::kPermissionDenied, secret.status().code()) << std::oct << mode;
    char octal[8];
    std::snprintf(octal, sizeof(octal), "%04o", mode);
    EXPECT_NE(std::string::npos, secret.status().message().find(path)) << secret.status();
    EXPECT_NE(std::string::npos, secret.status().message().find(octal)) << secret.status();
  }
}

TEST_F(SecretFileTest, ShortOrEmptySecretIsRefused) {
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, ReadSecretFile(Write("", 0600)).status().code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition,
            ReadSecretFile(Write(std::string(31, 'a') + "\n\n", 0600)).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, ReadSecretFile(dir_ + "/none").status().code());
}

TEST_F(SecretFileTest, CreatedFileIsOwnerOnlyAndNeverReplaced) {
  const std::string path = dir_ + "/made";
  ::umask(0);
  ASSERT_TRUE(CreateSecretFile(path, kHex).ok());
  ::umask(022);
  struct stat st;
  ASSERT_EQ(0, ::stat(path.c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 07777);
  EXPECT_EQ(kHex, *ReadSecretFile(path));
  EXPECT_EQ(absl::StatusCode::kAlreadyExists, CreateSecretFile(path, "other").code());
}

}  // namespace
}  // namespace logfs::env
