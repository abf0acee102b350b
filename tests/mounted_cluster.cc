#include "tests/mounted_cluster.h"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "tests/meta_ha_cluster.h"

namespace logfs::testing {

void MakeWalDir(MountedCluster& c) {
  ASSERT_EQ(0, mkdir(c.Path("wal").c_str(), 0755));
  ASSERT_EQ(0, setxattr(c.Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
}

bool StopProcess(pid_t pid) {
  if (kill(pid, SIGSTOP) != 0) return false;
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (absl::Now() < deadline) {
    bool all_stopped = true;
    DIR* tasks = opendir(absl::StrCat("/proc/", pid, "/task").c_str());
    if (tasks == nullptr) return false;
    while (struct dirent* e = readdir(tasks)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(absl::StrCat("/proc/", pid, "/task/", e->d_name, "/stat"));
      std::string line;
      std::getline(in, line);
      // "tid (comm) S ...": the state follows the last ')'.
      size_t close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'T') {
        all_stopped = false;
      }
    }
    closedir(tasks);
    if (all_stopped) return true;
    absl::SleepFor(absl::Milliseconds(1));  // poll: the stop is asynchronous
  }
  return false;
}

std::string LogfsBinary() {
  const char* env = std::getenv("LOGFS_BIN");
  if (env != nullptr && *env != '\0') return env;
  char cwd[4096];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return "build/logfs";
  return absl::StrCat(cwd, "/build/logfs");
}

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = 2463534242u + static_cast<uint32_t>(seed);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    s[i] = static_cast<char>(x);
  }
  return s;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, path);
  std::string out;
  char buf[1 << 16];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, path);
    }
    if (n == 0) break;
    out.append(buf, n);
  }
  close(fd);
  return out;
}

absl::Status WriteFile(const std::string& path, const std::string& data, int flags) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | flags, 0644);
  if (fd < 0) return absl::ErrnoToStatus(errno, path);
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      int err = errno;
      close(fd);
      return absl::ErrnoToStatus(err, path);
    }
    done += n;
  }
  if (close(fd) != 0) return absl::ErrnoToStatus(errno, path);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MountedCluster>> MountedCluster::Start(
    MountedClusterOptions options) {
  std::unique_ptr<MountedCluster> mc(new MountedCluster());
  mc->options_ = std::move(options);
  if (!mc->options_.mount_hosts.empty() &&
      static_cast<int>(mc->options_.mount_hosts.size()) != mc->options_.mounts) {
    return absl::InvalidArgumentError("mount_hosts needs one host per mount");
  }
  mc->options_.mount_hosts.resize(mc->options_.mounts);  // here by default
  mc->mount_binary_ = mc->options_.binary.empty() ? LogfsBinary() : mc->options_.binary;
  char tmpl[] = "/tmp/logfs-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return absl::ErrnoToStatus(errno, "mkdtemp");
  mc->root_ = tmpl;
  for (int segd : mc->options_.tmpfs_segds) {
    std::string dir = mc->TmpfsDir(segd);
    RETURN_IF_ERROR(env::MakeDirs(dir));
    struct statvfs st;
    if (statvfs("/tmp", &st) != 0) return absl::ErrnoToStatus(errno, "statvfs /tmp");
    uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
    auto r = RunCommand(absl::StrCat("mount -t tmpfs -o size=", free_bytes, " logfs-test ", dir));
    if (r.exit_code != 0) return absl::FailedPreconditionError("mount tmpfs: " + r.output);
    mc->tmpfs_dirs_.push_back(dir);
  }
  ASSIGN_OR_RETURN(mc->cluster_, cluster::LocalCluster::Start(mc->ClusterOptions()));
  if (!mc->options_.etcd_endpoints.empty()) {
    RETURN_IF_ERROR(WaitForActiveMeta(*mc->cluster_, absl::Seconds(20)).status());
  }
  for (int i = 0; i < mc->options_.mounts; ++i) {
    std::string mnt = absl::StrCat(mc->root_, "/mnt", i);
    RETURN_IF_ERROR(env::MakeDirs(mnt));
    mc->mountpoints_.push_back(mnt);
    mc->mounted_.push_back(false);
  }
  RETURN_IF_ERROR(mc->MountAll());
  return mc;
}

MountedCluster::~MountedCluster() {
  UnmountAll().IgnoreError();  // falls back to lazy unmounts itself
  cluster_.reset();
  // A failed test keeps its processes' logs for the post-mortem.
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (!root_.empty() && test != nullptr && ::testing::Test::HasFailure()) {
    std::string keep = absl::StrCat("/tmp/logfs-test-logs/", test->test_suite_name(), ".",
                                    test->name(), "-", getpid());
    RunCommand(absl::StrCat("mkdir -p ", keep, " && cd ", root_,
                            " && find . -name '*.log' -exec cp --parents {} ", keep, " \\;"));
    std::fprintf(stderr, "logs of the failed test kept in %s\n", keep.c_str());
  }
  for (const auto& dir : tmpfs_dirs_) RunCommand("umount -l " + dir);
  if (!root_.empty()) RunCommand("rm -rf " + root_);
}

