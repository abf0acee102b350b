// `logfs meta backup` and `logfs meta bootstrap` against a real cluster
// (issue 14 item 2): files written through a mount are in the backup and
// in a bootstrapped database (opened as a MetadataDb); an unreachable
// first address is skipped; a nonempty backup dir, an existing metadb
// without --force, and --force on a data dir whose meta runs are refused;
// --force moves the old database aside; bad arguments get one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/meta/db/metadata_db.h"
#include "store/meta/namespace/namespace.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class MetaBackupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mc = MountedCluster::Start({});
    ASSERT_TRUE(mc.ok()) << mc.status();
    mc_ = std::move(*mc);
    // An address nothing listens on, tried first.
    meta_list_ = absl::StrCat("127.0.0.1:1,", mc_->cluster().meta_address());
    std::filesystem::create_directory(mc_->Path("dir"));
    std::ofstream(mc_->Path("a")) << "alpha";
    std::ofstream(mc_->Path("dir/b")) << Pattern(300000, 1);
    ASSERT_EQ(0, RunCommand("sync").exit_code);
  }
  std::string Logfs(const std::string& args) { return LogfsBinary() + " " + args + " 2>&1"; }

  // The names of the root and of dir/ in the database at `path`, which
  // are those written in SetUp.
  void ExpectNamespace(const std::string& path) {
    auto db = meta::MetadataDb::Open({path});
    ASSERT_TRUE(db.ok()) << db.status();
    auto a = (*db)->GetDirEntry(meta::kRootIno, "a");
    ASSERT_TRUE(a.ok()) << a.status();
    auto dir = (*db)->GetDirEntry(meta::kRootIno, "dir");
    ASSERT_TRUE(dir.ok()) << dir.status();
    auto b = (*db)->GetDirEntry(dir->ino(), "b");
    ASSERT_TRUE(b.ok()) << b.status();
    auto inode = (*db)->GetInode(b->ino());
    ASSERT_TRUE(inode.ok()) << inode.status();
    EXPECT_EQ(300000u, inode->attr().size());
    EXPECT_GE(*(*db)->CountInodes(), 4u);  // root, a, dir, b
  }

  std::unique_ptr<MountedCluster> mc_;
  std::string meta_list_;
};

TEST_F(MetaBackupTest, BackupHoldsTheNamespaceAndRefusesANonemptyDir) {
  const std::string backup = mc_->root() + "/backup";
  auto run = RunCommand(Logfs(absl::StrCat("meta backup --meta=", meta_list_, " ", backup)));
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "backed up checkpoint")) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, mc_->cluster().meta_address())) << run.output;
  // Again into the same, now nonempty, dir: refused, nothing changed.
  auto again = RunCommand(Logfs(absl::StrCat("meta backup --meta=", meta_list_, " ", backup)));
  EXPECT_EQ(1, again.exit_code) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output, "is not empty")) << again.output;
  ExpectNamespace(backup);
  // A second backup while the cluster serves, as a fresh meta would open it.
  const std::string copy = mc_->root() + "/backup2";
  ASSERT_EQ(
      0, RunCommand(Logfs(absl::StrCat("meta backup --meta=", meta_list_, " ", copy))).exit_code);
  ExpectNamespace(copy);
}

TEST_F(MetaBackupTest, BootstrapMakesADatabaseAndKeepsTheOldOne) {
  const std::string data_dir = mc_->root() + "/replica";
  const std::string bootstrap =
      absl::StrCat("meta bootstrap --meta=", meta_list_, " --data_dir=", data_dir);
  auto run = RunCommand(Logfs(bootstrap));
  ASSERT_EQ(0, run.exit_code) << run.output;
  EXPECT_TRUE(absl::StrContains(run.output, "bootstrapped")) << run.output;
  EXPECT_FALSE(std::filesystem::exists(data_dir + "/metadb.bootstrap"));
  ExpectNamespace(data_dir + "/metadb");
  // metadb exists now: refused without --force.
  auto refused = RunCommand(Logfs(bootstrap));
  EXPECT_EQ(1, refused.exit_code) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "exists; --force")) << refused.output;
  // With --force the old one is moved aside, not deleted.
  std::ofstream(data_dir + "/metadb/marker") << "old";
  auto forced = RunCommand(Logfs(bootstrap + " --force"));
  ASSERT_EQ(0, forced.exit_code) << forced.output;
  int old_dbs = 0;
  for (const auto& entry : std::filesystem::directory_iterator(data_dir)) {
    const std::string name = entry.path().filename();
    if (name.rfind("metadb.old-", 0) != 0) continue;
    ++old_dbs;
    EXPECT_TRUE(std::filesystem::exists(entry.path() / "marker")) << name;
  }
  EXPECT_EQ(1, old_dbs);
  EXPECT_FALSE(std::filesystem::exists(data_dir + "/metadb/marker"));
  ExpectNamespace(data_dir + "/metadb");
  // The running meta's own data dir: refused even with --force.
  const std::string live = mc_->root() + "/data/meta";
  auto busy = RunCommand(
      Logfs(absl::StrCat("meta bootstrap --meta=", meta_list_, " --data_dir=", live, " --force")));
  EXPECT_EQ(1, busy.exit_code) << busy.output;
  EXPECT_TRUE(absl::StrContains(busy.output, "is in use by process")) << busy.output;
  EXPECT_TRUE(std::filesystem::exists(live + "/metadb/CURRENT"));
}

TEST(MetaBackupCliTest, BadArgumentsGetOneLineErrors) {
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"meta backup /tmp/logfs-backup-never", "--meta=HOST:PORT[,HOST:PORT...] is required"},
      {"meta backup --meta=127.0.0.1:1", "expected the backup directory"},
      {"meta backup --meta=127.0.0.1:1 a b", "unexpected argument 'b'"},
      {"meta bootstrap --meta=127.0.0.1:1", "--data_dir is required"},
      {"meta bootstrap --data_dir=/tmp/logfs-bootstrap-never", "--meta=HOST:PORT"},
      {"meta bootstrap --meta=127.0.0.1:1 --data_dir=/tmp/x extra", "unexpected argument"},
      {"meta backup --meta=127.0.0.1:1 /tmp/logfs-backup-never", "meta at 127.0.0.1:1"},
  };
  for (const Case& c : cases) {
    auto run = RunCommand(LogfsBinary() + " " + c.args + " 2>&1");
    EXPECT_EQ(1, run.exit_code) << c.args << "\n" << run.output;
    EXPECT_TRUE(absl::StrContains(run.output, c.message)) << c.args << "\n" << run.output;
  }
  RunCommand("rm -rf /tmp/logfs-backup-never");
  EXPECT_FALSE(std::filesystem::exists("/tmp/logfs-bootstrap-never"));
  auto help = RunCommand(LogfsBinary() + " meta bootstrap --help 2>&1");
  EXPECT_EQ(0, help.exit_code);
  EXPECT_TRUE(absl::StrContains(help.output, "--force")) << help.output;
}

}  // namespace
}  // namespace logfs::testing
