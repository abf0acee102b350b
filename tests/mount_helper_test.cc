// The mount(8) helper: `logfs` run as mount.fuse.logfs (a symlink) mounts
// SRC at MNT with -o options, as mount(8) and fstab lines call it
// (src/main/mount_helper_main.cc, docs/OPERATIONS.md "Mount options").
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "store/format/xattr_names.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// The /proc/mounts line of `mountpoint`: source, target, type, options;
// empty if it is not mounted.
std::vector<std::string> MountLine(const std::string& mountpoint) {
  std::ifstream in("/proc/self/mounts");
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() >= 4 && fields[1] == mountpoint) return fields;
  }
  return {};
}

bool HasOption(const std::vector<std::string>& line, const std::string& option) {
  if (line.size() < 4) return false;
  for (absl::string_view o : absl::StrSplit(line[3], ',')) {
    if (o == option) return true;
  }
  return false;
}

size_t CountOccurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Polls until `pid` no longer exists; false if it still does after 20 s.
bool WaitGone(pid_t pid) {
  for (int i = 0; i < 2000; ++i) {
    if (kill(pid, 0) != 0) return true;
    usleep(10000);  // polling another process's exit
  }
  return false;
}

std::string AbsoluteBinary() {
  char resolved[PATH_MAX];
  return realpath(LogfsBinary().c_str(), resolved) != nullptr ? resolved : LogfsBinary();
}

class MountHelperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-helper-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
    helper_ = dir_ + "/mount.fuse.logfs";
    mnt_ = dir_ + "/mnt";
    ASSERT_EQ(0, symlink(AbsoluteBinary().c_str(), helper_.c_str()));
    ASSERT_EQ(0, mkdir(mnt_.c_str(), 0755));
  }

  // Unmounts whatever a test left mounted (the mount's daemon exits with
  // it), then stops the cluster and removes the temp dir.
  void TearDown() override {
    if (!MountLine(mnt_).empty()) {
      if (RunCommand("umount " + mnt_).exit_code != 0) RunCommand("fusermount3 -uz " + mnt_);
    }
    cluster_.reset();
    RunCommand("rm -rf " + dir_);
  }

  void StartCluster() {
    MountedClusterOptions options;
    options.mounts = 0;
    auto started = MountedCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster_ = std::move(*started);
  }
  std::string Meta() { return cluster_->cluster().meta_address(); }

  // The helper's command line, its daemon logging under the temp dir.
  std::string Helper(const std::string& meta, const std::string& options) {
    return absl::StrCat("timeout 120 ", helper_, " ", meta, " ", mnt_, " -o ", options,
                        ",log_file=", dir_, "/daemon.log");
  }

  // A file written and read back through the mount, and the mount's
  // /proc/mounts line as the helper promises it.
  void ExpectServes(const std::string& meta, const std::string& name) {
    std::vector<std::string> line = MountLine(mnt_);
    ASSERT_GE(line.size(), 4u) << mnt_ << " is not mounted";
    EXPECT_EQ(meta, line[0]);
    EXPECT_EQ("fuse.logfs", line[2]);
    EXPECT_TRUE(HasOption(line, "nodev")) << line[3];
    EXPECT_TRUE(HasOption(line, "nosuid")) << line[3];
    const std::string data = Pattern(100000, 15);
    ASSERT_TRUE(WriteFile(mnt_ + "/" + name, data).ok());
    auto read = ReadFile(mnt_ + "/" + name);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ(data, *read);
  }

  // umount(8) as root; the daemon exits and the mount point is free.
  void Umount() {
    std::string pid = Xattr(mnt_, format::kMountPidXattr);
    ASSERT_FALSE(pid.empty());
    CommandResult r = RunCommand("umount " + mnt_);
    ASSERT_EQ(0, r.exit_code) << r.output;
    EXPECT_TRUE(WaitGone(std::stoi(pid))) << "mount daemon " << pid << " still runs";
    EXPECT_TRUE(MountLine(mnt_).empty());
  }

  std::string dir_, helper_, mnt_;
  std::unique_ptr<MountedCluster> cluster_;
};

