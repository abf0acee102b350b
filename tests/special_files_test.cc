// Special files through real FUSE mounts of a real cluster: FIFOs, Unix
// sockets and device nodes are inodes in meta with a type, mode, owner,
// times, xattrs and (device nodes) a device number, and no data. Each test
// checks what ext4 would do, from the creating mount and from a second
// one (docs/POSIX.md "Special files").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "src/util/unique_fd.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

using util::UniqueFd;

class SpecialFilesTest : public SharedClusterTest<2> {
 protected:
  // `rel` on mount `i`.
  static std::string P(const std::string& rel, int i = 0) { return cluster_->Path(rel, i); }
  // `logfs fsck` of the cluster: its exit code and its "N files" count.
  static std::pair<int, std::string> Fsck() {
    CommandResult fsck = RunCommand(absl::StrCat(
        "timeout 60 ", LogfsBinary(), " fsck --meta=", cluster_->cluster().meta_address(), " 2>&1"));
    const size_t at = fsck.output.find("fsck: ");
    const size_t files = at == std::string::npos ? at : fsck.output.find(" files,", at);
    if (files == std::string::npos) return {fsck.exit_code, fsck.output};
    return {fsck.exit_code, fsck.output.substr(at + 6, files - at - 6)};
  }

};

// A listening AF_UNIX stream socket bound at `path` (which the bind
// creates, as mknod(S_IFSOCK) through the file system); -1 on error.
UniqueFd ListenAt(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    ADD_FAILURE() << "socket path too long: " << path;
    return UniqueFd();
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd.get(), 1) != 0) {
    ADD_FAILURE() << "bind/listen " << path << ": " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

UniqueFd ConnectTo(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() || connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ADD_FAILURE() << "connect " << path << ": " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

// A child process of this test: Wait() reaps it; if the test leaves
// first (a failed ASSERT), the destructor kills and reaps it.
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // True if the child exited with status 0.
  bool Wait() {
    int status = 0;
    const bool reaped = waitpid(pid_, &status, 0) == pid_;
    pid_ = -1;
    return reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

 private:
  pid_t pid_;
};

// Reads exactly `n` bytes from `fd`, waiting at most 5 s for each.
std::string ReadBytes(int fd, size_t n) {
  std::string out;
  while (out.size() < n) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) break;
    char buf[256];
    ssize_t got = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  return out;
}

struct stat Stat(const std::string& path) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  EXPECT_EQ(0, lstat(path.c_str(), &st)) << path << ": " << strerror(errno);
  return st;
}

