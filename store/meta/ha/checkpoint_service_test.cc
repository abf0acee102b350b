// CheckpointService: a new checkpoint lists its files and applied seq, and
// reading every file back gives the bytes on disk; bad names, ids, offsets,
// types and bodies get errors (never a read outside the checkpoint); at
// most checkpoints_max are kept, idle ones are dropped, leftovers removed.
#include "store/meta/ha/checkpoint_service.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "store/format/limits.h"
#include "store/format/message_type.h"

namespace logfs::meta {
namespace {

using format::MessageType;

class CheckpointServiceTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "logfs_ckpt_service_test_XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
    dir_ = tmpl;
    auto db = MetadataDb::Open({dir_ + "/metadb"});
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    MetadataDb::Batch batch;
    proto::Inode inode;
    inode.mutable_attr()->set_ino(2);
    batch.PutInode(inode);
    ASSERT_TRUE(db_->Write(batch).ok());
    options_.dir = dir_ + "/checkpoints";
    options_.now = [this] { return now_; };
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  void Start() {
    auto service = CheckpointService::Create(db_.get(), options_);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
  }
  CheckpointService::Reply Call(MessageType type, const proto::CheckpointRequest& request) {
    format::Frame frame;
    frame.type = type;
    frame.message = request.SerializeAsString();
    return service_->Handle(frame);
  }
  absl::StatusOr<proto::CheckpointResponse> Checkpoint(uint64_t id = 0) {
    proto::CheckpointRequest request;
    request.set_checkpoint_id(id);
    CheckpointService::Reply reply = Call(MessageType::kCheckpoint, request);
    if (!reply.ok()) return reply.status();
    EXPECT_TRUE(reply->data.empty());
    return *static_cast<proto::CheckpointResponse*>(reply->message.get());
  }
  absl::StatusOr<std::string> Read(uint64_t id, const std::string& file, uint64_t offset,
                                   uint32_t length) {
    proto::CheckpointRequest request;
    request.set_checkpoint_id(id);
    request.set_file(file);
    request.set_offset(offset);
    request.set_length(length);
    CheckpointService::Reply reply = Call(MessageType::kReadCheckpoint, request);
    if (!reply.ok()) return reply.status();
    EXPECT_EQ(reply->data.size(),
              static_cast<proto::ReadCheckpointResponse*>(reply->message.get())->length());
    return reply->data;
  }
  static std::string Contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

