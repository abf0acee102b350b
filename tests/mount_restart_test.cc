// Restarting a mount daemon without unmounting (issue 34 item 3;
// docs/OPERATIONS.md "Restarting a mount"): `logfs mount --takeover` and
// systemd's file descriptor store hand the /dev/fuse descriptor and the
// open handles to a new daemon; applications see a pause, never an error
// or a lost acknowledged byte. A kill -9 still leaves ENOTCONN.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/cleanup/cleanup.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

constexpr size_t kRecordBytes = 100;

// Record `i` of the appending application: its number, then a pattern.
std::string Record(uint64_t i) {
  std::string record = absl::StrCat(i, ":", Pattern(kRecordBytes, static_cast<int>(i)));
  record.resize(kRecordBytes - 1);
  record += '\n';
  return record;
}

// An application on the mount through the restarts, in a process of its
// own (as a real one is: the test's daemons must not inherit its
// descriptors of the mount, nor close them, which would send a FLUSH to
// a mount that nobody serves while it is handed over). One thread appends
// a record and fdatasyncs it, and counts it acknowledged only then;
// another reads a sealed file and the log's last acknowledged record,
// stats a directory, and lists it through a directory handle opened
// before the first restart. The counters live in shared memory.
class Application {
 public:
  Application(std::string log, std::string sealed, std::string sealed_bytes, std::string dir)
      : log_(std::move(log)), sealed_(std::move(sealed)),
        sealed_bytes_(std::move(sealed_bytes)), dir_(std::move(dir)) {
    void* shared = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    shared_ = shared == MAP_FAILED ? nullptr : new (shared) Shared();
  }
  ~Application() {
    Stop();
    if (shared_ != nullptr) munmap(shared_, sizeof(Shared));
  }

  bool Start() {
    if (shared_ == nullptr) return false;
    child_ = fork();
    if (child_ != 0) return child_ > 0;
    std::thread writer([this] { Write(); });
    std::thread reader([this] { Read(); });
    writer.join();
    reader.join();
    _exit(0);
  }
  // Asks the process to finish (its writer closes the log) and waits for
  // it, up to 60 s; then kills it.
  void Stop() {
    if (child_ <= 0) return;
    shared_->stop.store(true);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (waitpid(child_, nullptr, WNOHANG) == 0) {
      if (absl::Now() >= deadline) {
        kill(child_, SIGKILL);
        waitpid(child_, nullptr, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));  // poll: a child's exit
    }
    child_ = 0;
  }
  uint64_t acked() const { return shared_->acked.load(); }
  // Waits until `more` records more than now are acknowledged (at most 30 s).
  bool Progresses(uint64_t more) {
    const uint64_t target = acked() + more;
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (acked() < target && absl::Now() < deadline && errors() == 0) {
      absl::SleepFor(absl::Milliseconds(2));  // poll: the writer's progress
    }
    return acked() >= target;
  }
  int errors() const { return shared_->errors.load(); }
  std::string first_error() const { return errors() > 0 ? shared_->first_error : ""; }
  uint64_t reads() const { return shared_->reads.load(); }

 private:
  struct Shared {
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> acked{0};
    std::atomic<uint64_t> reads{0};
    std::atomic<int> errors{0};
    char first_error[512] = {};
  };

  void Fail(const std::string& what) {
    if (shared_->errors.fetch_add(1) == 0) {
      std::snprintf(shared_->first_error, sizeof(shared_->first_error), "%s", what.c_str());
    }
  }
  void Write() {
    const int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return Fail(absl::StrCat("open ", log_, ": ", strerror(errno)));
    for (uint64_t i = 0; !shared_->stop.load() && i < 1000000; ++i) {
      const std::string record = Record(i);
      if (write(fd, record.data(), record.size()) != static_cast<ssize_t>(record.size())) {
        Fail(absl::StrCat("write of record ", i, ": ", strerror(errno)));
        break;
      }
      if (fdatasync(fd) != 0) {
        Fail(absl::StrCat("fdatasync of record ", i, ": ", strerror(errno)));
        break;
      }
      shared_->acked.store(i + 1);
    }
    if (close(fd) != 0) Fail(absl::StrCat("close: ", strerror(errno)));
  }
  void Read() {
    const int sealed = open(sealed_.c_str(), O_RDONLY);
    DIR* dir = opendir(dir_.c_str());
    if (sealed < 0 || dir == nullptr) return Fail(absl::StrCat("open: ", strerror(errno)));
    std::string buf(sealed_bytes_.size(), '\0');
    for (uint64_t n = 0; !shared_->stop.load() && n < 10000000; ++n) {
      if (pread(sealed, buf.data(), buf.size(), 0) != static_cast<ssize_t>(buf.size()) ||
          buf != sealed_bytes_) {
        Fail(absl::StrCat("read of the sealed file: ", strerror(errno)));
        break;
      }
      // The log's last acknowledged record reads back as written.
      const uint64_t acked = shared_->acked.load();
      if (acked > 0) {
        const int log = open(log_.c_str(), O_RDONLY);
        std::string tail(kRecordBytes, '\0');
        if (log < 0 || pread(log, tail.data(), tail.size(), (acked - 1) * kRecordBytes) !=
                           static_cast<ssize_t>(kRecordBytes) ||
            tail != Record(acked - 1)) {
          Fail(absl::StrCat("read of record ", acked - 1, ": ", strerror(errno)));
        }
        if (log >= 0) close(log);
      }
      struct stat st;
      if (stat(dir_.c_str(), &st) != 0) Fail(absl::StrCat("stat: ", strerror(errno)));
      rewinddir(dir);
      int names = 0;
      errno = 0;
      while (readdir(dir) != nullptr) ++names;
      if (errno != 0 || names < 3) {
        Fail(absl::StrCat("readdir: ", names, " names, ", strerror(errno)));
      }
      shared_->reads.fetch_add(1);
    }
    closedir(dir);
    close(sealed);
  }

