// ReplicaStore on a real temp dir: the append/read/seal/delete contract of
// docs/rpc.md ("Segment server") without networking, plus reopen.
#include "store/segd/replica_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "src/util/crc32c.h"
#include "store/format/chunk_crc.h"
#include "store/segd/journal.h"

namespace logfs::segd {
namespace {

uint32_t Crc(const std::string& s) { return util::Crc32c(s.data(), s.size()); }

class ReplicaStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "replica_store_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl.data()));
    dir_ = tmpl;
    Reopen();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen(uint64_t journal_bytes = 1u << 20) {
    store_.reset();
    auto store = ReplicaStore::Open(ReplicaStoreOptions{dir_ + "/data", journal_bytes});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  absl::StatusOr<ReplicaInfo> Append(uint64_t id, uint64_t offset, const std::string& data,
                                     uint64_t epoch = 1) {
    return store_->Append(id, epoch, offset, data, Crc(data));
  }
  std::string ReadAll(uint64_t id) {
    auto read = store_->Read(id, 0, format::kReadBytesMax);
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

TEST_F(ReplicaStoreTest, SyncDirtyIsOneJournalFdatasyncForEveryReplica) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(1, 0, "aaa").ok());
  ASSERT_TRUE(Append(1, 3, "bbb").ok());
  ASSERT_TRUE(Append(2, 0, "cc").ok());
  uint64_t before = store_->fdatasync_count();
  EXPECT_EQ(1, store_->SyncDirty());
  EXPECT_EQ(before + 1, store_->fdatasync_count());
  EXPECT_EQ(6u, store_->Info(1)->durable_length);
  EXPECT_EQ(2u, store_->Info(2)->durable_length);
  EXPECT_EQ(0, store_->SyncDirty());
}

// What a crash does to replica bytes that only the journal made durable:
// the page cache never reached the replica file.
void CutFile(const std::string& path, off_t length) {
  ASSERT_EQ(0, ::truncate(path.c_str(), length)) << path;
}

TEST_F(ReplicaStoreTest, ReopenReplaysJournaledAppendsIntoReplicas) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abc").ok());
  ASSERT_TRUE(Append(2, 0, "xy").ok());
  ASSERT_TRUE(Append(1, 3, "def").ok());
  ASSERT_EQ(1, store_->SyncDirty());
  store_.reset();
  CutFile(dir_ + "/data/segments/1.seg", 1);
  CutFile(dir_ + "/data/segments/2.seg", 0);
  Reopen();
  EXPECT_EQ("abcdef", ReadAll(1));
  EXPECT_EQ("xy", ReadAll(2));
  EXPECT_EQ(6u, store_->Info(1)->durable_length);
  // The replay is not repeated: appends continue, a second reopen agrees.
  ASSERT_TRUE(Append(1, 6, "g").ok());
  ASSERT_EQ(1, store_->SyncDirty());
  Reopen();
  EXPECT_EQ("abcdefg", ReadAll(1));
}

TEST_F(ReplicaStoreTest, ReplayStopsAtATornRecordAndSkipsSealedAndDeletedReplicas) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(store_->Create(3, 1).ok());
  ASSERT_TRUE(Append(1, 0, "keep").ok());
  ASSERT_TRUE(Append(2, 0, "sealed-cut").ok());
  ASSERT_TRUE(Append(3, 0, "deleted").ok());
  ASSERT_EQ(1, store_->SyncDirty());
  ASSERT_TRUE(store_->Seal(2, 2, 6).ok());
  ASSERT_TRUE(store_->Delete(3).ok());
  ASSERT_TRUE(Append(1, 4, "torn").ok());  // never synced
  store_.reset();
  // Tear the last record: its data no longer matches its CRC.
  const std::string journal = dir_ + "/data/journal";
  int fd = ::open(journal.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint64_t last = 3 * kJournalHeaderBytes + 4 + 10 + 7;
  ASSERT_EQ(1, ::pwrite(fd, "X", 1, last + kJournalHeaderBytes));
  ::close(fd);
  CutFile(dir_ + "/data/segments/1.seg", 0);
  Reopen();
  EXPECT_EQ("keep", ReadAll(1));
  EXPECT_EQ("sealed", ReadAll(2));
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Info(3).status().code());
}