  std::string dir_;
  std::unique_ptr<MetadataDb> db_;
  CheckpointServiceOptions options_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::unique_ptr<CheckpointService> service_;
};

TEST_F(CheckpointServiceTest, ListsFilesAndServesTheirBytes) {
  Start();
  auto listing = Checkpoint();
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(1u, listing->applied_seq());  // one write: journal record 1
  EXPECT_NE(0u, listing->checkpoint_id());
  ASSERT_GT(listing->files_size(), 0);
  const std::string ckpt = options_.dir + "/" + std::to_string(listing->checkpoint_id());
  for (const auto& file : listing->files()) {
    const std::string expected = Contents(ckpt + "/" + file.name());
    ASSERT_EQ(file.size(), expected.size()) << file.name();
    // In chunks of 7 bytes from the start, and whole (length 0 = at most kReadBytesMax).
    std::string got;
    for (int i = 0; i < 100000 && got.size() < file.size(); ++i) {
      auto chunk = Read(listing->checkpoint_id(), file.name(), got.size(), 7);
      ASSERT_TRUE(chunk.ok()) << chunk.status();
      ASSERT_FALSE(chunk->empty());
      got += *chunk;
    }
    EXPECT_EQ(expected, got) << file.name();
    auto whole = Read(listing->checkpoint_id(), file.name(), 0, 0);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(expected, *whole);
    // At the end: no bytes, no error.
    auto end = Read(listing->checkpoint_id(), file.name(), file.size(), 10);
    ASSERT_TRUE(end.ok()) << end.status();
    EXPECT_EQ("", *end);
  }
  // Asked again by id: the same listing.
  auto again = Checkpoint(listing->checkpoint_id());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(listing->SerializeAsString(), again->SerializeAsString());
}

TEST_F(CheckpointServiceTest, BadRequestsGetErrors) {
  Start();
  auto listing = Checkpoint();
  ASSERT_TRUE(listing.ok()) << listing.status();
  const uint64_t id = listing->checkpoint_id();
  const std::string name = listing->files(0).name();
  const uint64_t size = listing->files(0).size();
  // A file next to the checkpoints, which no name may reach.
  std::ofstream(options_.dir + "/secret") << "x";
  for (const std::string& bad :
       {std::string(""), std::string("."), std::string(".."), std::string("../secret"),
        std::string("../../metadb/CURRENT"), std::string("/etc/passwd"), std::string("a/b"),
        std::string("CURRENT\0x", 9)}) {
    EXPECT_TRUE(absl::IsInvalidArgument(Read(id, bad, 0, 10).status())) << bad;
  }
  EXPECT_TRUE(absl::IsNotFound(Read(id, "secret", 0, 10).status()));
  EXPECT_TRUE(absl::IsNotFound(Read(id, "LOCK", 0, 10).status()));  // not in a checkpoint
  EXPECT_TRUE(absl::IsNotFound(Read(id + 1, name, 0, 10).status()));
  EXPECT_TRUE(absl::IsNotFound(Read(0, name, 0, 10).status()));
  EXPECT_TRUE(absl::IsNotFound(Checkpoint(id + 1).status()));
  EXPECT_TRUE(absl::IsOutOfRange(Read(id, name, size + 1, 10).status()));
  EXPECT_TRUE(absl::IsOutOfRange(Read(id, name, ~0ull, 10).status()));
  // A huge length is cut to the file (and to kReadBytesMax).
  auto all = Read(id, name, 0, ~0u);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(std::min<uint64_t>(size, format::kReadBytesMax), all->size());
  // Unparseable body, a type it does not serve.
  format::Frame garbage;
  garbage.type = MessageType::kReadCheckpoint;
  garbage.message = "\xff\xff\xff";
  EXPECT_TRUE(absl::IsInvalidArgument(service_->Handle(garbage).status()));
  garbage.type = MessageType::kLookup;
  garbage.message.clear();
  EXPECT_TRUE(absl::IsInvalidArgument(service_->Handle(garbage).status()));
  EXPECT_FALSE(CheckpointService::Serves(MessageType::kLookup));
  EXPECT_TRUE(CheckpointService::Serves(MessageType::kCheckpoint));
}

TEST_F(CheckpointServiceTest, KeepsAtMostTheMaxAndDropsIdleOnes) {
  options_.checkpoints_max = 2;
  options_.idle_expiry = absl::Minutes(10);
  options_.busy_grace = absl::Seconds(30);
  Start();
  auto a = Checkpoint();
  auto b = Checkpoint();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(a->checkpoint_id(), b->checkpoint_id());
  // Both just read: a third is refused.
  EXPECT_TRUE(absl::IsResourceExhausted(Checkpoint().status()));
  // Past the grace, the least recently read (a) makes room.
  now_ += absl::Seconds(31);
  ASSERT_TRUE(Checkpoint(b->checkpoint_id()).ok());
  auto c = Checkpoint();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((std::vector<uint64_t>{b->checkpoint_id(), c->checkpoint_id()}), service_->TEST_Ids());
  EXPECT_FALSE(std::filesystem::exists(options_.dir + "/" + std::to_string(a->checkpoint_id())));
  EXPECT_TRUE(absl::IsNotFound(Checkpoint(a->checkpoint_id()).status()));
  // Ten minutes unread: both go.
  now_ += absl::Minutes(10);
  service_->DropIdle();
  EXPECT_TRUE(service_->TEST_Ids().empty());
  EXPECT_TRUE(std::filesystem::is_empty(options_.dir));
}

TEST_F(CheckpointServiceTest, RemovesLeftoversAtStartAndIdsDoNotRepeat) {
  Start();
  auto first = Checkpoint();
  ASSERT_TRUE(first.ok()) << first.status();
  std::filesystem::create_directories(options_.dir + "/123.tmp");
  std::ofstream(options_.dir + "/123.tmp/000001.sst") << "partial";
  service_.reset();
  now_ += absl::Seconds(1);
  Start();
  EXPECT_TRUE(std::filesystem::is_empty(options_.dir));
  EXPECT_TRUE(absl::IsNotFound(Checkpoint(first->checkpoint_id()).status()));
  auto second = Checkpoint();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GT(second->checkpoint_id(), first->checkpoint_id());
}

}  // namespace
}  // namespace logfs::meta
