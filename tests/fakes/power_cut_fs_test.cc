// Tests of the power-cut file system itself: it must keep exactly what was
// synced, and drop exactly what was not, or the crash tests built on it
// prove nothing. Needs root and /dev/fuse.
#include "tests/fakes/power_cut_fs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class PowerCutFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-powercutfs-test-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    root_ = tmpl;
    ASSERT_EQ(0, mkdir((root_ + "/mnt").c_str(), 0755));
    ASSERT_EQ(0, mkdir((root_ + "/backing").c_str(), 0755));
    auto fs = PowerCutFs::Mount(root_ + "/mnt", root_ + "/backing");
    ASSERT_TRUE(fs.ok()) << fs.status();
    fs_ = std::move(*fs);
  }
  void TearDown() override {
    fs_.reset();
    RunCommand("rm -rf " + root_);
  }

  std::string P(const std::string& relative) const { return root_ + "/mnt/" + relative; }

  static void Sync(const std::string& path) {
    int fd = open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
    EXPECT_EQ(0, fsync(fd)) << path << ": " << strerror(errno);
    close(fd);
  }
  // Writes `data` at the end of `path` (created if missing), then fsyncs
  // the file when `sync`.
  static void Append(const std::string& path, const std::string& data, bool sync) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
    ASSERT_EQ(static_cast<ssize_t>(data.size()), write(fd, data.data(), data.size()));
    if (sync) {
      EXPECT_EQ(0, fsync(fd));
    }
    close(fd);
  }
  static bool Exists(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0;
  }
  static std::string Contents(const std::string& path) {
    auto data = ReadFile(path);
    return data.ok() ? *data : "<" + data.status().ToString() + ">";
  }

  std::string root_;
  std::unique_ptr<PowerCutFs> fs_;
};

TEST_F(PowerCutFsTest, NamesOfUnsyncedDirectoriesAreDropped) {
  // A synced file in a directory whose own name was never synced is gone
  // with the directory.
  ASSERT_EQ(0, mkdir(P("d").c_str(), 0755));
  Append(P("d/f"), "abc", /*sync=*/true);
  Sync(P("d"));
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_FALSE(Exists(P("d")));
  EXPECT_GE(fs_->stats().names_dropped, 1u);
}

TEST_F(PowerCutFsTest, SyncedBytesAndNamesSurviveUnsyncedOnesDoNot) {
  ASSERT_EQ(0, mkdir(P("d").c_str(), 0755));
  Sync(P(""));
  Append(P("d/f"), "abc", /*sync=*/true);
  Sync(P("d"));
  Append(P("d/f"), "def", /*sync=*/false);  // bytes not synced
  Append(P("d/g"), "ghi", /*sync=*/true);   // name not synced
  ASSERT_EQ("abcdef", Contents(P("d/f")));
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_EQ("abc", Contents(P("d/f")));
  EXPECT_FALSE(Exists(P("d/g")));
  EXPECT_EQ(1u, fs_->stats().files_rolled_back);
}

TEST_F(PowerCutFsTest, RenameAndUnlinkNeedTheDirectorySync) {
  // (a) A replace by rename, file synced, directory not: the old content
  // is back and the temp name too. (b) The same with the directory synced
  // keeps the new one. (c) An unsynced unlink is undone.
  Append(P("CURRENT"), "old", /*sync=*/true);
  Sync(P(""));
  Append(P("CURRENT.tmp"), "new", /*sync=*/true);
  ASSERT_EQ(0, rename(P("CURRENT.tmp").c_str(), P("CURRENT").c_str()));
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_EQ("old", Contents(P("CURRENT")));
  EXPECT_FALSE(Exists(P("CURRENT.tmp")));

  Append(P("CURRENT.tmp"), "new", /*sync=*/true);
  ASSERT_EQ(0, rename(P("CURRENT.tmp").c_str(), P("CURRENT").c_str()));
  Sync(P(""));
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_EQ("new", Contents(P("CURRENT")));

  ASSERT_EQ(0, unlink(P("CURRENT").c_str()));
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_EQ("new", Contents(P("CURRENT")));
}

TEST_F(PowerCutFsTest, OverwritesAndTruncationsAreRolledBack) {
  const std::string synced = Pattern(10000, 1);
  Append(P("f"), synced, /*sync=*/true);
  Sync(P(""));
  int fd = open(P("f").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(5, pwrite(fd, "XXXXX", 5, 4094));  // across a block boundary
  ASSERT_EQ(0, ftruncate(fd, 100));
  ASSERT_EQ(0, ftruncate(fd, 20000));
  ASSERT_EQ(3, pwrite(fd, "end", 3, 20000));
  close(fd);
  ASSERT_TRUE(fs_->PowerCut().ok());
  EXPECT_TRUE(Contents(P("f")) == synced) << "content differs after the power cut";
}

TEST_F(PowerCutFsTest, PowerCutRefusesWhileInUse) {
  int fd = open(P("f").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(fs_->PowerCut().ok());
  close(fd);
  EXPECT_TRUE(fs_->PowerCut().ok());
}

}  // namespace
}  // namespace logfs::testing
