// DESIGN §2 append-only semantics through a real mount: wrong-offset
// writes, O_APPEND, sealed block files, WAL reopen and truncation, and the
// single-writer lease across two mounts.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class AppendOnlyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    MountedClusterOptions options;
    options.mounts = 2;
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = mc->release();
    ASSERT_EQ(0, mkdir(cluster_->Path("wal").c_str(), 0755));
    ASSERT_EQ(0, setxattr(cluster_->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(nullptr, cluster_); }
  std::string P(const std::string& rel, int mount = 0) { return cluster_->Path(rel, mount); }

  static MountedCluster* cluster_;
};
MountedCluster* AppendOnlyTest::cluster_ = nullptr;

TEST_F(AppendOnlyTest, WriteAwayFromEndIsEpermAndChangesNothing) {
  int fd = open(P("wal/w1").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(5, pwrite(fd, "hello", 5, 0));
  EXPECT_EQ(-1, pwrite(fd, "X", 1, 2));  // overwrite
  EXPECT_EQ(EPERM, errno);
  EXPECT_EQ(-1, pwrite(fd, "X", 1, 10));  // hole
  EXPECT_EQ(EPERM, errno);
  ASSERT_EQ(6, pwrite(fd, " world", 6, 5));
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ("hello world", *ReadFile(P("wal/w1")));
}

TEST_F(AppendOnlyTest, AppendDescriptorWritesLandAtEnd) {
  ASSERT_TRUE(WriteFile(P("wal/a1"), "first,").ok());
  int fd = open(P("wal/a1").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(7, write(fd, "second,", 7));
  ASSERT_EQ(5, pwrite(fd, "third", 5, 0));  // O_APPEND ignores the offset
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ("first,second,third", *ReadFile(P("wal/a1")));
}

TEST_F(AppendOnlyTest, SealedBlockFileIsImmutable) {
  ASSERT_TRUE(WriteFile(P("blk"), "immutable").ok());
  // Opening for write succeeds (RocksDB's LOCK needs it) but writing fails.
  int fd = open(P("blk").c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(-1, write(fd, "x", 1));
  EXPECT_EQ(EPERM, errno);
  close(fd);
  fd = open(P("blk").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(-1, write(fd, "x", 1));
  EXPECT_EQ(EPERM, errno);
  close(fd);
  EXPECT_EQ(-1, open(P("blk").c_str(), O_WRONLY | O_TRUNC));
  EXPECT_EQ(EPERM, errno);
  EXPECT_EQ(-1, truncate(P("blk").c_str(), 0));
  EXPECT_EQ(EPERM, errno);
  EXPECT_EQ(0, truncate(P("blk").c_str(), 9));  // to the current size: no-op
  EXPECT_EQ("immutable", *ReadFile(P("blk")));
  // Replaced atomically by rename.
  ASSERT_TRUE(WriteFile(P("blk.tmp"), "replacement").ok());
  ASSERT_EQ(0, rename(P("blk.tmp").c_str(), P("blk").c_str()));
  EXPECT_EQ("replacement", *ReadFile(P("blk")));
}

TEST_F(AppendOnlyTest, EmptyBlockFileReopensForWrite) {
  ASSERT_TRUE(WriteFile(P("LOCK"), "").ok());
  int fd = open(P("LOCK").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, close(fd));
}

TEST_F(AppendOnlyTest, WalReopensForAppendAndTruncatesToZero) {
  ASSERT_TRUE(WriteFile(P("wal/r1"), "one").ok());
  ASSERT_TRUE(WriteFile(P("wal/r1"), "two", O_APPEND).ok());
  EXPECT_EQ("onetwo", *ReadFile(P("wal/r1")));
  char segments[4096] = {0};
  ASSERT_GT(getxattr(P("wal/r1").c_str(), "user.logfs.segments", segments, sizeof(segments)), 0);
  // The second writer continued the first one's segment.
  EXPECT_EQ(1, std::count(segments, segments + strlen(segments), '\n')) << segments;
  EXPECT_EQ(-1, truncate(P("wal/r1").c_str(), 2));
  EXPECT_EQ(EPERM, errno);
  ASSERT_EQ(0, truncate(P("wal/r1").c_str(), 0)) << strerror(errno);
  struct stat st;
  ASSERT_EQ(0, stat(P("wal/r1").c_str(), &st));
  EXPECT_EQ(0, st.st_size);
  ASSERT_TRUE(WriteFile(P("wal/r1"), "three", O_TRUNC).ok());
  EXPECT_EQ("three", *ReadFile(P("wal/r1")));
  ASSERT_TRUE(WriteFile(P("wal/r1"), "four", O_TRUNC).ok());
  EXPECT_EQ("four", *ReadFile(P("wal/r1")));
}

TEST_F(AppendOnlyTest, ABlockFileBeingWrittenMayBeCutShortBeforeItIsClosed) {
  // Goal: ftruncate of a block file still open for write, to a length past
  // its sealed bytes, becomes the length it is sealed at (RocksDB's
  // direct-I/O writer cuts its last aligned write's padding so); another
  // mount sees none of the file until it is sealed, so nothing it saw is
  // taken back. A WAL file being written still only empties.
  const std::string data = Pattern(5000, 41);
  const int fd = open(P("cut.sst").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(5000, write(fd, data.data(), data.size()));
  ASSERT_EQ(0, fsync(fd));
  struct stat st;
  ASSERT_EQ(0, stat(P("cut.sst", 1).c_str(), &st));
  EXPECT_EQ(0, st.st_size) << "another mount sees a block file being written";
  ASSERT_EQ(0, ftruncate(fd, 4000)) << strerror(errno);
  ASSERT_EQ(0, fstat(fd, &st));
  EXPECT_EQ(4000, st.st_size);
  EXPECT_EQ(-1, ftruncate(fd, 4500)) << "a truncate never grows a file";
  EXPECT_EQ(EPERM, errno);
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ(data.substr(0, 4000), *ReadFile(P("cut.sst")));
  EXPECT_EQ(data.substr(0, 4000), *ReadFile(P("cut.sst", 1)));
  const int wal = open(P("wal/cut").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(wal, 0);
  ASSERT_EQ(5, write(wal, "12345", 5));
  EXPECT_EQ(-1, ftruncate(wal, 3));
  EXPECT_EQ(EPERM, errno);
  ASSERT_EQ(0, close(wal));
  EXPECT_EQ("12345", *ReadFile(P("wal/cut")));
}

TEST_F(AppendOnlyTest, CopyTruncateEmptiesAWalFileWhileItsWriterAppends) {
  // Goal: log rotation by copy-truncate (DESIGN §2): while a logger keeps
  // its O_APPEND descriptor, truncate(0) and O_TRUNC empty the file and
  // its next writes land at offset 0.
  int fd = open(P("wal/rotated").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(4, write(fd, "old\n", 4));
  ASSERT_EQ(0, fdatasync(fd));
  EXPECT_EQ("old\n", *ReadFile(P("wal/rotated")));
  ASSERT_EQ(0, truncate(P("wal/rotated").c_str(), 0));
  struct stat st;
  ASSERT_EQ(0, stat(P("wal/rotated").c_str(), &st));
  EXPECT_EQ(0, st.st_size);
  ASSERT_EQ(4, write(fd, "new\n", 4));
  ASSERT_EQ(0, fdatasync(fd));
  EXPECT_EQ("new\n", *ReadFile(P("wal/rotated")));
  int trunc_fd = open(P("wal/rotated").c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(trunc_fd, 0) << strerror(errno);
  ASSERT_EQ(0, close(trunc_fd));
  ASSERT_EQ(5, write(fd, "last\n", 5));
  ASSERT_EQ(0, close(fd));
  EXPECT_EQ("last\n", *ReadFile(P("wal/rotated")));
}

TEST_F(AppendOnlyTest, SecondMountGetsEbusyWhileFileIsOpenForWrite) {
  int fd = open(P("wal/lease").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(3, write(fd, "abc", 3));
  EXPECT_EQ(-1, open(P("wal/lease", 1).c_str(), O_WRONLY | O_APPEND));
  EXPECT_EQ(EBUSY, errno);
  // Readers on the other mount are fine.
  int rfd = open(P("wal/lease", 1).c_str(), O_RDONLY);
  EXPECT_GE(rfd, 0);
  if (rfd >= 0) close(rfd);
  ASSERT_EQ(0, close(fd));
  // After the close (seal, lease release), the other mount may append.
  int fd2 = -1;
  for (int i = 0; i < 500 && fd2 < 0; ++i) {  // release reaches meta asynchronously
    fd2 = open(P("wal/lease", 1).c_str(), O_WRONLY | O_APPEND);
    if (fd2 < 0) {
      ASSERT_EQ(EBUSY, errno);
      usleep(2000);  // poll: FUSE sends RELEASE after close() returns
    }
  }
  ASSERT_GE(fd2, 0);
  ASSERT_EQ(3, write(fd2, "def", 3));
  ASSERT_EQ(0, close(fd2));
  EXPECT_EQ("abcdef", *ReadFile(P("wal/lease")));
}

TEST_F(AppendOnlyTest, FallocateKeepSizeIsAHint) {
  int fd = open(P("wal/falloc").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(0, fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
  EXPECT_EQ(-1, fallocate(fd, 0, 0, 1 << 20));
  EXPECT_EQ(EOPNOTSUPP, errno);
  close(fd);
}

}  // namespace
}  // namespace logfs::testing