TEST_F(MountHelperTest, MountsServesAndUmounts) {
  StartCluster();
  CommandResult r = RunCommand(Helper(Meta(), "rw,_netdev,nofail,fsync_timeout_ms=20000"));
  ASSERT_EQ(0, r.exit_code) << r.output;
  ExpectServes(Meta(), "a");
  Umount();
  // The file outlived the mount: a new one reads what the first wrote.
  r = RunCommand(Helper(Meta(), "ro,nodev"));
  ASSERT_EQ(0, r.exit_code) << r.output;
  auto read = ReadFile(mnt_ + "/a");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Pattern(100000, 15), *read);
  EXPECT_TRUE(HasOption(MountLine(mnt_), "ro"));
  errno = 0;
  EXPECT_EQ(-1, open((mnt_ + "/b").c_str(), O_CREAT | O_WRONLY, 0644));
  EXPECT_EQ(EROFS, errno);
  Umount();
}

// One line naming the option, exit status 1, nothing mounted.
TEST_F(MountHelperTest, RefusesBadOptions) {
  struct Case {
    std::string options, message;
  };
  const Case cases[] = {
      {"_netdev,bogus_option=1", "unknown mount option 'bogus_option=1'"},
      {"suid", "mount option 'suid' is refused: logfs mounts are always nodev,nosuid"},
      {"dev", "mount option 'dev' is refused"},
      {"meta=127.0.0.1:1", "unknown mount option 'meta=127.0.0.1:1'"},
      {"fsync_timeout_ms=0", "--fsync_timeout_ms must be at least 1"},
      {"fsync_timeout_ms", "mount option 'fsync_timeout_ms' needs a value"},
  };
  for (const Case& c : cases) {
    CommandResult r = RunCommand(Helper("127.0.0.1:1", c.options));
    EXPECT_EQ(1, r.exit_code) << c.options << ": " << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, c.message)) << c.options << ": " << r.output;
    EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 2) << r.output;
    EXPECT_TRUE(MountLine(mnt_).empty());
  }
  // -s (sloppy) lets an unknown option through; -f (fake) does not mount.
  CommandResult r = RunCommand(Helper("127.0.0.1:1", "bogus_option") + " -s -f");
  EXPECT_EQ(0, r.exit_code) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "ignoring unknown mount option 'bogus_option'"));
  EXPECT_TRUE(MountLine(mnt_).empty());
  // Every flag `logfs mount --help` lists but those the helper sets itself
  // is an option: the metrics ones too.
  r = RunCommand(Helper("127.0.0.1:1", "metrics_listen=127.0.0.1:0") + " -f");
  EXPECT_EQ(0, r.exit_code) << r.output;
  r = RunCommand(helper_ + " --help");
  EXPECT_EQ(0, r.exit_code);
  EXPECT_EQ(1, CountOccurrences(r.output, "usage:")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--metrics_listen=")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--fsync_timeout_ms=")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "--data_dir=")) << r.output;
}

// Meta down when the helper starts (a boot, a meta restart): the mount
// waits for it and then serves.
TEST_F(MountHelperTest, WaitsForMeta) {
  StartCluster();
  const std::string meta = Meta();
  cluster_->cluster().KillMeta(SIGKILL);
  const std::string log = dir_ + "/daemon.log";
  auto pid =
      cluster::Spawn({helper_, meta, mnt_, "-o", "_netdev,mount_wait_ms=60000,log_file=" + log},
                     dir_ + "/helper.log");
  ASSERT_TRUE(pid.ok()) << pid.status();
  // Its retries show in the daemon's log before meta comes back.
  bool waiting = false;
  for (int i = 0; i < 1000 && !waiting; ++i) {
    auto text = ReadFile(log);
    waiting = text.ok() && absl::StrContains(*text, "not reachable (attempt 2)");
    if (!waiting) usleep(10000);  // polling the log
  }
  ASSERT_TRUE(waiting) << "no retry logged";
  ASSERT_TRUE(cluster::ChildRunning(*pid)) << "the helper gave up at once";
  ASSERT_TRUE(cluster_->cluster().RestartMeta().ok());
  int status = 0;
  for (int i = 0; i < 3000 && cluster::ChildRunning(*pid, &status); ++i) {
    usleep(10000);  // polling the helper's exit
  }
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(0, WEXITSTATUS(status)) << cluster::LastLine(dir_ + "/helper.log");
  ExpectServes(meta, "after-wait");
  Umount();
}

