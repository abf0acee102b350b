// Namespace operations through a real FUSE mount of a real cluster
// (meta + 3 segd processes): each test checks the values and errnos that
// POSIX (and DESIGN §2) promise.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <string>

#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class MountNamespaceTest : public SharedClusterTest<1> {
 protected:
  std::string P(const std::string& rel) { return cluster_->Path(rel); }

};

std::set<std::string> List(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) names.insert(e->d_name);
  closedir(d);
  return names;
}

TEST_F(MountNamespaceTest, MkdirReaddirRmdir) {
  ASSERT_EQ(0, mkdir(P("d1").c_str(), 0755));
  ASSERT_EQ(0, mkdir(P("d1/sub").c_str(), 0700));
  ASSERT_TRUE(WriteFile(P("d1/f"), "x").ok());
  EXPECT_EQ((std::set<std::string>{".", "..", "sub", "f"}), List(P("d1")));
  struct stat st;
  ASSERT_EQ(0, stat(P("d1/sub").c_str(), &st));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(0700u, st.st_mode & 07777);
  EXPECT_EQ(-1, mkdir(P("d1/sub").c_str(), 0755));
  EXPECT_EQ(EEXIST, errno);
  EXPECT_EQ(-1, rmdir(P("d1").c_str()));
  EXPECT_EQ(ENOTEMPTY, errno);
  EXPECT_EQ(-1, rmdir(P("d1/f").c_str()));
  EXPECT_EQ(ENOTDIR, errno);
  EXPECT_EQ(-1, unlink(P("d1/sub").c_str()));
  EXPECT_EQ(EISDIR, errno);
  ASSERT_EQ(0, rmdir(P("d1/sub").c_str()));
  ASSERT_EQ(0, unlink(P("d1/f").c_str()));
  ASSERT_EQ(0, rmdir(P("d1").c_str()));
  EXPECT_EQ(-1, stat(P("d1").c_str(), &st));
  EXPECT_EQ(ENOENT, errno);
}

TEST_F(MountNamespaceTest, CreateAndGetattrSizes) {
  std::string data(123457, 'q');
  ASSERT_TRUE(WriteFile(P("sized"), data).ok());
  struct stat st;
  ASSERT_EQ(0, stat(P("sized").c_str(), &st));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(123457, st.st_size);
  EXPECT_EQ(1u, st.st_nlink);
  auto back = ReadFile(P("sized"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(data, *back);
}

TEST_F(MountNamespaceTest, RenameReplacesTargetAtomically) {
  ASSERT_TRUE(WriteFile(P("ra"), "new contents").ok());
  ASSERT_TRUE(WriteFile(P("rb"), "old").ok());
  ASSERT_EQ(0, rename(P("ra").c_str(), P("rb").c_str()));
  EXPECT_EQ("new contents", *ReadFile(P("rb")));
  struct stat st;
  EXPECT_EQ(-1, stat(P("ra").c_str(), &st));
  EXPECT_EQ(ENOENT, errno);
  // Directory over non-empty directory, and file over directory, fail.
  ASSERT_EQ(0, mkdir(P("rd1").c_str(), 0755));
  ASSERT_EQ(0, mkdir(P("rd2").c_str(), 0755));
  ASSERT_TRUE(WriteFile(P("rd2/keep"), "k").ok());
  EXPECT_EQ(-1, rename(P("rd1").c_str(), P("rd2").c_str()));
  EXPECT_EQ(ENOTEMPTY, errno);
  EXPECT_EQ(-1, rename(P("rb").c_str(), P("rd1").c_str()));
  EXPECT_EQ(EISDIR, errno);
  // Across directories.
  ASSERT_EQ(0, rename(P("rb").c_str(), P("rd2/moved").c_str()));
  EXPECT_EQ("new contents", *ReadFile(P("rd2/moved")));
}

TEST_F(MountNamespaceTest, UnlinkedOpenFileKeepsItsData) {
  ASSERT_TRUE(WriteFile(P("doomed"), "still here").ok());
  int fd = open(P("doomed").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, unlink(P("doomed").c_str()));
  struct stat st;
  EXPECT_EQ(-1, stat(P("doomed").c_str(), &st));
  char buf[64] = {0};
  EXPECT_EQ(10, pread(fd, buf, sizeof(buf), 0));
  EXPECT_EQ("still here", std::string(buf));
  close(fd);
}

TEST_F(MountNamespaceTest, SymlinkReadlink) {
  ASSERT_TRUE(WriteFile(P("target"), "t").ok());
  ASSERT_EQ(0, symlink("target", P("link").c_str()));
  char buf[256] = {0};
  ASSERT_EQ(6, readlink(P("link").c_str(), buf, sizeof(buf)));
  EXPECT_EQ("target", std::string(buf));
  struct stat st;
  ASSERT_EQ(0, lstat(P("link").c_str(), &st));
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ("t", *ReadFile(P("link")));
}

TEST_F(MountNamespaceTest, ChmodChownUtimens) {
  ASSERT_TRUE(WriteFile(P("attrs"), "a").ok());
  ASSERT_EQ(0, chmod(P("attrs").c_str(), 0600));
  ASSERT_EQ(0, chown(P("attrs").c_str(), 1234, 5678));
  timespec times[2] = {{1000, 5}, {2000, 7}};
  ASSERT_EQ(0, utimensat(AT_FDCWD, P("attrs").c_str(), times, 0));
  struct stat st;
  ASSERT_EQ(0, stat(P("attrs").c_str(), &st));
  EXPECT_EQ(0600u, st.st_mode & 07777);
  EXPECT_EQ(1234u, st.st_uid);
  EXPECT_EQ(5678u, st.st_gid);
  EXPECT_EQ(1000, st.st_atim.tv_sec);
  EXPECT_EQ(2000, st.st_mtim.tv_sec);
  EXPECT_EQ(7, st.st_mtim.tv_nsec);
}

TEST_F(MountNamespaceTest, StatfsReportsServerCapacity) {
  struct statvfs st;
  ASSERT_EQ(0, statvfs(cluster_->mountpoint().c_str(), &st));
  EXPECT_GT(st.f_blocks, 0u);
  EXPECT_GT(st.f_bavail, 0u);
  EXPECT_LE(st.f_bavail, st.f_blocks);
  EXPECT_EQ(255u, st.f_namemax);
}

// Hard links work (issue 44; tests/links_test.cc has the rest); a link
// to a directory is EPERM, as on ext4.
TEST_F(MountNamespaceTest, HardLinksWorkButNotForDirectories) {
  ASSERT_TRUE(WriteFile(P("linked"), "n").ok());
  ASSERT_EQ(0, link(P("linked").c_str(), P("linked2").c_str())) << strerror(errno);
  EXPECT_EQ("n", *ReadFile(P("linked2")));
  ASSERT_EQ(0, mkdir(P("linkdir").c_str(), 0755));
  EXPECT_EQ(-1, link(P("linkdir").c_str(), P("linkdir2").c_str()));
  EXPECT_EQ(EPERM, errno);
}

}  // namespace
}  // namespace logfs::testing