TEST_F(ReplicaStoreTest, JournalWrapsAfterACheckpointAndKeepsEveryByte) {
  Reopen(/*journal_bytes=*/4096);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  std::string expected[3];
  for (int i = 0; i < 200; ++i) {
    uint64_t id = 1 + i % 2;
    std::string record(100, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(Append(id, expected[id].size(), record).ok()) << i;
    expected[id] += record;
    if (i % 7 == 0) {
      ASSERT_EQ(1, store_->SyncDirty());
    }
  }
  ASSERT_EQ(1, store_->SyncDirty());
  EXPECT_GE(store_->journal_wraps(), 4u);
  Reopen(4096);
  EXPECT_EQ(expected[1], ReadAll(1));
  EXPECT_EQ(expected[2], ReadAll(2));
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

// ---------------------------------------------------------------- checksums

// `n` bytes of a pattern that differs in every chunk.
std::string Pattern(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>('a' + (i * 7 + i / 1000) % 26);
  return out;
}

// Flips one byte of a file on disk, as a bad sector or a stray write would.
void FlipByte(const std::string& path, uint64_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char byte = 0;
  ASSERT_EQ(1, ::pread(fd, &byte, 1, static_cast<off_t>(offset)));
  byte = static_cast<char>(byte ^ 0x20);
  ASSERT_EQ(1, ::pwrite(fd, &byte, 1, static_cast<off_t>(offset)));
  ::close(fd);
}

TEST_F(ReplicaStoreTest, FlippedByteInSealedReplicaIsDataLossAndMarksItCorrupt) {
  // Goal: a byte changed on disk under a sealed replica is caught by the
  // chunk CRCs, and the replica is never served again. (a) seal 3.5
  // chunks; (b) flip a byte in chunk 2; (c) a read of chunk 0 alone still
  // works; (d) a read touching chunk 2 is kDataLoss naming the chunk;
  // (e) from then on every read is kDataLoss and Info says corrupt.
  ASSERT_TRUE(store_->SetServerId(5).ok());
  const std::string data = Pattern(3 * format::kCrcChunkBytes + format::kCrcChunkBytes / 2);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, data).ok());
  ASSERT_TRUE(store_->Seal(1, 1, data.size()).ok());
  FlipByte(dir_ + "/data/segments/1.seg", 2 * format::kCrcChunkBytes + 123);
  auto first = store_->Read(1, 10, 100);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(data.substr(10, 100), first->data);
  auto bad = store_->Read(1, 2 * format::kCrcChunkBytes - 10, 20);  // chunks 1 and 2
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  EXPECT_EQ("replica 5 of segment 1 is corrupt at chunk 2", bad.status().message());
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Read(1, 10, 100).status().code());
  auto info = store_->Info(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->corrupt);
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Seal(1, 1, data.size()).status().code());
}

TEST_F(ReplicaStoreTest, FullReadOfSealedReplicaVerifiesEveryChunk) {
  // A flip in the last, partial chunk is caught by a read of the whole
  // replica, and by one after a restart (the CRCs are on disk).
  const std::string data = Pattern(2 * format::kCrcChunkBytes + 100);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, data).ok());
  ASSERT_TRUE(store_->Seal(1, 1, data.size()).ok());
  FlipByte(dir_ + "/data/segments/1.seg", data.size() - 1);
  Reopen();
  EXPECT_FALSE(store_->Info(1)->corrupt);  // not read yet
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Read(1, 0, format::kReadBytesMax).status().code());
  EXPECT_TRUE(store_->Info(1)->corrupt);
}

TEST_F(ReplicaStoreTest, FlippedByteInOpenReplicaIsDataLossAndRefusesAppends) {
  const std::string data = Pattern(format::kCrcChunkBytes + 10);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, data).ok());
  FlipByte(dir_ + "/data/segments/1.seg", 5);
  EXPECT_EQ(absl::StatusCode::kDataLoss, store_->Read(1, 0, 10).status().code());
  EXPECT_EQ(absl::StatusCode::kDataLoss, Append(1, data.size(), "more").status().code());
  EXPECT_TRUE(store_->Info(1)->corrupt);
}