// Meta never comes: the helper fails after the bound, with the reason.
TEST_F(MountHelperTest, GivesUpAfterMountWait) {
  StartCluster();
  const std::string meta = Meta();
  cluster_->cluster().KillMeta(SIGKILL);
  const absl::Time start = absl::Now();
  CommandResult r = RunCommand(Helper(meta, "nofail,mount_wait_ms=1500"));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(1, r.exit_code) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "cannot reach meta at " + meta)) << r.output;
  EXPECT_GE(took, absl::Milliseconds(1500));
  EXPECT_LT(took, absl::Seconds(8));
  EXPECT_TRUE(MountLine(mnt_).empty());
}

// mount(8) finds /sbin/mount.fuse.logfs for `mount -t fuse.logfs` and for
// fstab lines (`mount -a -T`, `mount -T FSTAB MNT`); umount(8) unmounts.
TEST_F(MountHelperTest, MountCommandAndFstab) {
  const std::string link = "/usr/sbin/mount.fuse.logfs";
  const std::string binary = AbsoluteBinary();
  char target[PATH_MAX] = {0};
  ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  struct stat st;
  if (n < 0 && lstat(link.c_str(), &st) == 0) GTEST_SKIP() << link << " exists and is no link";
  if (n > 0 && binary != target) {
    GTEST_SKIP() << link << " points to " << target << ", not to " << binary;
  }
  // Made here, removed however the test ends.
  struct LinkGuard {
    std::string path;
    ~LinkGuard() {
      if (!path.empty()) unlink(path.c_str());
    }
  } guard;
  if (n < 0) {
    ASSERT_EQ(0, symlink(binary.c_str(), link.c_str())) << "cannot create " << link;
    guard.path = link;
  }
  StartCluster();
  const std::string options =
      absl::StrCat("_netdev,nofail,fsync_timeout_ms=20000,log_file=", dir_, "/daemon.log");
  CommandResult r = RunCommand(
      absl::StrCat("timeout 120 mount -t fuse.logfs ", Meta(), " ", mnt_, " -o ", options));
  ASSERT_EQ(0, r.exit_code) << r.output;
  ExpectServes(Meta(), "by-type");
  Umount();

  // A list of meta replicas (the first never answers), shown whole as
  // the source.
  const std::string list = "127.0.0.1:1," + Meta();
  const std::string fstab = dir_ + "/fstab";
  std::ofstream(fstab) << "# logfs\n"
                       << list << " " << mnt_ << " fuse.logfs " << options
                       << ",x-systemd.mount-timeout=90 0 0\n";
  r = RunCommand("timeout 120 mount -a -T " + fstab);
  ASSERT_EQ(0, r.exit_code) << r.output;
  ExpectServes(list, "by-fstab");
  // mount -a again: the line is seen mounted (the source is the meta list).
  r = RunCommand("timeout 120 mount -a -T " + fstab);
  EXPECT_EQ(0, r.exit_code) << r.output;
  r = RunCommand("grep -c ' " + mnt_ + " ' /proc/self/mounts");
  EXPECT_EQ("1\n", r.output);
  Umount();
  r = RunCommand(absl::StrCat("timeout 120 mount -T ", fstab, " ", mnt_));
  ASSERT_EQ(0, r.exit_code) << r.output;
  auto read = ReadFile(mnt_ + "/by-fstab");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Pattern(100000, 15), *read);

  // Its daemon killed, the mount point is dead ("Transport endpoint is
  // not connected"); mounting it again detaches the dead mount and serves.
  const pid_t daemon = std::atoi(Xattr(mnt_, format::kMountPidXattr).c_str());
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(0, kill(daemon, SIGKILL));
  ASSERT_TRUE(WaitGone(daemon));
  struct stat dead;
  EXPECT_NE(0, stat((mnt_ + "/never-looked-up").c_str(), &dead));
  EXPECT_EQ(ENOTCONN, errno);
  r = RunCommand(absl::StrCat("timeout 120 mount -T ", fstab, " ", mnt_, " 2>&1"));
  ASSERT_EQ(0, r.exit_code) << r.output;
  read = ReadFile(mnt_ + "/by-fstab");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(Pattern(100000, 15), *read);
  r = RunCommand("grep -c ' " + mnt_ + " ' /proc/self/mounts");
  EXPECT_EQ("1\n", r.output);  // the dead one is gone, not stacked under
  Umount();
}