  const std::string log_, sealed_, sealed_bytes_, dir_;
  Shared* shared_ = nullptr;
  pid_t child_ = 0;
};

// True while process `pid` runs: not gone, and not a zombie (a daemon's
// parent is init, which may reap it late).
bool Running(pid_t pid) {
  auto stat = ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  const size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] != 'Z';
}

// Polls until process `pid` (not our child) has exited.
bool Exits(pid_t pid) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Running(pid) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));  // poll: another process's exit
  }
  return !Running(pid);
}

// Polls statfs of `path` until it fails with `error` (at most 10 s).
bool StatfsFailsWith(const std::string& path, int error) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (;;) {
    struct statfs fs;
    if (statfs(path.c_str(), &fs) != 0 && errno == error) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));  // poll: the kernel ends the connection
  }
}

// The whole log, checked against the records: every acknowledged one is
// there in order (records past it may be too: written, not yet synced).
void ExpectLogHolds(const std::string& path, uint64_t acked) {
  auto log = ReadFile(path);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_GE(log->size(), acked * kRecordBytes);
  ASSERT_EQ(0u, log->size() % kRecordBytes);
  for (uint64_t i = 0; i < log->size() / kRecordBytes; ++i) {
    ASSERT_EQ(Record(i), log->substr(i * kRecordBytes, kRecordBytes)) << "record " << i;
  }
}

struct MountedSetup {
  std::unique_ptr<MountedCluster> cluster;
  std::string sealed_bytes;
};

void StartCluster(MountedSetup* setup) {
  MountedClusterOptions options;
  options.authenticate = true;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  setup->cluster = *std::move(mc);
  MountedCluster& c = *setup->cluster;
  MakeWalDir(c);
  ASSERT_EQ(0, mkdir(c.Path("dir").c_str(), 0755));
  setup->sealed_bytes = Pattern(300000, 7);
  ASSERT_TRUE(WriteFile(c.Path("dir/sealed"), setup->sealed_bytes).ok());
}

TEST(MountRestartTest, TwentyTakeoversUnderAnAppendingSyncingReader) {
  // Goal: 20 restarts of the mount daemon by `logfs mount --takeover`
  // while an application appends and fdatasyncs a WAL file, reads a
  // sealed file and the log, stats and lists a directory through handles
  // opened before the first restart: 0 errors, every acknowledged record
  // reads back, each old daemon exits, the mount is never unmounted.
  MountedSetup setup;
  ASSERT_NO_FATAL_FAILURE(StartCluster(&setup));
  MountedCluster& c = *setup.cluster;
  Application app(c.Path("wal/log"), c.Path("dir/sealed"), setup.sealed_bytes, c.Path("dir"));
  ASSERT_TRUE(app.Start());
  ASSERT_TRUE(app.Progresses(20)) << app.first_error();
  for (int trial = 0; trial < 20; ++trial) {
    const pid_t before = c.MountPid();
    const absl::Time start = absl::Now();
    ASSERT_TRUE(c.TakeOver(0).ok()) << "trial " << trial;
    const absl::Time took_over = absl::Now();
    const pid_t after = c.MountPid();
    EXPECT_NE(before, after) << "trial " << trial;
    EXPECT_TRUE(Exits(before)) << "trial " << trial << ": daemon " << before << " still runs";
    const absl::Time exited = absl::Now();
    ASSERT_TRUE(app.Progresses(20)) << "trial " << trial << ": " << app.first_error();
    std::fprintf(stderr, "trial %d: takeover %s, old daemon gone %s later, 20 more records %s\n",
                 trial, absl::FormatDuration(took_over - start).c_str(),
                 absl::FormatDuration(exited - took_over).c_str(),
                 absl::FormatDuration(absl::Now() - exited).c_str());
  }
  app.Stop();
  EXPECT_EQ(0, app.errors()) << app.first_error();
  EXPECT_GT(app.reads(), 20u);
  ExpectLogHolds(c.Path("wal/log"), app.acked());
  // Still the same kernel mount, unmounted as any.
  absl::Status unmounted = c.UnmountAll();
  EXPECT_TRUE(unmounted.ok()) << unmounted;
}

