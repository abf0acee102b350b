// MetadataDb::CreateCheckpoint: the checkpoint reopens as a MetadataDb with
// the same contents and applied seq, later writes stay out of it, and a
// taken directory or an empty one is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "store/meta/db/metadata_db.h"

namespace logfs::meta {
namespace {

class MetadataDbCheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_metadb_ckpt_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    auto db = MetadataDb::Open({dir_ + "/db"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
  }
  void TearDown() override {
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // Inodes first..last, each named "f<ino>" in the root, in one write (one
  // journal record: the applied seq goes up by one).
  void WriteFiles(uint64_t first, uint64_t last) {
    MetadataDb::Batch batch;
    for (uint64_t ino = first; ino <= last; ++ino) {
      proto::Inode inode;
      inode.mutable_attr()->set_ino(ino);
      inode.mutable_attr()->set_size(ino * 10);
      batch.PutInode(inode);
      proto::DirEntry entry;
      entry.set_name("f" + std::to_string(ino));
      entry.set_ino(ino);
      batch.PutDirEntry(1, entry);
    }
    ASSERT_TRUE(db_->Write(batch).ok());
  }

  std::string dir_;
  std::unique_ptr<MetadataDb> db_;
};

TEST_F(MetadataDbCheckpointTest, ReopensWithSameContentsAndAppliedSeq) {
  WriteFiles(2, 101);
  auto info = db_->CreateCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(1u, info->applied_seq);
  // Listed files are those in the directory, with their sizes.
  ASSERT_FALSE(info->files.empty());
  bool has_manifest = false;
  for (const auto& file : info->files) {
    EXPECT_EQ(std::string::npos, file.name.find('/')) << file.name;
    EXPECT_EQ(file.size_bytes, std::filesystem::file_size(dir_ + "/ckpt/" + file.name))
        << file.name;
    has_manifest = has_manifest || file.name.rfind("MANIFEST-", 0) == 0;
  }
  EXPECT_TRUE(has_manifest);
  EXPECT_EQ(info->files.size(),
            static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir_ + "/ckpt"),
                                              std::filesystem::directory_iterator())));
  // Writes after the checkpoint stay out of it.
  WriteFiles(102, 110);

  auto copy = MetadataDb::Open({dir_ + "/ckpt"});
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(1u, *(*copy)->GetCounter(MetaCounter::kAppliedSeq));
  EXPECT_EQ(100u, *(*copy)->CountInodes());
  auto inode = (*copy)->GetInode(57);
  ASSERT_TRUE(inode.ok()) << inode.status();
  EXPECT_EQ(570u, inode->attr().size());
  EXPECT_TRUE(absl::IsNotFound((*copy)->GetInode(102).status()));
  auto page = (*copy)->ListDir(1, "", 1000, 1 << 20);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(100u, page->entries.size());
  EXPECT_EQ("f10", page->entries[0].name());  // byte order: f10 < f100 < f11
  EXPECT_EQ(2u, *db_->GetCounter(MetaCounter::kAppliedSeq));
}

TEST_F(MetadataDbCheckpointTest, NeverWrittenAppliedSeqIsZero) {
  auto info = db_->CreateCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(0u, info->applied_seq);
}

TEST_F(MetadataDbCheckpointTest, RefusesExistingOrEmptyDirectory) {
  ASSERT_EQ(0, mkdir((dir_ + "/taken").c_str(), 0755));
  EXPECT_TRUE(absl::IsAlreadyExists(db_->CreateCheckpoint(dir_ + "/taken").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(db_->CreateCheckpoint("").status()));
  auto second = db_->CreateCheckpoint(dir_ + "/a");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(absl::IsAlreadyExists(db_->CreateCheckpoint(dir_ + "/a").status()));
  // A missing parent is an error, not a crash.
  EXPECT_FALSE(db_->CreateCheckpoint(dir_ + "/no/such/parent").ok());
}

}  // namespace
}  // namespace logfs::meta
