// Issue 11 items 8 and 11: a mount rides out a short meta restart. Real
// meta and segd processes, a real FUSE mount: namespace calls made while
// meta is down or restarting wait for it (up to --meta_retry_ms) instead of
// failing, a change meta applied just before it died is not applied twice
// nor reported as failed, an unreachable meta gives EIO for every call,
// and `logfs status` right after a restart says "unknown" for space it has
// not heard yet.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

std::set<std::string> List(const std::string& dir) {
  std::set<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.insert(name);
  }
  closedir(d);
  return names;
}

// Polls `done` until it holds or `timeout` passes; returns its last value.
template <typename Fn>
bool PollUntil(Fn done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(kPollInterval);
  }
  return true;
}

// The first failure of a loop of namespace calls, as "op path: errno".
class FirstError {
 public:
  void Set(const std::string& op, const std::string& path, int err) {
    absl::MutexLock lock(&mu_);
    if (text_.empty()) text_ = absl::StrCat(op, " ", path, ": ", std::strerror(err));
  }
  std::string text() {
    absl::MutexLock lock(&mu_);
    return text_;
  }

 private:
  absl::Mutex mu_;
  std::string text_;
};

// One round of the loop: mkdir d, create d/f (O_EXCL) with one byte, rename
// it to d/g, stat d/g. False (and `error` set) on the first failure.
bool Round(MountedCluster& c, int i, FirstError* error) {
  const std::string dir = c.Path(absl::StrCat("d", i));
  if (mkdir(dir.c_str(), 0755) != 0) return error->Set("mkdir", dir, errno), false;
  const std::string f = dir + "/f";
  int fd = open(f.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return error->Set("open O_CREAT|O_EXCL", f, errno), false;
  bool wrote = write(fd, "x", 1) == 1;
  int write_errno = errno;
  if (close(fd) != 0) return error->Set("close", f, errno), false;
  if (!wrote) return error->Set("write", f, write_errno), false;
  const std::string g = dir + "/g";
  if (rename(f.c_str(), g.c_str()) != 0) return error->Set("rename", f, errno), false;
  struct stat st;
  if (stat(g.c_str(), &st) != 0) return error->Set("stat", g, errno), false;
  if (st.st_size != 1) return error->Set("stat size", g, EIO), false;
  return true;
}

TEST(MetaRestartTest, NamespaceCallsRideOutMetaRestarts) {
  // Goal: while meta is killed and restarted (three times, down ~0.5 s
  // each), every namespace call of a loop on the mount succeeds, and the
  // tree afterwards is exactly what the loop made.
  // Method: a thread runs rounds of mkdir / create O_EXCL + write + close /
  // rename / stat; the test thread kill -9s meta and starts it again on the
  // same port and data dir; the loop runs until it has done rounds after
  // the last restart.
  MountedClusterOptions options;
  options.segd_flags = {"--heartbeat_interval_ms=250"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;

  FirstError error;
  std::atomic<int> rounds{0};
  std::atomic<bool> stop{false};
  constexpr int kRoundsMax = 100000;
  std::thread loop([&] {
    for (int i = 0; i < kRoundsMax && !stop.load(); ++i) {
      if (!Round(c, i, &error)) return;
      rounds.store(i + 1);
    }
  });
  // (a) Three restarts, each once the loop is under way.
  for (int restart = 0; restart < 3 && error.text().empty(); ++restart) {
    const int before = rounds.load();
    ASSERT_TRUE(PollUntil([&] { return rounds.load() >= before + 5 || !error.text().empty(); },
                          absl::Seconds(60)));
    c.cluster().KillMeta(SIGKILL);
    absl::SleepFor(absl::Milliseconds(500));  // meta stays down this long: the fault's shape
    ASSERT_TRUE(c.cluster().RestartMeta().ok());
  }
  // (b) The loop goes on after the last restart.
  const int after_restarts = rounds.load();
  PollUntil([&] { return rounds.load() >= after_restarts + 10 || !error.text().empty(); },
            absl::Seconds(60));
  stop.store(true);
  loop.join();
  ASSERT_EQ("", error.text()) << "after " << rounds.load() << " rounds";
  ASSERT_GE(rounds.load(), after_restarts + 10);
  // (c) The tree is exactly the loop's: d0..dN-1, each with g of one byte.
  std::set<std::string> want;
  for (int i = 0; i < rounds.load(); ++i) want.insert(absl::StrCat("d", i));
  EXPECT_EQ(want, List(c.mountpoint()));
  for (int i = 0; i < rounds.load(); ++i) {
    const std::string dir = c.Path(absl::StrCat("d", i));
    EXPECT_EQ(std::set<std::string>{"g"}, List(dir)) << dir;
    auto data = ReadFile(dir + "/g");
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ("x", *data) << dir;
  }
}

TEST(MetaRestartTest, ChangeAppliedJustBeforeMetaDiedIsAppliedOnce) {
  // Goal: a mkdir, a rename and an O_EXCL create that meta applied (synced)
  // and then died before answering are answered on the mount's retry with
  // their first outcome: 0, not EEXIST or ENOENT, and nothing is applied
  // twice.
  // Method: meta's --TEST_exit_before_reply_to_change=N makes it exit right
  // after it applied its Nth namespace change; the test then starts it
  // again (on the same port and data dir) with the hook set for the next
  // change, while the mount's call keeps retrying.
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  ASSERT_TRUE(WriteFile(c.Path("x"), "old").ok());
  // The hook counts every change with a call id meta handles, replays too:
  // after each restart the retried change is the first, the next one the
  // second.
  ASSERT_TRUE(c.cluster().RestartMeta({"--TEST_exit_before_reply_to_change=1"}).ok());

  int mkdir_result = -2, mkdir_errno = 0;
  int rename_result = -2, rename_errno = 0;
  int create_fd = -2, create_errno = 0;
  std::atomic<int> step{0};
  std::thread worker([&] {
    mkdir_result = mkdir(c.Path("a").c_str(), 0755);
    mkdir_errno = errno;
    step.store(1);
    rename_result = rename(c.Path("x").c_str(), c.Path("y").c_str());
    rename_errno = errno;
    step.store(2);
    create_fd = open(c.Path("c").c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
    create_errno = errno;
    if (create_fd >= 0) close(create_fd);
    step.store(3);
  });
  // (a) mkdir, rename, create: each makes meta exit once; meta comes back.
  const std::vector<std::vector<std::string>> next_flags = {
      {"--TEST_exit_before_reply_to_change=2"},
      {"--TEST_exit_before_reply_to_change=2"},
      {}};
  int crashes = 0;
  for (; crashes < 3; ++crashes) {
    const pid_t meta = c.cluster().meta_pid();
    int wait_status = 0;
    bool exited = PollUntil([&] { return !cluster::ChildRunning(meta, &wait_status); },
                            absl::Seconds(20));
    if (!exited) break;  // the worker's call did not reach meta: fails below
    EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 3) << wait_status;
    ASSERT_TRUE(c.cluster().RestartMeta(next_flags[crashes]).ok());
  }
  EXPECT_EQ(3, crashes) << "meta did not exit after each of the three changes";
  ASSERT_TRUE(PollUntil([&] { return step.load() == 3; }, absl::Seconds(60)))
      << "the mount did not answer; step " << step.load();
  worker.join();
  // (b) Each call has its first outcome.
  EXPECT_EQ(0, mkdir_result) << std::strerror(mkdir_errno);
  EXPECT_EQ(0, rename_result) << std::strerror(rename_errno);
  EXPECT_GE(create_fd, 0) << std::strerror(create_errno);
  // (c) ... and was applied once.
  EXPECT_EQ((std::set<std::string>{"a", "c", "y"}), List(c.mountpoint()));
  auto moved = ReadFile(c.Path("y"));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ("old", *moved);
}

// A child process that holds one file of the mount open and runs steps on
// it when told to. The file must not be open in the test process while
// meta restarts: RestartMeta forks, the fork gets a copy of the descriptor,
// and closing that copy at exec is a FUSE flush too, which would wait for
// the very meta being started.
class FileInChild {
 public:
  enum Step : char { kOpen = 'o', kWriteFirst = 'a', kWriteSecond = 'b', kClose = 'c' };
  static constexpr size_t kFirstBytes = 4096;
  static constexpr size_t kSecondBytes = 100;

  explicit FileInChild(const std::string& path) {
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return;
    // Prepared before fork: the child only makes system calls.
    const std::string first(kFirstBytes, 'a'), second(kSecondBytes, 'b');
    pid_ = fork();
    if (pid_ == 0) {
      close(to_child[1]);
      close(from_child[0]);
      RunChild(path.c_str(), first, second, to_child[0], from_child[1]);
    }
    close(to_child[0]);
    close(from_child[1]);
    command_fd_ = to_child[1];
    reply_fd_ = from_child[0];
  }
  ~FileInChild() {
    if (command_fd_ >= 0) close(command_fd_);  // the child exits on EOF
    if (reply_fd_ >= 0) close(reply_fd_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  // Runs `step` in the child; returns its errno (0 on success, -1 if the
  // child did not answer within a minute).
  int Run(Step step) {
    if (pid_ <= 0 || write(command_fd_, &step, 1) != 1) return -1;
    pollfd p = {reply_fd_, POLLIN, 0};
    int err = -1;
    if (poll(&p, 1, 60000) != 1 || read(reply_fd_, &err, sizeof(err)) != sizeof(err)) return -1;
    return err;
  }

 private:
  [[noreturn]] static void RunChild(const char* path, const std::string& first,
                                    const std::string& second, int command_fd, int reply_fd) {
    int fd = -1;
    char step;
    while (read(command_fd, &step, 1) == 1) {
      bool ok = false;
      switch (step) {
        case kOpen:
          fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);
          ok = fd >= 0;
          break;
        case kWriteFirst:
          ok = write(fd, first.data(), first.size()) == static_cast<ssize_t>(first.size()) &&
               fdatasync(fd) == 0;
          break;
        case kWriteSecond:
          ok = write(fd, second.data(), second.size()) == static_cast<ssize_t>(second.size());
          break;
        case kClose:
          ok = close(fd) == 0;
          break;
      }
      int err = ok ? 0 : errno;
      if (write(reply_fd, &err, sizeof(err)) != sizeof(err)) break;
    }
    _exit(0);
  }

  pid_t pid_ = -1;
  int command_fd_ = -1;
  int reply_fd_ = -1;
};

// Runs `step` in `file`'s child while meta is down, brings meta back after
// `down`, and returns the step's errno.
int WhileMetaRestarts(MountedCluster& c, FileInChild& file, FileInChild::Step step,
                      absl::Duration down) {
  c.cluster().KillMeta(SIGKILL);
  std::atomic<int> err{-1};
  std::thread worker([&] { err.store(file.Run(step)); });
  absl::SleepFor(down);  // meta stays down this long: the fault's shape
  absl::Status restarted = c.cluster().RestartMeta();
  worker.join();
  EXPECT_TRUE(restarted.ok()) << restarted;
  return err.load();
}

TEST(MetaRestartTest, SealsRideOutMetaRestart) {
  // Goal: the writer's two ways of sealing a segment in meta agree: the
  // blocking one (a roll inside write(2); FileWriter::Close) and the
  // asynchronous one (close(2), i.e. FUSE flush: FileWriter::SealAsync)
  // both wait out a short meta restart instead of failing with EIO.
  // Method: a WAL file with 4 KiB segments, held open by a child process
  // (FileInChild); (a) a write that must roll and (b) a close(2) that must
  // seal are each started while meta is killed, and meta comes back 500 ms
  // later; (c) both returned 0 and the file holds every byte, once.
  MountedClusterOptions options;
  options.mount_flags = {"--wal_segment_bytes=4096"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  const std::string path = c.Path("wal/log");
  FileInChild file(path);
  ASSERT_EQ(0, file.Run(FileInChild::kOpen));
  ASSERT_EQ(0, file.Run(FileInChild::kWriteFirst));  // fills the first segment
  // (a) The next byte rolls: seal the full segment in meta, ask for a new one.
  int roll_errno = WhileMetaRestarts(c, file, FileInChild::kWriteSecond, absl::Milliseconds(500));
  EXPECT_EQ(0, roll_errno) << "write that rolled: " << std::strerror(roll_errno);
  // (b) close(2) seals the open segment in meta (the flush seal).
  int close_errno = WhileMetaRestarts(c, file, FileInChild::kClose, absl::Milliseconds(500));
  EXPECT_EQ(0, close_errno) << "close: " << std::strerror(close_errno);
  // (c) Every byte is there, once.
  auto data = ReadFile(path);
  ASSERT_TRUE(data.ok()) << data.status();
  const std::string want =
      std::string(FileInChild::kFirstBytes, 'a') + std::string(FileInChild::kSecondBytes, 'b');
  EXPECT_EQ(want, *data);
}

// Runs `op`, returns its errno (0 on success) and how long it took.
template <typename Op>
std::pair<int, absl::Duration> Timed(Op op) {
  const absl::Time start = absl::Now();
  int err = op() ? 0 : errno;
  return {err, absl::Now() - start};
}

TEST(MetaRestartTest, UnreachableMetaIsEioForEveryCall) {
  // Goal: one errno per cause: meta unreachable past --meta_retry_ms is
  // EIO for stat, open for write and mkdir alike (open for write used to
  // give ETIMEDOUT), each after the retry window, not at once.
  // Method: SIGSTOP meta (its port accepts, nothing answers: a partition)
  // with a short retry window and attempt timeout; then SIGCONT, and the
  // same calls work again.
  MountedClusterOptions options;
  options.mount_flags = {"--meta_retry_ms=1500", "--rpc_timeout_ms=500"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  ASSERT_TRUE(WriteFile(c.Path("wal/log"), "first\n").ok());
  const pid_t meta = c.cluster().meta_pid();
  ASSERT_TRUE(StopProcess(meta));
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{meta};

  struct stat st;
  auto stat_result = Timed([&] { return stat(c.Path("never-seen").c_str(), &st) == 0; });
  auto open_result = Timed([&] {
    int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_APPEND);
    if (fd >= 0) close(fd);
    return fd >= 0;
  });
  auto mkdir_result = Timed([&] { return mkdir(c.Path("newdir").c_str(), 0755) == 0; });
  for (const auto& [name, result] : {std::pair{"stat", stat_result},
                                     std::pair{"open for write", open_result},
                                     std::pair{"mkdir", mkdir_result}}) {
    EXPECT_EQ(EIO, result.first) << name << ": " << std::strerror(result.first);
    EXPECT_GE(result.second, absl::Milliseconds(1400)) << name << " did not wait for meta";
    EXPECT_LT(result.second, absl::Seconds(10)) << name;
  }

  kill(meta, SIGCONT);
  EXPECT_EQ(0, mkdir(c.Path("newdir").c_str(), 0755)) << std::strerror(errno);
  int fd = open(c.Path("wal/log").c_str(), O_WRONLY | O_APPEND);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd >= 0) {
    EXPECT_EQ(7, write(fd, "second\n", 7));
    EXPECT_EQ(0, close(fd));
  }
  auto log = ReadFile(c.Path("wal/log"));
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ("first\nsecond\n", *log);
}

TEST(MetaRestartTest, StatusAfterMetaRestartSaysSpaceUnknown) {
  // Goal: right after a meta restart, before the segment servers'
  // heartbeats, `logfs status` shows their space as unknown, not 0.0G.
  // Method: segment servers with a heartbeat interval far beyond the test;
  // restart meta; run status.
  MountedClusterOptions options;
  options.segd_flags = {"--heartbeat_interval_ms=600000"};
  options.mounts = 0;
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  const std::string status_command =
      absl::StrCat(LogfsBinary(), " status --meta=", c.cluster().meta_address());
  // (a) Before the restart meta knows each server's space from its
  // registration.
  CommandResult before = RunCommand(status_command);
  ASSERT_EQ(0, before.exit_code) << before.output;
  EXPECT_EQ(std::string::npos, before.output.find("unknown")) << before.output;
  // (b) After it, it does not.
  c.cluster().KillMeta(SIGKILL);
  ASSERT_TRUE(c.cluster().RestartMeta().ok());
  CommandResult after = RunCommand(status_command);
  ASSERT_EQ(0, after.exit_code) << after.output;
  int server_lines = 0;
  for (absl::string_view line : absl::StrSplit(after.output, '\n')) {
    bool is_server = false;
    for (int i = 0; i < c.cluster().segment_servers(); ++i) {
      is_server |= line.find(c.cluster().segd_address(i)) != absl::string_view::npos;
    }
    if (!is_server) continue;
    ++server_lines;
    EXPECT_EQ(absl::string_view::npos, line.find("0.0G")) << line;
    EXPECT_NE(absl::string_view::npos, line.find("unknown")) << line;
    EXPECT_NE(absl::string_view::npos, line.find("none since meta start")) << line;
  }
  EXPECT_EQ(c.cluster().segment_servers(), server_lines) << after.output;
  EXPECT_NE(std::string::npos, after.output.find("space: unknown")) << after.output;
}

}  // namespace
}  // namespace logfs::testing
