// FaultFileSystem's own contract: what SimulateCrash keeps and drops
// (contents, names), and that each switch fails what it says.
#include "tests/fakes/fault_file_system.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "src/env/posix_file.h"
#include "src/status/posix_error.h"

namespace logfs::testing {
namespace {

class FaultFileSystemTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-faultfs-XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::unique_ptr<env::WritableFile> Open(const std::string& name, bool create = true) {
    auto file = fs_.NewWritableFile(dir_ + "/" + name, env::WritableFileOptions{create});
    EXPECT_TRUE(file.ok()) << file.status();
    return file.ok() ? std::move(*file) : nullptr;
  }
  // The file's bytes as the POSIX file system sees them ("<none>" if missing).
  std::string Contents(const std::string& name) {
    auto text = env::ReadSmallFile(dir_ + "/" + name, 1 << 20);
    return text.ok() ? *text : "<none>";
  }
  std::vector<std::string> Names() {
    auto names = fs_.ListDir(dir_);
    EXPECT_TRUE(names.ok());
    std::sort(names->begin(), names->end());
    return *names;
  }

  FaultFileSystem fs_;
  std::string dir_;
};

TEST_F(FaultFileSystemTest, CrashKeepsSyncedBytesAndUndoesLaterOverwritesAndGrowth) {
  auto file = Open("f");
  ASSERT_TRUE(fs_.SyncDir(dir_).ok());
  ASSERT_TRUE(file->WriteAt(0, "0123456789").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->WriteAt(2, "ab").ok());     // overwrite, unsynced
  ASSERT_TRUE(file->WriteAt(10, "tail").ok());  // growth, unsynced
  ASSERT_TRUE(file->Truncate(5).ok());          // cut, unsynced
  ASSERT_TRUE(file->WriteAt(3, "XYZWV").ok());  // over the cut, unsynced
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ("0123456789", Contents("f"));
  // The old handle is dead; a new one works.
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, file->WriteAt(0, "x").code());
  EXPECT_TRUE(file->Close().ok());
  auto again = Open("f", /*create=*/false);
  ASSERT_TRUE(again->WriteAt(0, "z").ok());
}

TEST_F(FaultFileSystemTest, DurableWriteKeepsItsRangeOnly) {
  auto file = Open("f");
  ASSERT_TRUE(fs_.SyncDir(dir_).ok());
  ASSERT_TRUE(file->WriteAt(0, "aaaa").ok());
  ASSERT_TRUE(file->Sync().ok());
  ASSERT_TRUE(file->WriteAt(0, "bb").ok());         // unsynced
  ASSERT_TRUE(file->WriteAtDurably(6, "cc").ok());  // durable, past a hole
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ(std::string("aaaa\0\0cc", 8), Contents("f"));
}

TEST_F(FaultFileSystemTest, CrashUndoesNameChangesNotSyncedByTheirDirectory) {
  ASSERT_TRUE(env::WriteFileAtomically(fs_, dir_ + "/kept", "old").ok());
  ASSERT_TRUE(env::WriteFileAtomically(fs_, dir_ + "/gone", "g").ok());
  // From here on no directory sync.
  auto unsynced_name = Open("new");
  ASSERT_TRUE(unsynced_name->Sync().ok());  // contents synced, name not
  // Replaced and removed: both come back.
  auto tmp = Open("kept.tmp");
  ASSERT_TRUE(tmp->WriteAt(0, "new").ok());
  ASSERT_TRUE(tmp->Sync().ok());
  ASSERT_TRUE(fs_.Rename(dir_ + "/kept.tmp", dir_ + "/kept").ok());
  ASSERT_TRUE(fs_.Remove(dir_ + "/gone").ok());
  EXPECT_EQ((std::vector<std::string>{"kept", "new"}), Names());  // backups hidden
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ((std::vector<std::string>{"gone", "kept"}), Names());
  EXPECT_EQ("old", Contents("kept"));
  EXPECT_EQ("g", Contents("gone"));
}

TEST_F(FaultFileSystemTest, DirectorySyncMakesNamesDurable) {
  ASSERT_TRUE(env::MakeDirs(fs_, dir_ + "/a/b").ok());
  ASSERT_TRUE(env::WriteFileAtomically(fs_, dir_ + "/a/b/f", "one").ok());
  ASSERT_TRUE(env::WriteFileAtomically(fs_, dir_ + "/a/b/f", "two").ok());
  ASSERT_TRUE(fs_.SimulateCrash().ok());
  EXPECT_EQ("two", Contents("a/b/f"));
  auto names = fs_.ListDir(dir_ + "/a/b");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ((std::vector<std::string>{"f"}), *names);
}

TEST_F(FaultFileSystemTest, SwitchesFailWhatTheyNameAndNothingElse) {
  auto f = Open("f");
  auto g = Open("g");
  fs_.FailWrites(ENOSPC, "/f");
  absl::Status full = f->WriteAt(0, "x");
  EXPECT_EQ(absl::StatusCode::kResourceExhausted, full.code());
  EXPECT_EQ(ENOSPC, AttachedErrno(full));
  EXPECT_TRUE(g->WriteAt(0, "x").ok());
  fs_.FailSyncs("/g");
  EXPECT_EQ(EIO, AttachedErrno(g->Sync()));
  EXPECT_EQ(EIO, AttachedErrno(g->WriteAtDurably(0, "y")));
  fs_.FailCloses("/g");
  EXPECT_EQ(EIO, AttachedErrno(g->Close()));
  EXPECT_EQ(4u, fs_.faults_injected());
  fs_.ClearFaults();
  EXPECT_TRUE(f->WriteAt(0, "x").ok());
  EXPECT_TRUE(f->Sync().ok());
  EXPECT_EQ(1u, fs_.file_syncs("/f"));
  env::WritableFileOptions direct;
  direct.direct_io = true;
  EXPECT_EQ(EINVAL, AttachedErrno(fs_.NewWritableFile(dir_ + "/f", direct).status()));
}

}  // namespace
}  // namespace logfs::testing