TEST_F(ReplicaStoreTest, ChunkCrcsSurviveRestartAndKeepGrowing) {
  // Goal: CRCs written by many small appends (the last chunk's CRC updated
  // as it grows), by a seal that cuts inside a chunk, and after a restart
  // all agree with the data. (a) an open replica grown by uneven appends
  // across chunk boundaries; (b) a sealed one cut mid-chunk; (c) reopen;
  // (d) both read back whole; (e) the open one keeps growing and reads.
  const std::string open_data = Pattern(2 * format::kCrcChunkBytes + 777);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  for (size_t at = 0; at < open_data.size(); at += 10000) {
    ASSERT_TRUE(Append(1, at, open_data.substr(at, 10000)).ok());
  }
  const std::string sealed_data = Pattern(3 * format::kCrcChunkBytes);
  const uint64_t sealed_length = format::kCrcChunkBytes + 4321;
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(2, 0, sealed_data).ok());
  ASSERT_TRUE(store_->Seal(2, 1, sealed_length).ok());
  EXPECT_EQ(sealed_data.substr(0, sealed_length), ReadAll(2));
  EXPECT_EQ(store_->SyncDirty(), 1);
  Reopen();
  EXPECT_EQ(open_data, ReadAll(1));
  EXPECT_EQ(sealed_data.substr(0, sealed_length), ReadAll(2));
  EXPECT_EQ(format::CrcFileBytes(sealed_length),
            std::filesystem::file_size(dir_ + "/data/segments/2.crc"));
  const std::string more = Pattern(format::kCrcChunkBytes);
  ASSERT_TRUE(Append(1, open_data.size(), more).ok());
  EXPECT_EQ(open_data + more, ReadAll(1));
  auto tail = store_->Read(1, open_data.size() + 5, 10);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(more.substr(5, 10), tail->data);
  EXPECT_FALSE(store_->Info(1)->corrupt);
  EXPECT_FALSE(store_->Info(2)->corrupt);
}

TEST_F(ReplicaStoreTest, ReplicaWithoutCrcFileGetsOneOnOpen) {
  // Replicas written before checksums have no .crc file: Open builds it.
  const std::string data = Pattern(format::kCrcChunkBytes + 1);
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, data).ok());
  ASSERT_TRUE(store_->Seal(1, 1, data.size()).ok());
  store_.reset();
  std::filesystem::remove(dir_ + "/data/segments/1.crc");
  Reopen();
  EXPECT_EQ(data, ReadAll(1));
  EXPECT_EQ(format::CrcFileBytes(data.size()),
            std::filesystem::file_size(dir_ + "/data/segments/1.crc"));
}

TEST_F(ReplicaStoreTest, DeleteRemovesCrcFileAndOrphanCrcFileIsRemovedOnOpen) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(store_->Delete(1).ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/segments/1.crc"));
  store_.reset();
  std::filesystem::remove(dir_ + "/data/segments/2.state");
  Reopen();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/data/segments/2.crc"));
}

TEST_F(ReplicaStoreTest, OpenReplicaKeepsItsTailCrcInMemoryUntilTheSeal) {
  // Goal: small appends write no CRC until a chunk is whole; reads still
  // verify the tail; a seal makes the .crc file cover every byte; a
  // restart of an open replica rebuilds what was only in memory.
  const std::string crc_path = dir_ + "/data/segments/5.crc";
  ASSERT_TRUE(store_->Create(5, 1).ok());
  std::string data;
  for (int i = 0; i < 3; ++i) {
    std::string piece(1000, static_cast<char>('a' + i));
    ASSERT_TRUE(Append(5, data.size(), piece).ok());
    data += piece;
  }
  EXPECT_EQ(0u, std::filesystem::file_size(crc_path));  // no whole chunk yet
  EXPECT_EQ(data, ReadAll(5));
  std::string fill(format::kCrcChunkBytes, 'z');  // completes chunk 0, starts chunk 1
  ASSERT_TRUE(Append(5, data.size(), fill).ok());
  data += fill;
  EXPECT_EQ(format::kCrcBytes, std::filesystem::file_size(crc_path));
  EXPECT_EQ(data, ReadAll(5));
  Reopen();  // open replica: CRCs rebuilt from the data, tail included
  EXPECT_EQ(data, ReadAll(5));
  ASSERT_TRUE(store_->Seal(5, 1, data.size()).ok());
  EXPECT_EQ(format::CrcFileBytes(data.size()), std::filesystem::file_size(crc_path));
  Reopen();  // sealed: the .crc file must cover every byte
  EXPECT_EQ(data, ReadAll(5));
  EXPECT_FALSE(store_->Info(5)->corrupt);
}

}  // namespace
}  // namespace logfs::segd

