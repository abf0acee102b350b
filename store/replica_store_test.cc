// ReplicaStore on a real temp dir: the append/read/seal/delete contract of
// docs/rpc.md ("Segment server") without networking, plus reopen.
#include "store/replica_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "src/util/crc32c.h"

namespace logfs::store {
namespace {

uint32_t Crc(const std::string& s) { return util::Crc32c(s.data(), s.size()); }

class ReplicaStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/replica_store_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    store_.reset();
    auto store = ReplicaStore::Open(ReplicaStoreOptions{dir_ + "/data"});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  absl::StatusOr<ReplicaInfo> Append(uint64_t id, uint64_t offset, const std::string& data,
                                     uint64_t epoch = 1) {
    return store_->Append(id, epoch, offset, data, Crc(data));
  }
  std::string ReadAll(uint64_t id) {
    auto read = store_->Read(id, 0, kReadBytesMax);
    EXPECT_TRUE(read.ok()) << read.status();
    return read.ok() ? read->data : "";
  }

  std::string dir_;
  std::unique_ptr<ReplicaStore> store_;
};

TEST_F(ReplicaStoreTest, AppendReadRoundTrip) {
  ASSERT_TRUE(store_->Create(7, 1).ok());
  auto info = Append(7, 0, "hello ");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(6u, info->length);
  EXPECT_EQ(0u, info->durable_length);
  ASSERT_TRUE(Append(7, 6, "world").ok());
  EXPECT_EQ("hello world", ReadAll(7));
  auto part = store_->Read(7, 6, 3);
  ASSERT_TRUE(part.ok());
  EXPECT_EQ("wor", part->data);
  EXPECT_EQ(11u, part->length);
  auto at_end = store_->Read(7, 11, 10);
  ASSERT_TRUE(at_end.ok());
  EXPECT_EQ("", at_end->data);
  EXPECT_EQ(absl::StatusCode::kOutOfRange, store_->Read(7, 12, 10).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Read(8, 0, 10).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, Append(8, 0, "x").status().code());
}

TEST_F(ReplicaStoreTest, SyncDirtyAdvancesDurableLengthOncePerReplica) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(1, 0, "aaa").ok());
  ASSERT_TRUE(Append(1, 3, "bbb").ok());
  ASSERT_TRUE(Append(2, 0, "cc").ok());
  EXPECT_EQ(2, store_->SyncDirty());
  EXPECT_EQ(6u, store_->Info(1)->durable_length);
  EXPECT_EQ(2u, store_->Info(2)->durable_length);
  EXPECT_EQ(0, store_->SyncDirty());
}

TEST_F(ReplicaStoreTest, WrongOffsetIsOutOfRangeAndChangesNothing) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Append(1, 4, "x").status().code());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Append(1, 2, "zz").status().code());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Append(1, 1, "x").status().code());  // not a resend
  EXPECT_EQ("abc", ReadAll(1));
  EXPECT_EQ(3u, store_->Info(1)->length);
}

TEST_F(ReplicaStoreTest, ExactResendIsAccepted) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  ASSERT_TRUE(Append(1, 3, "def").ok());
  auto again = Append(1, 3, "def");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(6u, again->length);
  EXPECT_TRUE(Append(1, 0, "abc").ok());
  EXPECT_EQ("abcdef", ReadAll(1));
}

TEST_F(ReplicaStoreTest, CrcMismatchIsDataLoss) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  auto bad = store_->Append(1, 1, 0, "abc", Crc("abd"));
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  EXPECT_EQ(0u, store_->Info(1)->length);
}

TEST_F(ReplicaStoreTest, SealedReplicaRejectsAppends) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  auto sealed = store_->Seal(1, 1, 3);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_TRUE(sealed->sealed);
  EXPECT_EQ(3u, sealed->durable_length);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, Append(1, 3, "d").status().code());
  EXPECT_TRUE(store_->Seal(1, 1, 3).ok());  // same length again
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Seal(1, 1, 2).status().code());
}

TEST_F(ReplicaStoreTest, FencedEpochIsRejected) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  // (a) a new writer raises the epoch; (b) the old writer's append fails.
  auto fenced = store_->Create(1, 2);
  ASSERT_TRUE(fenced.ok()) << fenced.status();
  EXPECT_EQ(2u, fenced->epoch);
  EXPECT_EQ(3u, fenced->length);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, Append(1, 3, "d", 1).status().code());
  EXPECT_TRUE(Append(1, 3, "d", 2).ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Create(1, 1).status().code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Seal(1, 1, 4).status().code());
}

TEST_F(ReplicaStoreTest, SealTruncatesLongerReplica) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abcdef").ok());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, store_->Seal(1, 1, 7).status().code());
  auto sealed = store_->Seal(1, 1, 4);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_EQ(4u, sealed->length);
  EXPECT_EQ("abcd", ReadAll(1));
  EXPECT_EQ(4u, std::filesystem::file_size(dir_ + "/data/segments/1.seg"));
}

TEST_F(ReplicaStoreTest, ReopenKeepsDataAndState) {
  // (a) one open replica with unsynced bytes, one sealed, and a server id;
  // (b) reopen; (c) everything is back and the open replica is durable.
  ASSERT_TRUE(store_->Create(1, 3).ok());
  ASSERT_TRUE(Append(1, 0, "open bytes", 3).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(2, 0, "sealed bytes").ok());
  ASSERT_TRUE(store_->Seal(2, 1, 6).ok());
  ASSERT_TRUE(store_->SetServerId(42).ok());
  Reopen();
  EXPECT_EQ(42u, store_->server_id());
  auto open = store_->Info(1);
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(3u, open->epoch);
  EXPECT_EQ(10u, open->length);
  EXPECT_EQ(10u, open->durable_length);
  EXPECT_FALSE(open->sealed);
  EXPECT_EQ("open bytes", ReadAll(1));
  auto sealed = store_->Info(2);
  ASSERT_TRUE(sealed.ok());
  EXPECT_TRUE(sealed->sealed);
  EXPECT_EQ(6u, sealed->length);
  EXPECT_EQ("sealed", ReadAll(2));
  EXPECT_TRUE(Append(1, 10, "!", 3).ok());
}

TEST_F(ReplicaStoreTest, DeleteRemovesReplicaAndIsIdempotent) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  ASSERT_TRUE(store_->Delete(1).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Info(1).status().code());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/segments/1.seg"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/segments/1.state"));
  EXPECT_TRUE(store_->Delete(1).ok());
  EXPECT_EQ(0, store_->SyncDirty());
  Reopen();
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Info(1).status().code());
}

TEST_F(ReplicaStoreTest, OrphanDataFileIsRemovedOnOpen) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  store_.reset();
  std::filesystem::remove(dir_ + "/data/segments/1.state");
  Reopen();
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Info(1).status().code());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/segments/1.seg"));
}

TEST_F(ReplicaStoreTest, DataDirThatIsAFileIsFailedPrecondition) {
  std::string file = dir_ + "/plain";
  ASSERT_TRUE(store_->SetServerId(1).ok());
  std::filesystem::copy_file(dir_ + "/data/server_id", file);
  auto store = ReplicaStore::Open(ReplicaStoreOptions{file});
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store.status().code());
}

}  // namespace
}  // namespace logfs::store
