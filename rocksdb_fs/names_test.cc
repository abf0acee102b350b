#include "rocksdb_fs/names.h"

#include <gtest/gtest.h>

#include <cerrno>

#include "src/status/posix_error.h"

namespace logfs::rocksdb_fs {
namespace {

TEST(RocksdbNamesTest, ParsesTheMetaListAndTheRoot) {
  auto uri = ParseUri("logfs://127.0.0.1:7000,127.0.0.1:7001/dbs//a/");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ("127.0.0.1:7000,127.0.0.1:7001", uri->meta);
  EXPECT_EQ("/dbs/a", uri->root);
  uri = ParseUri("logfs://m:7000");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ("m:7000", uri->meta);
  EXPECT_EQ("/", uri->root);
  uri = ParseUri("logfs://m:7000/");
  ASSERT_TRUE(uri.ok()) << uri.status();
  EXPECT_EQ("/", uri->root);
}

TEST(RocksdbNamesTest, RefusesBadUris) {
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, ParseUri("hdfs://m:7000/x").status().code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, ParseUri("logfs:///x").status().code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, ParseUri("logfs://m:7000/a/../b").status().code());
  EXPECT_NE(std::string::npos,
            std::string(ParseUri("logfs:///x").status().message()).find("names meta"));
}

TEST(RocksdbNamesTest, PathsStartAtTheRoot) {
  EXPECT_EQ("/dbs/bench/CURRENT", UnderRoot("/dbs", "/bench/CURRENT"));
  EXPECT_EQ("/dbs/bench", UnderRoot("/dbs", "bench"));
  EXPECT_EQ("/dbs", UnderRoot("/dbs", "/"));
  EXPECT_EQ("/bench", UnderRoot("/", "/bench"));
  EXPECT_EQ("/bench", UnderRoot("/", "bench"));
}

TEST(RocksdbNamesTest, LogsAreWalFilesAndTheRestBlockFiles) {
  EXPECT_EQ(proto::KIND_WAL, KindOf("/db/000012.log"));
  EXPECT_EQ(proto::KIND_WAL, KindOf("/db/MANIFEST-000005"));
  EXPECT_EQ(proto::KIND_WAL, KindOf("/db/LOG"));
  EXPECT_EQ(proto::KIND_WAL, KindOf("000003.log"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/000013.sst"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/CURRENT"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/000004.dbtmp"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/OPTIONS-000007"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/LOG.old.1764900000000000"));
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/app.log"));  // not RocksDB's: a number first
  EXPECT_EQ(proto::KIND_BLOCK, KindOf("/db/.log"));
}

TEST(RocksdbNamesTest, ErrnosBecomeRocksdbStatuses) {
  EXPECT_TRUE(ToIOStatus(absl::OkStatus(), "x").ok());
  rocksdb::IOStatus missing = ToIOStatus(PosixError(ENOENT, "no such file"), "open /db/CURRENT");
  EXPECT_TRUE(missing.IsPathNotFound());
  EXPECT_EQ("IO error: No such file or directory: open /db/CURRENT: no such file",
            missing.ToString());
  EXPECT_TRUE(ToIOStatus(PosixError(ENOSPC, "full"), "append").IsNoSpace());
  EXPECT_TRUE(ToIOStatus(PosixError(EOPNOTSUPP, "no"), "x").IsNotSupported());
  rocksdb::IOStatus busy = ToIOStatus(PosixError(EBUSY, "leased"), "open for write /db/LOCK");
  EXPECT_TRUE(busy.IsIOError());
  EXPECT_NE(std::string::npos, busy.ToString().find("open for write /db/LOCK: leased"));
}

}  // namespace
}  // namespace logfs::rocksdb_fs