namespace logfs::segd {
namespace {

// Bytes of a sealed replica that a short-circuit reader verifies: the
// last chunk partial, so that appends after a reopen complete it.
std::string TwoChunksAndABit() {
  std::string s(2 * format::kCrcChunkBytes + 1000, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>('a' + i % 23);
  return s;
}

TEST_F(ReplicaStoreTest, ReopenForAppendContinuesASealedReplica) {
  // Goal: a sealed replica reopened at a higher epoch takes appends at its
  // sealed length again, and a later seal makes it whole (every CRC
  // checked by a full read), across a restart too; descriptors opened
  // while it was sealed (a short-circuit reader's) keep the sealed
  // replica's CRCs, although the appends rewrite its last chunk's.
  const std::string first = TwoChunksAndABit();
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, first).ok());
  ASSERT_TRUE(store_->Seal(1, 1, first.size()).ok());
  auto stale = store_->OpenReadOnly(1);
  ASSERT_TRUE(stale.ok()) << stale.status();
  const std::string sealed_crcs(format::CrcFileBytes(first.size()), '\0');
  std::string before = sealed_crcs;
  ASSERT_EQ(static_cast<ssize_t>(before.size()),
            ::pread(stale->crc.get(), before.data(), before.size(), 0));

  auto reopened = store_->Reopen(1, 2, first.size());
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_FALSE(reopened->sealed);
  EXPECT_EQ(2u, reopened->epoch);
  EXPECT_EQ(first.size(), reopened->length);
  EXPECT_EQ(first.size(), reopened->durable_length);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->OpenReadOnly(1).status().code())
      << "an open replica is not handed out";
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition,
            Append(1, first.size(), "x", 1).status().code()) << "the old epoch is fenced";
  const std::string more(format::kCrcChunkBytes, 'z');  // completes the partial chunk
  ASSERT_TRUE(Append(1, first.size(), more, 2).ok());
  std::string after = sealed_crcs;
  ASSERT_EQ(static_cast<ssize_t>(after.size()),
            ::pread(stale->crc.get(), after.data(), after.size(), 0));
  EXPECT_EQ(before, after) << "the sealed replica's CRCs changed under its readers";
  ASSERT_TRUE(store_->Seal(1, 2, first.size() + more.size()).ok());
  EXPECT_EQ(first + more, ReadAll(1));
  Reopen();
  EXPECT_EQ(first + more, ReadAll(1));
  auto info = store_->Info(1);
  ASSERT_TRUE(info.ok());
  EXPECT_TRUE(info->sealed);
  EXPECT_EQ(2u, info->epoch);
}

TEST_F(ReplicaStoreTest, AReplicaReopenedForAppendSurvivesARestartOpen) {
  // Goal: a crash while reopened keeps every byte: the sealed ones and the
  // appended ones, open at the new epoch, CRCs rebuilt.
  const std::string first = TwoChunksAndABit();
  ASSERT_TRUE(store_->Create(3, 1).ok());
  ASSERT_TRUE(Append(3, 0, first).ok());
  ASSERT_TRUE(store_->Seal(3, 1, first.size()).ok());
  ASSERT_TRUE(store_->Reopen(3, 2, first.size()).ok());
  ASSERT_TRUE(Append(3, first.size(), "tail", 2).ok());
  store_->SyncDirty();
  Reopen();
  auto info = store_->Info(3);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->sealed);
  EXPECT_EQ(2u, info->epoch);
  EXPECT_EQ(first + "tail", ReadAll(3));
  ASSERT_TRUE(Append(3, first.size() + 4, "!", 2).ok());
  ASSERT_TRUE(store_->Seal(3, 2, first.size() + 5).ok());
  EXPECT_EQ(first + "tail!", ReadAll(3));
}

TEST_F(ReplicaStoreTest, ReopenForAppendIsRefusedUnlessSealedThereAtALowerEpochAndUncut) {
  ASSERT_TRUE(store_->Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "abcdef").ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Reopen(1, 2, 6).status().code())
      << "open";
  ASSERT_TRUE(store_->Seal(1, 1, 6).ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Reopen(1, 2, 5).status().code())
      << "another length";
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Reopen(1, 1, 6).status().code())
      << "not a higher epoch";
  EXPECT_EQ(absl::StatusCode::kNotFound, store_->Reopen(9, 2, 6).status().code());
  ASSERT_TRUE(store_->Reopen(1, 2, 6).ok());
  EXPECT_TRUE(store_->Reopen(1, 2, 6).ok()) << "a retry";
  // Cut at its seal: the journal still holds the bytes past the cut.
  ASSERT_TRUE(store_->Create(2, 1).ok());
  ASSERT_TRUE(Append(2, 0, "abcdef").ok());
  ASSERT_TRUE(store_->Seal(2, 1, 4).ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, store_->Reopen(2, 2, 4).status().code());
}

}  // namespace
}  // namespace logfs::segd