std::string MountedCluster::Path(const std::string& relative, int i) const {
  return absl::StrCat(mountpoints_[i], "/", relative);
}

std::vector<std::string> MountedCluster::MountArgv(int i) const {
  std::vector<std::string> argv = {
      mount_binary_, "mount", "--meta=" + cluster_->meta_address(),
      absl::StrCat("--log_file=", root_, "/mount", i, ".daemon.log")};
  if (options_.authenticate) {
    argv.push_back("--cluster_secret_file=" + cluster_->cluster_secret_file());
  }
  argv.insert(argv.end(), options_.mount_flags.begin(), options_.mount_flags.end());
  const cluster::ServerHost& host = options_.mount_hosts[i];
  argv.insert(argv.end(), host.flags.begin(), host.flags.end());
  argv.push_back(mountpoints_[i]);
  return argv;
}

absl::Status MountedCluster::RunMount(int i, std::vector<std::string> argv,
                                      bool close_inherited_fds) {
  std::string log = absl::StrCat(root_, "/mount", i, ".log");
  ASSIGN_OR_RETURN(pid_t pid, cluster::Spawn(argv, log, options_.mount_hosts[i].netns,
                                             close_inherited_fds));
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("logfs mount failed: ", cluster::LastLine(log)));
  }
  mounted_[i] = true;
  return absl::OkStatus();
}

absl::Status MountedCluster::MountOne(int i) {
  return RunMount(i, MountArgv(i), options_.close_inherited_fds);
}

absl::Status MountedCluster::TakeOver(int i) {
  if (!mounted_[i]) return absl::FailedPreconditionError("not mounted");
  std::vector<std::string> argv = MountArgv(i);
  argv.insert(argv.end() - 1, "--takeover");
  // Taken over while the test has files open on the mount: a daemon that
  // inherited them would keep its own mount busy.
  return RunMount(i, std::move(argv), /*close_inherited_fds=*/true);
}

absl::Status MountedCluster::MountAll() {
  for (size_t i = 0; i < mountpoints_.size(); ++i) {
    if (!mounted_[i]) RETURN_IF_ERROR(MountOne(static_cast<int>(i)));
  }
  return absl::OkStatus();
}

absl::Status MountedCluster::UnmountOne(int i, absl::Duration busy_wait) {
  if (!mounted_[i]) return absl::OkStatus();
  CommandResult r;
  const absl::Time deadline = absl::Now() + busy_wait;
  for (;;) {
    r = RunCommand(LogfsBinary() + " umount " + mountpoints_[i] + " 2>&1");
    if (r.exit_code == 0 || !absl::StrContains(r.output, "busy") || absl::Now() >= deadline) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));  // poll: the kernel tells no one when it is free
  }
  mounted_[i] = false;
  if (r.exit_code == 0) return absl::OkStatus();
  // A stuck or dead daemon: detach the mount so nothing is left behind.
  RunCommand("fusermount3 -uz " + mountpoints_[i]);
  return absl::InternalError(absl::StrCat("umount ", mountpoints_[i], ": ", r.output));
}

absl::Status MountedCluster::UnmountAll() {
  absl::Status status;
  for (size_t i = 0; i < mountpoints_.size(); ++i) {
    absl::Status one = UnmountOne(static_cast<int>(i), absl::ZeroDuration());
    if (!one.ok()) status = one;
  }
  return status;
}

absl::Status MountedCluster::RemountOne(int i) {
  // A file closed just before still holds the mount until its daemon
  // answers the kernel's RELEASE (a seal): busy for that long.
  RETURN_IF_ERROR(UnmountOne(i, absl::Seconds(30)));
  return MountOne(i);
}

absl::Status MountedCluster::Remount() {
  RETURN_IF_ERROR(UnmountAll());
  return MountAll();
}

absl::Status MountedCluster::RestartCluster() {
  RETURN_IF_ERROR(UnmountAll());
  cluster::LocalClusterOptions copts = ClusterOptions();
  if (cluster_ != nullptr) copts.binary = cluster_->binary();  // as set_binary left it
  cluster_.reset();
  ASSIGN_OR_RETURN(cluster_, cluster::LocalCluster::Start(copts));
  if (!options_.etcd_endpoints.empty()) {
    RETURN_IF_ERROR(WaitForActiveMeta(*cluster_, absl::Seconds(20)).status());
  }
  return MountAll();
}