// Goal: each special type made through the mount has the type, mode,
// owner, times and device number it was given, as the second mount sees
// it too; chmod, chown, utimens, xattrs, rename and unlink work on it as on
// a regular file, it has no user.logfs.* settings, and a device node
// obeys the mount's nodev. Method: make one of each on mount 0, change its
// attributes there, then look each up for the first time on mount 1
// (whose kernel has no cached attributes of it); rename there and unlink
// on mount 0.
TEST_F(SpecialFilesTest, EachTypeIsAnInodeBothMountsSee) {
  const auto fsck_before = Fsck();
  EXPECT_EQ(0, fsck_before.first) << fsck_before.second;
  ASSERT_EQ(0, mkdir(P("types").c_str(), 0755));
  ASSERT_EQ(0, mkfifo(P("types/fifo").c_str(), 0640));
  ASSERT_EQ(0, mknod(P("types/chr").c_str(), S_IFCHR | 0666, makedev(1, 3)));  // /dev/null's
  ASSERT_EQ(0, mknod(P("types/blk").c_str(), S_IFBLK | 0600, makedev(7, 5)));
  UniqueFd listener = ListenAt(P("types/sock"));
  ASSERT_TRUE(listener.valid());
  EXPECT_EQ(-1, mkfifo(P("types/fifo").c_str(), 0640));
  EXPECT_EQ(EEXIST, errno);

  // Attribute changes on the creating mount.
  ASSERT_EQ(0, chmod(P("types/fifo").c_str(), 0604));
  ASSERT_EQ(0, lchown(P("types/fifo").c_str(), 1234, 5678));
  const timespec times[2] = {{1000000000, 111}, {1500000000, 222}};
  ASSERT_EQ(0, utimensat(AT_FDCWD, P("types/chr").c_str(), times, AT_SYMLINK_NOFOLLOW));
  // The kernel allows user.* xattrs on regular files and directories only
  // (EPERM here, as on ext4); trusted.* ones are root's on any inode.
  EXPECT_EQ(-1, lsetxattr(P("types/blk").c_str(), "user.note", "disk", 4, 0));
  EXPECT_EQ(EPERM, errno);
  ASSERT_EQ(0, lsetxattr(P("types/blk").c_str(), "trusted.note", "disk", 4, 0));

  // The second mount's first look at each.
  struct stat fifo = Stat(P("types/fifo", 1));
  EXPECT_TRUE(S_ISFIFO(fifo.st_mode));
  EXPECT_EQ(0604u, fifo.st_mode & 07777);
  EXPECT_EQ(1234u, fifo.st_uid);
  EXPECT_EQ(5678u, fifo.st_gid);
  EXPECT_EQ(0, fifo.st_size);
  EXPECT_EQ(1u, fifo.st_nlink);
  struct stat chr = Stat(P("types/chr", 1));
  EXPECT_TRUE(S_ISCHR(chr.st_mode));
  EXPECT_EQ(makedev(1, 3), chr.st_rdev);
  EXPECT_EQ(1000000000, chr.st_atim.tv_sec);
  EXPECT_EQ(111, chr.st_atim.tv_nsec);
  EXPECT_EQ(1500000000, chr.st_mtim.tv_sec);
  EXPECT_EQ(222, chr.st_mtim.tv_nsec);
  struct stat blk = Stat(P("types/blk", 1));
  EXPECT_TRUE(S_ISBLK(blk.st_mode));
  EXPECT_EQ(0600u, blk.st_mode & 07777);
  EXPECT_EQ(makedev(7, 5), blk.st_rdev);
  struct stat sock = Stat(P("types/sock", 1));
  EXPECT_TRUE(S_ISSOCK(sock.st_mode));
  EXPECT_EQ(0u, sock.st_rdev);

  // Xattrs: the one set, and no logfs settings.
  char value[64];
  ASSERT_EQ(4, lgetxattr(P("types/blk", 1).c_str(), "trusted.note", value, sizeof(value)));
  EXPECT_EQ("disk", std::string(value, 4));
  char names[256];
  ssize_t listed = llistxattr(P("types/blk", 1).c_str(), names, sizeof(names));
  ASSERT_GE(listed, 0) << strerror(errno);
  EXPECT_EQ(std::string("trusted.note") + '\0', std::string(names, static_cast<size_t>(listed)));
  EXPECT_EQ(-1, lgetxattr(P("types/fifo").c_str(), "user.logfs.kind", value, sizeof(value)));
  EXPECT_EQ(ENODATA, errno);
  EXPECT_EQ(-1, lgetxattr(P("types/fifo").c_str(), "user.logfs.segments", value, sizeof(value)));
  EXPECT_EQ(ENODATA, errno);
  EXPECT_EQ(-1, lsetxattr(P("types/fifo").c_str(), "user.logfs.kind", "wal", 3, 0));
  EXPECT_EQ(EPERM, errno);
  // POSIX ACLs: not supported (docs/POSIX.md), on any inode. A valid ACL
  // (the kernel refuses a malformed one itself): version 2, then user::rwx,
  // group::r-x, other::r-x as (tag, perm, id) little-endian entries.
  const std::string acl("\x02\x00\x00\x00"
                        "\x01\x00\x07\x00\xff\xff\xff\xff"
                        "\x04\x00\x05\x00\xff\xff\xff\xff"
                        "\x20\x00\x05\x00\xff\xff\xff\xff",
                        28);
  EXPECT_EQ(-1, lsetxattr(P("types").c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0));
  EXPECT_EQ(EOPNOTSUPP, errno);

  // Readdir's d_type, as `ls -l` and `find -type` use it.
  CommandResult types = RunCommand(absl::StrCat("cd ", P("types", 1), " && timeout 20",
                                                " find . -mindepth 1 -printf '%y %p\\n' | sort"));
  EXPECT_EQ("b ./blk\nc ./chr\np ./fifo\ns ./sock\n", types.output);

  // fsck walks regular files only: the specials add none to its count.
  EXPECT_EQ((std::pair<int, std::string>{0, fsck_before.second}), Fsck());

  // nodev: a device node cannot be opened through the mount, even by root.
  EXPECT_EQ(-1, open(P("types/chr").c_str(), O_RDONLY | O_CLOEXEC));
  EXPECT_EQ(EACCES, errno);

  // rename on mount 1, unlink on mount 0; the names are gone on both.
  ASSERT_EQ(0, rename(P("types/fifo", 1).c_str(), P("types/fifo2", 1).c_str()));
  struct stat renamed = Stat(P("types/fifo2"));
  EXPECT_EQ(fifo.st_ino, renamed.st_ino);
  EXPECT_TRUE(S_ISFIFO(renamed.st_mode));
  for (const char* name : {"types/fifo2", "types/chr", "types/blk", "types/sock"}) {
    EXPECT_EQ(0, unlink(P(name).c_str())) << name << ": " << strerror(errno);
  }
  struct stat gone;
  EXPECT_EQ(-1, lstat(P("types/fifo2").c_str(), &gone));
  EXPECT_EQ(ENOENT, errno);
  ASSERT_EQ(0, rmdir(P("types").c_str()));
}

