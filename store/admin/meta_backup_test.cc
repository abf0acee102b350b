// Backup and Bootstrap refuse what they must before dialling anyone: no
// address, a nonempty backup dir, a file in its place, an existing metadb
// without force; and a meta that does not answer leaves nothing behind.
#include "store/admin/meta_backup.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace logfs::admin {
namespace {

class MetaBackupArgsTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_meta_backup_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    // Nothing listens on port 1 of loopback: refused at once.
    options_.meta_addresses = {"127.0.0.1:1"};
    options_.rpc_timeout_ms = 1000;
    options_.open_applied_seq = [](const std::string&) -> absl::StatusOr<uint64_t> {
      ADD_FAILURE() << "nothing was fetched to open";
      return 0;
    };
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
  MetaBackupOptions options_;
};

TEST_F(MetaBackupArgsTest, RefusesBadTargetsBeforeDialling) {
  MetaBackupOptions none = options_;
  none.meta_addresses.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(Backup(none, dir_ + "/b").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Backup(options_, "").status()));
  std::filesystem::create_directory(dir_ + "/full");
  std::ofstream(dir_ + "/full/x") << "x";
  auto full = Backup(options_, dir_ + "/full");
  EXPECT_TRUE(absl::IsFailedPrecondition(full.status())) << full.status();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/full/x"));
  std::ofstream(dir_ + "/file") << "x";
  EXPECT_TRUE(absl::IsFailedPrecondition(Backup(options_, dir_ + "/file").status()));
  std::filesystem::create_directories(dir_ + "/data/metadb");
  auto exists = Bootstrap(options_, dir_ + "/data", /*force=*/false);
  EXPECT_TRUE(absl::IsFailedPrecondition(exists.status())) << exists.status();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/data/metadb"));
}

TEST_F(MetaBackupArgsTest, AMetaThatDoesNotAnswerLeavesNothing) {
  auto backup = Backup(options_, dir_ + "/b");
  EXPECT_TRUE(absl::IsUnavailable(backup.status())) << backup.status();
  EXPECT_TRUE(std::filesystem::is_empty(dir_ + "/b"));
  auto bootstrap = Bootstrap(options_, dir_ + "/data", /*force=*/false);
  EXPECT_TRUE(absl::IsUnavailable(bootstrap.status())) << bootstrap.status();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/metadb"));
}

}  // namespace
}  // namespace logfs::admin
