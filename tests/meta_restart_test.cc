// Issue 11 items 8 and 11: a mount rides out a short meta restart. Real
// meta and segd processes, a real FUSE mount: namespace calls made while
// meta is down or restarting wait for it (up to --meta_retry_ms) instead of
// failing, a change meta applied just before it died is not applied twice
// nor reported as failed, an unreachable meta gives EIO for every call,
// and `logfs status` right after a restart says "unknown" for space it has
// not heard yet.
#include <fcntl.h>
#include <gtest/gtest.h>
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