// Goal: a FIFO and a Unix socket on the mount carry bytes between
// processes on this host, as on ext4 (the kernel's pipe and socket; logfs
// holds only the name). Method: a child process writes into the FIFO,
// this one reads; a child connects to a socket bound on the mount, and
// each side sends to the other. The children make only async-signal-safe
// calls (this process has threads).
TEST_F(SpecialFilesTest, FifoAndSocketCarryBytesBetweenProcesses) {
  const std::string pipe_path = P("pipe");
  const std::string socket_path = P("control.sock");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof(addr.sun_path));
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(0, mkfifo(pipe_path.c_str(), 0600));
  const std::string message = "through a fifo on logfs\n";
  // O_NONBLOCK: the open returns at once, so the writer's open does too.
  UniqueFd reader(open(pipe_path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  ASSERT_TRUE(reader.valid()) << strerror(errno);
  pid_t writer = fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    alarm(10);  // bounds the child, whatever the parent does
    int fd = open(pipe_path.c_str(), O_WRONLY);
    bool ok = fd >= 0 && write(fd, message.data(), message.size()) ==
                             static_cast<ssize_t>(message.size());
    _exit(ok ? 0 : 1);
  }
  Child writer_child(writer);
  EXPECT_EQ(message, ReadBytes(reader.get(), message.size()));
  EXPECT_TRUE(writer_child.Wait());
  struct stat st = Stat(pipe_path);
  EXPECT_EQ(0, st.st_size);  // the bytes went through the kernel, not into a file
  ASSERT_EQ(0, unlink(pipe_path.c_str()));

  UniqueFd listener = ListenAt(socket_path);
  ASSERT_TRUE(listener.valid());
  pid_t client = fork();
  ASSERT_GE(client, 0);
  if (client == 0) {
    alarm(10);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    char reply[4] = {};
    bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
              write(fd, "ping", 4) == 4 && read(fd, reply, 4) == 4 &&
              std::memcmp(reply, "pong", 4) == 0;
    _exit(ok ? 0 : 1);
  }
  Child client_child(client);
  pollfd p{listener.get(), POLLIN, 0};
  ASSERT_EQ(1, poll(&p, 1, 5000));
  UniqueFd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid()) << strerror(errno);
  EXPECT_EQ("ping", ReadBytes(conn.get(), 4));
  ASSERT_EQ(4, write(conn.get(), "pong", 4));
  EXPECT_TRUE(client_child.Wait());
  // A second connection from this process, through the same name.
  UniqueFd again = ConnectTo(socket_path);
  EXPECT_TRUE(again.valid());
  ASSERT_EQ(0, unlink(socket_path.c_str()));
}

// The differences `diff -r` reports between trees `a` and `b`, without its
// lines for special files (GNU diff calls two FIFOs "a fifo while ... a
// fifo": it compares only regular files, directories and symlinks).
std::string TreeDiff(const std::string& a, const std::string& b) {
  CommandResult diff = RunCommand(absl::StrCat("timeout 60 diff -r --no-dereference ", a, " ", b));
  std::string kept;
  for (absl::string_view line : absl::StrSplit(diff.output, '\n', absl::SkipEmpty())) {
    std::string l(line);
    bool same_special =
        (absl::StrContains(l, " is a fifo while file ") && absl::EndsWith(l, " is a fifo")) ||
        (absl::StrContains(l, " is a socket while file ") && absl::EndsWith(l, " is a socket"));
    if (!same_special) absl::StrAppend(&kept, l, "\n");
  }
  return kept;
}

// Type, permission bits, owner and mtime (seconds) of `path`.
std::string Identity(const std::string& path) {
  struct stat st = Stat(path);
  return absl::StrCat(st.st_mode, " ", st.st_uid, ":", st.st_gid, " ", st.st_mtim.tv_sec);
}

