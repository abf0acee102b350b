// MetadataDb: every key family round-trips, directory entries list in name
// order per parent, pending deletions list per server, state survives a
// reopen, and a second open of a locked database fails cleanly.
#include "store/meta/db/metadata_db.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace logfs::meta {
namespace {

class MetadataDbTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_metadb_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Reopen() {
    db_.reset();
    auto db = MetadataDb::Open({dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  static proto::DirEntry Entry(const std::string& name, uint64_t ino) {
    proto::DirEntry entry;
    entry.set_name(name);
    entry.set_ino(ino);
    return entry;
  }

  std::string dir_;
  std::unique_ptr<MetadataDb> db_;
};

TEST_F(MetadataDbTest, InodesAndCountersRoundTripAcrossReopen) {
  MetadataDb::Batch batch;
  proto::Inode inode;
  inode.mutable_attr()->set_ino(300);
  inode.mutable_attr()->set_size(4096);
  inode.set_symlink_target("t");
  batch.PutInode(inode);
  batch.PutCounter(MetaCounter::kNextIno, 301);
  batch.PutCounter(MetaCounter::kNextSegmentId, 1ull << 40);
  ASSERT_TRUE(db_->Write(batch).ok());
  Reopen();
  auto got = db_->GetInode(300);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(4096u, got->attr().size());
  EXPECT_EQ("t", got->symlink_target());
  EXPECT_EQ(301u, *db_->GetCounter(MetaCounter::kNextIno));
  EXPECT_EQ(1ull << 40, *db_->GetCounter(MetaCounter::kNextSegmentId));
  EXPECT_EQ(0u, *db_->GetCounter(MetaCounter::kNextMountId));
  EXPECT_EQ(1u, *db_->CountInodes());
  EXPECT_EQ(absl::StatusCode::kNotFound, db_->GetInode(301).status().code());

  MetadataDb::Batch del;
  del.DeleteInode(300);
  ASSERT_TRUE(db_->Write(del).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, db_->GetInode(300).status().code());
}

TEST_F(MetadataDbTest, DirEntriesListInNameOrderPerParent) {
  MetadataDb::Batch batch;
  // Parent 256 sorts after parent 255 only with big-endian keys.
  batch.PutDirEntry(256, Entry("b", 10));
  batch.PutDirEntry(256, Entry("a", 11));
  batch.PutDirEntry(256, Entry("aa", 12));
  batch.PutDirEntry(255, Entry("zzz", 13));
  batch.PutDirEntry(257, Entry("0", 14));
  ASSERT_TRUE(db_->Write(batch).ok());
  auto page = db_->ListDir(256, "", 10, 1 << 20);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(3u, page->entries.size());
  EXPECT_FALSE(page->more);
  EXPECT_EQ("a", page->entries[0].name());
  EXPECT_EQ("aa", page->entries[1].name());
  EXPECT_EQ("b", page->entries[2].name());
  // Pages: after a name (present or not), by entries and by bytes.
  page = db_->ListDir(256, "a", 1, 1 << 20);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(1u, page->entries.size());
  EXPECT_EQ("aa", page->entries[0].name());
  EXPECT_TRUE(page->more);
  page = db_->ListDir(256, "ab", 10, 1 << 20);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(1u, page->entries.size());
  EXPECT_EQ("b", page->entries[0].name());
  EXPECT_FALSE(page->more);
  page = db_->ListDir(256, "", 10, 1);  // the first entry always comes
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(1u, page->entries.size());
  EXPECT_TRUE(page->more);
  page = db_->ListDir(256, "b", 10, 1 << 20);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->entries.empty());
  EXPECT_FALSE(page->more);
  EXPECT_EQ(12u, db_->GetDirEntry(256, "aa")->ino());
  EXPECT_EQ(absl::StatusCode::kNotFound, db_->GetDirEntry(256, "c").status().code());
  EXPECT_TRUE(*db_->HasEntries(255));
  EXPECT_FALSE(*db_->HasEntries(258));

  MetadataDb::Batch del;
  del.DeleteDirEntry(255, "zzz");
  ASSERT_TRUE(db_->Write(del).ok());
  EXPECT_FALSE(*db_->HasEntries(255));
}

TEST_F(MetadataDbTest, ServersPendingDeletionsAndOrphans) {
  MetadataDb::Batch batch;
  proto::RegisterServerRequest server;
  server.set_server_id(2);
  server.set_address("127.0.0.1:9000");
  batch.PutServer(server);
  batch.AddPendingDeletion(2, 7);
  batch.AddPendingDeletion(2, 5);
  batch.AddPendingDeletion(3, 6);
  batch.AddOrphan(42);
  batch.AddOrphan(41);
  EXPECT_EQ(6, batch.count());
  ASSERT_TRUE(db_->Write(batch).ok());

  auto servers = db_->ListServers();
  ASSERT_TRUE(servers.ok());
  ASSERT_EQ(1u, servers->size());
  EXPECT_EQ("127.0.0.1:9000", (*servers)[0].address());
  EXPECT_EQ((std::vector<uint64_t>{5, 7}), *db_->ListPendingDeletions(2, 100));
  EXPECT_EQ((std::vector<uint64_t>{5}), *db_->ListPendingDeletions(2, 1));
  EXPECT_EQ((std::vector<uint64_t>{6}), *db_->ListPendingDeletions(3, 100));
  EXPECT_EQ((std::vector<uint64_t>{41, 42}), *db_->ListOrphans());

  MetadataDb::Batch del;
  del.DeletePendingDeletion(2, 5);
  del.DeleteOrphan(41);
  ASSERT_TRUE(db_->Write(del).ok());
  EXPECT_EQ((std::vector<uint64_t>{7}), *db_->ListPendingDeletions(2, 100));
  EXPECT_EQ((std::vector<uint64_t>{42}), *db_->ListOrphans());
}

TEST_F(MetadataDbTest, SecondOpenOfLockedDbFailsWithFailedPrecondition) {
  auto second = MetadataDb::Open({dir_ + "/db"});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, second.status().code());
  EXPECT_NE(std::string::npos, second.status().message().find("locked")) << second.status();
}

}  // namespace
}  // namespace logfs::meta
