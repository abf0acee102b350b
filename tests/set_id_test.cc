// Set-ID bits through a real FUSE mount of a real cluster (issue 34 item
// 6), as on ext4: a write or a truncate by a caller without CAP_FSETID
// clears S_ISUID, and S_ISGID when group execute is set (S_ISGID without
// it marks mandatory locking and stays); a caller with CAP_FSETID keeps
// them; a chown clears them whoever calls it, on regular files only. The
// caller without the capability is a child process that becomes nobody,
// or stays root and drops CAP_FSETID from its effective set; it works on
// a descriptor its parent opened (it could not walk the 0700 temp dir).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

#include "src/util/unique_fd.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

using util::UniqueFd;

enum class Caller {
  kRoot,                // root with every capability
  kNobody,              // uid and gid 65534: no capabilities
  kRootWithoutFsetid,   // root, CAP_FSETID dropped from its effective set
};

// Drops CAP_FSETID from this thread's effective set; false on failure.
bool DropFsetid() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_FSETID)].effective &= ~CAP_TO_MASK(CAP_FSETID);
  return syscall(SYS_capset, &header, data) == 0;
}

// Runs `body` in a child process as `caller`; returns what it returned
// (0: success, else an errno), or -1 if the child could not become
// `caller` or did not exit normally.
int RunAs(Caller caller, const std::function<int()>& body) {
  const pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    if (caller == Caller::kNobody &&
        (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)) {
      _exit(255);
    }
    if (caller == Caller::kRootWithoutFsetid && !DropFsetid()) _exit(255);
    _exit(body());
  }
  int status = 0;
  if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status) == 255 ? -1 : WEXITSTATUS(status);
}

int WriteAll(int fd, const std::string& data) {
  return write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()) ? 0 : errno;
}

class SetIdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto mc = MountedCluster::Start({});
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = mc->release();
    const std::string wal = cluster_->Path("wal");
    ASSERT_EQ(0, mkdir(wal.c_str(), 0777));
    ASSERT_EQ(0, setxattr(wal.c_str(), "user.logfs.kind", "wal", 3, 0));
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(nullptr, cluster_); }

  static std::string P(const std::string& rel) { return cluster_->Path(rel); }

  // The permission and set-ID bits of `path`, or -1.
  static int ModeOf(const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  }

  // A new block file `rel` with `mode` (set with chmod, past the umask),
  // open for write; returns the descriptor.
  static UniqueFd NewFileWithMode(const std::string& rel, mode_t mode) {
    UniqueFd fd(open(P(rel).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0600));
    EXPECT_TRUE(fd.valid()) << rel << ": " << strerror(errno);
    EXPECT_EQ(0, fchmod(fd.get(), mode));
    return fd;
  }

  // The mode of `rel` after `caller` writes to it, through a descriptor
  // opened after its mode was set.
  static int ModeAfterWrite(const std::string& rel, mode_t mode, Caller caller) {
    {
      UniqueFd created = NewFileWithMode(rel, mode);
      EXPECT_EQ(0, WriteAll(created.get(), "first"));
    }
    // A WAL file reopened for append, so the descriptor sees the mode set.
    UniqueFd fd(open(P(rel).c_str(), O_WRONLY | O_APPEND));
    EXPECT_TRUE(fd.valid()) << strerror(errno);
    EXPECT_EQ(static_cast<int>(mode), ModeOf(P(rel))) << "chmod did not hold";
    EXPECT_EQ(0, RunAs(caller, [&] { return WriteAll(fd.get(), " second"); }));
    const int after = ModeOf(P(rel));
    fd.Reset();
    auto data = ReadFile(P(rel));
    EXPECT_TRUE(data.ok()) << data.status();
    EXPECT_EQ("first second", data.value_or("")) << "the write itself must land";
    return after;
  }

  static MountedCluster* cluster_;
};

MountedCluster* SetIdTest::cluster_ = nullptr;

TEST_F(SetIdTest, AWriteWithoutCapFsetidClearsSetUidAndGroupExecutableSetGid) {
  EXPECT_EQ(0777, ModeAfterWrite("wal/w1", 06777, Caller::kNobody));
  EXPECT_EQ(0755, ModeAfterWrite("wal/w2", 04755, Caller::kNobody));
  EXPECT_EQ(0777, ModeAfterWrite("wal/w3", 06777, Caller::kRootWithoutFsetid));
}

TEST_F(SetIdTest, SetGidWithoutGroupExecuteStays) {
  // S_ISGID without S_IXGRP is a mandatory-locking mark, not a privilege.
  EXPECT_EQ(02767, ModeAfterWrite("wal/g1", 02767, Caller::kNobody));
  EXPECT_EQ(02767, ModeAfterWrite("wal/g2", 06767, Caller::kNobody));
}