// Goal: `cp -a` and `tar` of a tree holding a FIFO and a socket into the
// mount and back out give what the same tool gives on the local disk: the
// same bytes, and every file with the same type, mode, owner and mtime
// (GNU tar skips sockets, "socket ignored", on any file system). Method:
// build the tree on the local disk; copy it with each tool (umask 022) to
// a local reference, into the mount and from there back out; compare with
// `diff -r` and stat, also from the second mount. Regression: cp sets a
// copy's mode with setxattr(system.posix_acl_access), which logfs stored
// without applying, so every copy kept cp's creation mode (0600, 0700);
// now ACL xattrs are refused (EOPNOTSUPP) and cp falls back to chmod.
TEST_F(SpecialFilesTest, CpAndTarOfATreeWithSpecialFilesRoundTrip) {
  const std::string src = cluster_->root() + "/special-src";
  ASSERT_EQ(0, mkdir(src.c_str(), 0755));
  ASSERT_EQ(0, mkdir((src + "/dir").c_str(), 0750));
  ASSERT_TRUE(WriteFile(src + "/dir/data", Pattern(300000, 17)).ok());
  ASSERT_EQ(0, symlink("dir/data", (src + "/link").c_str()));
  ASSERT_EQ(0, mkfifo((src + "/dir/fifo").c_str(), 0620));
  ASSERT_EQ(0, lchown((src + "/dir/fifo").c_str(), 4321, 8765));
  { UniqueFd bound = ListenAt(src + "/sock"); ASSERT_TRUE(bound.valid()); }
  ASSERT_EQ(0, chmod((src + "/sock").c_str(), 0700));
  const std::vector<std::string> specials = {"dir/fifo", "sock"};
  const std::vector<std::string> regular = {"dir", "dir/data"};

  struct Tool {
    std::string name;
    std::string copy;  // copies SRC to DST (which does not exist yet)
    size_t specials_kept;
  };
  const std::vector<Tool> tools = {
      {"cp", "umask 022 && timeout 60 cp -a SRC DST", 2},
      {"tar", "umask 022 && mkdir DST && timeout 60 tar -C SRC -cf - . 2>/dev/null | "
              "timeout 60 tar -C DST -xpf -", 1},
  };
  for (const Tool& tool : tools) {
    SCOPED_TRACE(tool.name);
    const std::string reference = cluster_->root() + "/" + tool.name + "-reference";
    const std::string on_mount = P(tool.name + "-tree");
    const std::string back = cluster_->root() + "/" + tool.name + "-back";
    auto copy = [&](const std::string& from, const std::string& to) {
      std::string command = tool.copy;
      for (size_t at; (at = command.find("SRC")) != std::string::npos;) command.replace(at, 3, from);
      for (size_t at; (at = command.find("DST")) != std::string::npos;) command.replace(at, 3, to);
      CommandResult r = RunCommand(command);
      EXPECT_EQ(0, r.exit_code) << command << ": " << r.output;
    };
    copy(src, reference);
    copy(src, on_mount);
    copy(on_mount, back);
    EXPECT_EQ("", TreeDiff(reference, on_mount));
    EXPECT_EQ("", TreeDiff(reference, back));
    size_t kept = 0;
    for (const std::string& special : specials) {
      struct stat st;
      if (lstat((reference + "/" + special).c_str(), &st) != 0) {
        // Not copied on the local disk: not on the mount either.
        EXPECT_EQ(-1, lstat((on_mount + "/" + special).c_str(), &st)) << special;
        continue;
      }
      ++kept;
      const std::string want = Identity(src + "/" + special);
      EXPECT_EQ(want, Identity(reference + "/" + special)) << special;
      EXPECT_EQ(want, Identity(on_mount + "/" + special)) << special;
      EXPECT_EQ(want, Identity(back + "/" + special)) << special;
      EXPECT_EQ(want, Identity(P(tool.name + "-tree/" + special, 1))) << special;
    }
    EXPECT_EQ(tool.specials_kept, kept);
    for (const std::string& name : regular) {
      const std::string want = Identity(src + "/" + name);
      EXPECT_EQ(want, Identity(on_mount + "/" + name)) << name;
      EXPECT_EQ(want, Identity(back + "/" + name)) << name;
    }
    EXPECT_EQ(0, RunCommand("timeout 60 rm -rf " + reference + " " + on_mount + " " + back).exit_code);
  }
}

}  // namespace
}  // namespace logfs::testing