cluster::LocalClusterOptions MountedCluster::ClusterOptions() const {
  cluster::LocalClusterOptions copts;
  copts.binary = options_.binary.empty() ? LogfsBinary() : options_.binary;
  copts.close_inherited_fds = options_.close_inherited_fds;
  copts.data_dir = options_.data_dir.empty() ? root_ + "/data" : options_.data_dir;
  if (!options_.data_dir.empty()) copts.run_dir = root_ + "/run";
  copts.segment_servers = options_.segment_servers;
  copts.meta_flags = options_.meta_flags;
  copts.segd_flags = options_.segd_flags;
  copts.meta_host = options_.meta_host;
  copts.segd_hosts = options_.segd_hosts;
  copts.authenticate = options_.authenticate;
  copts.etcd_endpoints = options_.etcd_endpoints;
  copts.meta_replicas = options_.meta_replicas;
  copts.meta_replica_flags = options_.meta_replica_flags;
  return copts;
}

pid_t MountedCluster::MountPid(int i) const {
  char buf[32] = {0};
  ssize_t n = getxattr(mountpoints_[i].c_str(), "user.logfs.mount_pid", buf, sizeof(buf) - 1);
  return n > 0 ? static_cast<pid_t>(std::atoi(buf)) : -1;
}

}  // namespace logfs::testing

namespace logfs::testing {

void MountedCluster::KillMount(int i) {
  pid_t pid = MountPid(i);
  if (pid > 0) kill(pid, SIGKILL);
  // The daemon is not our child (it daemonized): poll until it is gone.
  for (int n = 0; n < 1000 && pid > 0 && kill(pid, 0) == 0; ++n) usleep(5000);
  RunCommand("fusermount3 -uz " + mountpoints_[i]);
  mounted_[i] = false;
}

}  // namespace logfs::testing

namespace logfs::testing {

std::string MountedCluster::TmpfsDir(int segd) const {
  return absl::StrCat(root_, "/data/segd", segd);
}

absl::Status MountedCluster::FillDisk(int segd, uint64_t spare_bytes) {
  const std::string dir = TmpfsDir(segd);
  if (std::find(tmpfs_dirs_.begin(), tmpfs_dirs_.end(), dir) == tmpfs_dirs_.end()) {
    return absl::FailedPreconditionError("segment server has no tmpfs");
  }
  // The server keeps writing meanwhile: a size below its usage by then is
  // refused, so measure again and retry with more room (bounded).
  CommandResult r;
  for (int attempt = 0; attempt < 20; ++attempt) {
    struct statvfs st;
    if (statvfs(dir.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, "statvfs");
    uint64_t used = static_cast<uint64_t>(st.f_blocks - st.f_bfree) * st.f_frsize;
    uint64_t size = used + spare_bytes + attempt * (256u << 10);
    r = RunCommand(absl::StrCat("mount -o remount,size=", size, " ", dir));
    if (r.exit_code == 0) return absl::OkStatus();
  }
  return absl::FailedPreconditionError("remount tmpfs: " + r.output);
}

std::map<std::string, uint64_t> MountStats(const std::string& path) {
  char buf[4096];
  ssize_t n = getxattr(path.c_str(), "user.logfs.stats", buf, sizeof(buf));
  std::map<std::string, uint64_t> out;
  if (n < 0) return out;
  for (absl::string_view field :
       absl::StrSplit(absl::string_view(buf, n), absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, '=');
    uint64_t v = 0;
    if (absl::SimpleAtoi(kv.second, &v)) out[kv.first] = v;
  }
  return out;
}

std::string Xattr(const std::string& path, const char* name) {
  std::string buf(64 << 10, '\0');  // XATTR_SIZE_MAX
  ssize_t n = getxattr(path.c_str(), name, buf.data(), buf.size());
  return n < 0 ? "" : buf.substr(0, n);
}

std::vector<SegmentLine> Segments(const std::string& path) {
  std::string listing = Xattr(path, "user.logfs.segments");
  // A long listing is paged: "N segments in P pages: ...".
  int pages = 0;
  std::vector<std::string> words = absl::StrSplit(listing, ' ');
  if (words.size() > 4 && words[1] == "segments" && words[2] == "in" &&
      absl::SimpleAtoi(words[3], &pages)) {
    listing.clear();
    for (int p = 0; p < pages; ++p) {
      listing += Xattr(path, absl::StrCat("user.logfs.segments.", p).c_str());
    }
  }
  std::vector<SegmentLine> out;
  for (absl::string_view line : absl::StrSplit(listing, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() != 4) continue;
    SegmentLine s;
    s.id = f[0];
    s.replicas = absl::StrSplit(f[1], ',', absl::SkipEmpty());
    if (!absl::SimpleAtoi(f[2], &s.length)) continue;
    s.state = f[3];
    out.push_back(s);
  }
  return out;
}

void DropKernelCaches() {
  sync();
  int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << "drop_caches needs root";
  EXPECT_EQ(1, write(fd, "3", 1));
  close(fd);
}

}  // namespace logfs::testing