TEST(MountRestartTest, KillMinus9AfterTakeoverLeavesEnotconn) {
  // Goal: no successor, no magic: a daemon that took over and is killed
  // leaves the mount dead (ENOTCONN), as without a restart.
  MountedSetup setup;
  ASSERT_NO_FATAL_FAILURE(StartCluster(&setup));
  MountedCluster& c = *setup.cluster;
  ASSERT_TRUE(c.TakeOver(0).ok());
  const pid_t daemon = c.MountPid();
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(0, kill(daemon, SIGKILL));
  EXPECT_TRUE(StatfsFailsWith(c.mountpoint(), ENOTCONN));
  c.KillMount(0);  // detaches the dead mount
}

TEST(MountRestartTest, RefusalsAndStopsOfATakenOverMount) {
  // Goal: a takeover with nothing to take over, or without --meta, fails
  // with a one-line reason and leaves the mount alone; one that fails
  // half-way leaves the old daemon serving; a taken-over daemon unmounts
  // on SIGTERM as any daemon does.
  MountedSetup setup;
  ASSERT_NO_FATAL_FAILURE(StartCluster(&setup));
  MountedCluster& c = *setup.cluster;
  const std::string empty = c.root() + "/empty";
  ASSERT_EQ(0, mkdir(empty.c_str(), 0755));
  CommandResult r = RunCommand(absl::StrCat(LogfsBinary(), " mount --takeover --meta=",
                                            c.cluster().meta_address(), " ", empty, " 2>&1"));
  EXPECT_EQ(1, r.exit_code);
  EXPECT_TRUE(absl::StrContains(r.output, "is not mounted: nothing to take over")) << r.output;
  r = RunCommand(absl::StrCat(LogfsBinary(), " mount --takeover ", c.mountpoint(), " 2>&1"));
  EXPECT_EQ(1, r.exit_code);
  EXPECT_TRUE(absl::StrContains(r.output, "--takeover needs --meta")) << r.output;
  auto read = ReadFile(c.Path("dir/sealed"));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == setup.sealed_bytes);
  // A successor that cannot reach meta gives up after the old daemon has
  // drained and sealed: the old one serves on, and the application, which
  // appends and syncs throughout, sees nothing but the pause.
  Application app(c.Path("wal/log"), c.Path("dir/sealed"), setup.sealed_bytes, c.Path("dir"));
  ASSERT_TRUE(app.Start());
  ASSERT_TRUE(app.Progresses(20)) << app.first_error();
  const pid_t serving = c.MountPid();
  r = RunCommand(absl::StrCat(LogfsBinary(), " mount --takeover --meta=127.0.0.1:1 --mount_wait_ms=300",
                              " --cluster_secret_file=", c.cluster().cluster_secret_file(), " ",
                              c.mountpoint(), " 2>&1"));
  EXPECT_EQ(1, r.exit_code) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "cannot resume mount")) << r.output;
  EXPECT_EQ(serving, c.MountPid());
  ASSERT_TRUE(app.Progresses(20)) << app.first_error();
  // And it can still be taken over.
  ASSERT_TRUE(c.TakeOver(0).ok());
  EXPECT_NE(serving, c.MountPid());
  ASSERT_TRUE(app.Progresses(20)) << app.first_error();
  app.Stop();
  EXPECT_EQ(0, app.errors()) << app.first_error();
  ExpectLogHolds(c.Path("wal/log"), app.acked());
  const pid_t daemon = c.MountPid();
  ASSERT_EQ(0, kill(daemon, SIGTERM));
  EXPECT_TRUE(Exits(daemon));
  r = RunCommand("grep -c ' " + c.mountpoint() + " ' /proc/mounts");
  EXPECT_EQ("0\n", r.output) << "still mounted after SIGTERM";
}