TEST_F(SetIdTest, AWriteWithCapFsetidKeepsTheBits) {
  EXPECT_EQ(06777, ModeAfterWrite("wal/r1", 06777, Caller::kRoot));
}

TEST_F(SetIdTest, TheFirstWriteOfANewFileClearsTheBitsItWasCreatedWith) {
  // Created by root with 06777 (chmod on the open descriptor: the mode its
  // writer knows comes from the create), then written by nobody.
  UniqueFd created(open(P("new-setid").c_str(), O_CREAT | O_WRONLY | O_EXCL, 06777));
  ASSERT_TRUE(created.valid()) << strerror(errno);
  ASSERT_EQ(0, fchmod(created.get(), 06777));  // past the umask
  EXPECT_EQ(0, RunAs(Caller::kNobody, [&] { return WriteAll(created.get(), "data"); }));
  EXPECT_EQ(0777, ModeOf(P("new-setid")));
  created.Reset();
  auto data = ReadFile(P("new-setid"));
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ("data", *data);
}

TEST_F(SetIdTest, ATruncateWithoutCapFsetidClearsTheBits) {
  for (Caller caller : {Caller::kNobody, Caller::kRootWithoutFsetid, Caller::kRoot}) {
    const std::string path = P("wal/t" + std::to_string(static_cast<int>(caller)));
    ASSERT_TRUE(WriteFile(path, "some records").ok());
    ASSERT_EQ(0, chmod(path.c_str(), 06777));
    UniqueFd fd(open(path.c_str(), O_WRONLY));
    ASSERT_TRUE(fd.valid()) << strerror(errno);
    EXPECT_EQ(0, RunAs(caller, [&] { return ftruncate(fd.get(), 0) == 0 ? 0 : errno; }));
    fd.Reset();
    struct stat st;
    ASSERT_EQ(0, stat(path.c_str(), &st));
    EXPECT_EQ(0u, st.st_size);
    EXPECT_EQ(caller == Caller::kRoot ? 06777u : 0777u, st.st_mode & 07777)
        << "caller " << static_cast<int>(caller);
  }
}

TEST_F(SetIdTest, AnOTruncOpenWithoutCapFsetidClearsTheBits) {
  // The kernel sends no setattr for an O_TRUNC open (atomic O_TRUNC): the
  // mount truncates at open, and clears the bits there. The child opens by
  // name below a directory its parent opened.
  UniqueFd wal(open(P("wal").c_str(), O_RDONLY | O_DIRECTORY));
  ASSERT_TRUE(wal.valid()) << strerror(errno);
  for (Caller caller : {Caller::kNobody, Caller::kRoot}) {
    const std::string name = "o" + std::to_string(static_cast<int>(caller));
    ASSERT_TRUE(WriteFile(P("wal/" + name), "some records").ok());
    ASSERT_EQ(0, chmod(P("wal/" + name).c_str(), 06777));
    EXPECT_EQ(0, RunAs(caller, [&] {
      const int fd = openat(wal.get(), name.c_str(), O_WRONLY | O_TRUNC);
      if (fd < 0) return errno;
      return close(fd) == 0 ? 0 : errno;
    }));
    struct stat st;
    ASSERT_EQ(0, stat(P("wal/" + name).c_str(), &st));
    EXPECT_EQ(0u, st.st_size);
    EXPECT_EQ(caller == Caller::kRoot ? 06777u : 0777u, st.st_mode & 07777)
        << "caller " << static_cast<int>(caller);
  }
}

TEST_F(SetIdTest, AChownClearsTheBitsOfRegularFilesOnly) {
  const std::string file = P("owned");
  ASSERT_TRUE(WriteFile(file, "x").ok());
  ASSERT_EQ(0, chmod(file.c_str(), 06777));
  ASSERT_EQ(0, chown(file.c_str(), 65534, 65534));
  EXPECT_EQ(0777, ModeOf(file)) << "root's chown clears them too";

  const std::string locking = P("owned-locking");
  ASSERT_TRUE(WriteFile(locking, "x").ok());
  ASSERT_EQ(0, chmod(locking.c_str(), 02767));
  ASSERT_EQ(0, chown(locking.c_str(), 65534, -1));
  EXPECT_EQ(02767, ModeOf(locking));

  const std::string dir = P("owned-dir");
  ASSERT_EQ(0, mkdir(dir.c_str(), 0755));
  ASSERT_EQ(0, chmod(dir.c_str(), 02775));
  ASSERT_EQ(0, chown(dir.c_str(), 65534, 65534));
  EXPECT_EQ(02775, ModeOf(dir)) << "a directory's set-group-ID bit is inheritance, and stays";
}

}  // namespace
}  // namespace logfs::testing