// A journald stand-in for one stream client: a Unix stream socket that
// accepts one connection and reads what it sends (sd_journal_stream_fd's
// header, then the log lines).
class JournalStub {
 public:
  explicit JournalStub(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    ok_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          listen(fd_, 4) == 0;
  }
  ~JournalStub() {
    if (client_ >= 0) close(client_);
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }

  // Accepts the first client (30 s at most); returns its pid
  // (SO_PEERCRED), 0 if none came.
  pid_t Accept() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 30000) != 1) return 0;
    client_ = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client_ < 0) return 0;
    ucred cred{};
    socklen_t len = sizeof(cred);
    return getsockopt(client_, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 ? cred.pid : 0;
  }

  // Reads from the client into text_ until it has `lines` lines, the
  // client closes, or 30 s passed; returns text_.
  const std::string& Read(size_t lines) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (client_ >= 0 &&
           std::count(text_.begin(), text_.end(), '\n') < static_cast<long>(lines) &&
           absl::Now() < deadline) {
      pollfd c{client_, POLLIN, 0};
      if (poll(&c, 1, 1000) != 1) continue;
      char buf[4096];
      const ssize_t n = read(client_, buf, sizeof(buf));
      if (n <= 0) break;
      text_.append(buf, n);
    }
    return text_;
  }

 private:
  std::string path_;
  std::string text_;
  int fd_ = -1;
  int client_ = -1;
  bool ok_ = false;
};

TEST_F(MountHelperTest, DaemonLogsToTheJournalWhenJournaldRuns) {
  // Goal: a mount daemon with --meta and no log_file (an fstab line on a
  // systemd host) logs to the journal (`journalctl -t logfs-mount`), not
  // to a file in /tmp. Method: in a mount namespace of its own (unshare
  // -m), /run is a fresh tmpfs whose /run/systemd/journal/stdout links to
  // a stub socket; the helper mounts there; the stub must get
  // sd_journal_stream_fd's header naming logfs-mount, then glog lines. The
  // daemon (the stub's peer) is stopped by PID; its namespace, mount and
  // all, goes with it.
  StartCluster();
  JournalStub journal(dir_ + "/journal.sock");
  ASSERT_TRUE(journal.ok());
  const std::string script =
      absl::StrCat("mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && ln -s ", dir_,
                   "/journal.sock /run/systemd/journal/stdout && exec timeout 120 ", helper_, " ",
                   Meta(), " ", mnt_);
  // However the test ends, no daemon outlives it (unseen in its namespace).
  struct Reaper {
    std::string mnt;
    ~Reaper() { RunCommand("pkill -KILL -f -- ' " + mnt + "$'"); }
  } reaper{mnt_};
  CommandResult r = RunCommand("unshare -m sh -c '" + script + "' 2>&1");
  ASSERT_EQ(0, r.exit_code) << r.output;
  const pid_t daemon = journal.Accept();
  ASSERT_GT(daemon, 0);
  // Stopped, the daemon logs its unmount and closes the stream.
  EXPECT_EQ(0, kill(daemon, SIGTERM));
  EXPECT_TRUE(WaitGone(daemon));
  const std::string text = journal.Read(1000);  // to the end
  // Header: identifier, unit id, priority, level prefix, forward to
  // syslog, kmsg, console; then the log lines.
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  ASSERT_GE(lines.size(), 8u) << text;
  EXPECT_EQ("logfs-mount", lines[0]);
  EXPECT_EQ("6", lines[2]);  // LOG_INFO
  EXPECT_TRUE(absl::StrContains(text, "unmounted " + mnt_)) << text;
}

}  // namespace
}  // namespace logfs::testing