// Starts `argv` in the foreground as systemd would: $NOTIFY_SOCKET, and
// the stored descriptors as $LISTEN_FDS from 3 on with their names.
pid_t StartLikeSystemd(const std::vector<std::string>& argv, const NotifySocket& notify,
                       const std::string& log) {
  std::vector<std::string> env = {"NOTIFY_SOCKET=" + notify.path(), "PATH=/usr/bin:/bin"};
  const size_t n = notify.stored().size();
  if (n > 0) {
    env.push_back(absl::StrCat("LISTEN_FDS=", n));
    env.push_back("LISTEN_FDNAMES=" + absl::StrJoin(notify.stored_names(), ":"));
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int log_fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  std::vector<int> fds = notify.stored();
  const pid_t pid = fork();
  if (pid != 0) {
    close(log_fd);
    return pid;
  }
  // The child: only what is safe after fork until execve.
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  // Moved above the target range first, then into 3, 4, ...
  for (size_t i = 0; i < fds.size(); ++i) fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100);
  for (size_t i = 0; i < fds.size(); ++i) dup2(fds[i], 3 + static_cast<int>(i));
  char pid_env[64];
  snprintf(pid_env, sizeof(pid_env), "LISTEN_PID=%d", static_cast<int>(getpid()));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  if (n > 0) envp.push_back(pid_env);
  envp.push_back(nullptr);
  execve(args[0], args.data(), envp.data());
  _exit(127);
}

TEST(MountRestartTest, SystemdRestartHandsOverThroughTheFdStore) {
  // Goal: logfs-mount@'s restart path, with this test as systemd: on
  // SIGTERM (a restart job: --handoff_on_sigterm=always stands in for
  // asking D-Bus) the daemon stores the /dev/fuse descriptor and its state
  // (FDSTORE=1) and exits 0 without unmounting; the next instance finds
  // them in $LISTEN_FDS, serves the same mount, and removes them from the
  // store (FDSTOREREMOVE=1), so that a kill -9 of it leaves ENOTCONN. An
  // application appends and fdatasyncs throughout: 0 errors, 0 lost.
  MountedSetup setup;
  ASSERT_NO_FATAL_FAILURE(StartCluster(&setup));
  MountedCluster& c = *setup.cluster;
  // The cluster's own mount goes; the "unit's" takes its place.
  ASSERT_TRUE(c.UnmountAll().ok());
  NotifySocket notify;
  ASSERT_FALSE(notify.path().empty());
  const std::vector<std::string> argv = {
      LogfsBinary(), "mount", "-f", "--meta=" + c.cluster().meta_address(),
      "--cluster_secret_file=" + c.cluster().cluster_secret_file(),
      "--handoff_on_sigterm=always", c.mountpoint()};
  const std::string log = c.root() + "/unit.log";
  Application app(c.Path("wal/log"), c.Path("dir/sealed"), setup.sealed_bytes, c.Path("dir"));
  pid_t daemon = StartLikeSystemd(argv, notify, log);
  // Whatever happens, no daemon, no held connection and no mount are left
  // behind, and the application's threads end (ENOTCONN at worst).
  auto cleanup = absl::MakeCleanup([&] {
    if (daemon > 0 && kill(daemon, SIGKILL) == 0) waitpid(daemon, nullptr, 0);
    notify.CloseStored();
    RunCommand("fusermount3 -uz " + c.mountpoint() + " 2>/dev/null");
    app.Stop();
  });
  ASSERT_TRUE(notify.Wait("READY=1", absl::Seconds(30))) << absl::StrJoin(notify.messages(), "|");
  ASSERT_TRUE(app.Start());
  ASSERT_TRUE(app.Progresses(20)) << app.first_error();
  for (int restart = 0; restart < 3; ++restart) {
    notify.ForgetMessages();
    ASSERT_EQ(0, kill(daemon, SIGTERM));
    // The unit's TimeoutStopSec; the cleanup kills it if it is not gone.
    ASSERT_EQ(0, WaitExitCode(daemon, absl::Seconds(60)));
    daemon = 0;
    ASSERT_TRUE(notify.Wait("FDNAME=logfs-state", absl::Seconds(5)))
        << absl::StrJoin(notify.messages(), "|");
    ASSERT_EQ((std::vector<std::string>{"logfs-fuse", "logfs-state"}), notify.stored_names());
    notify.ForgetMessages();
    daemon = StartLikeSystemd(argv, notify, log);
    ASSERT_TRUE(notify.Wait("READY=1", absl::Seconds(30))) << absl::StrJoin(notify.messages(), "|");
    // Removed once it serves: nothing else holds the connection now.
    EXPECT_TRUE(notify.Wait("FDNAME=logfs-state", absl::Seconds(5)));
    EXPECT_TRUE(notify.stored().empty()) << absl::StrJoin(notify.messages(), "|");
    ASSERT_TRUE(app.Progresses(20)) << "restart " << restart << ": " << app.first_error();
  }
  app.Stop();
  EXPECT_EQ(0, app.errors()) << app.first_error();
  ExpectLogHolds(c.Path("wal/log"), app.acked());
  ASSERT_EQ(0, kill(daemon, SIGKILL));
  waitpid(daemon, nullptr, 0);
  daemon = 0;
  EXPECT_TRUE(StatfsFailsWith(c.mountpoint(), ENOTCONN));
}

}  // namespace
}  // namespace logfs::testing
