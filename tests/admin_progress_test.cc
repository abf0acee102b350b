// Progress and refresh of the admin tools against a real cluster:
// `logfs fsck` shows "checked N/M segments" with an ETA on stderr, as one
// '\r' line on a terminal (a pty) and as plain lines otherwise, with its
// report unchanged; `logfs status --watch` redraws on a terminal, writes
// separators otherwise, stops after --watch_count and exits 0 on ctrl-C;
// `logfs status --format=json` gives the same report as JSON.
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr absl::Duration kCommandDeadline = absl::Seconds(20);

// Runs `args` (args[0] the program) on a new pty as its terminal (stdin,
// stdout and stderr) and returns what it wrote and its exit code, or -1
// when it did not end within kCommandDeadline (it is killed then).
CommandResult RunInPty(const std::vector<std::string>& args) {
  CommandResult result;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return result;
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  const absl::Time deadline = absl::Now() + kCommandDeadline;
  char buf[4096];
  while (absl::Now() < deadline) {
    pollfd p{master, POLLIN, 0};
    const int ready = poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = read(master, buf, sizeof(buf));
    if (n <= 0) break;  // EIO once the child closed its side
    result.output.append(buf, n);
  }
  // The pty reports EOF when the child closes it, maybe just before it
  // exits: wait for that, bounded too.
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() < deadline) {
    pollfd none{-1, 0, 0};
    poll(&none, 1, 10);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    result.exit_code = -1;
  } else {
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  close(master);
  return result;
}

class AdminProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MountedClusterOptions options;
    options.mount_flags = {"--block_segment_bytes=262144"};
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    mc_ = std::move(*mc);
    // 2 files of 3 segments each.
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(WriteFile(mc_->Path("f" + std::to_string(i)), Pattern(600000, i)).ok());
    }
    meta_ = mc_->cluster().meta_address();
  }
  std::unique_ptr<MountedCluster> mc_;
  std::string meta_;
};

TEST_F(AdminProgressTest, FsckShowsProgressOnATerminalAndPlainLinesElsewhere) {
  // Goal: the '\r' line on a pty holds "checked N/M segments" and an ETA
  // (the first state at once, the last when done); through a pipe the
  // lines are plain, on stderr only; the report on stdout is as before.
  CommandResult tty = RunInPty({LogfsBinary(), "fsck", "--meta=" + meta_});
  ASSERT_EQ(0, tty.exit_code) << tty.output;
  EXPECT_TRUE(absl::StrContains(tty.output, "\rfsck: checked 0/6 segments (0%), ETA ?"))
      << tty.output;
  EXPECT_TRUE(absl::StrContains(tty.output, "\rfsck: checked 6/6 segments (100%), ETA 0s\r\n"))
      << tty.output;
  EXPECT_TRUE(absl::StrContains(tty.output,
                                "fsck: 2 files, 6 segments (0 open: their replicas "
                                "not asked), 0 misplaced, 0 problems: HEALTHY"))
      << tty.output;

  const std::string fsck = absl::StrCat(LogfsBinary(), " fsck --meta=", meta_);
  CommandResult err = RunCommand("{ " + fsck + " 2>&1 >/dev/null; }");
  ASSERT_EQ(0, err.exit_code) << err.output;
  EXPECT_EQ(std::string::npos, err.output.find('\r')) << err.output;
  // Every 10% (a line per segment here: 6 segments) and no more.
  std::vector<std::string> lines = absl::StrSplit(err.output, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty()) << err.output;
  EXPECT_LE(lines.size(), 6u) << err.output;
  for (const std::string& line : lines) {
    EXPECT_TRUE(std::regex_match(
        line, std::regex("fsck: checked [1-6]/6 segments \\([0-9]+%\\), ETA [0-9]+s")))
        << line;
  }
  EXPECT_EQ("fsck: checked 6/6 segments (100%), ETA 0s", lines.back());
  // Braces: RunCommand appends its own 2>&1.
  CommandResult out = RunCommand("{ " + fsck + " 2>/dev/null; }");
  ASSERT_EQ(0, out.exit_code) << out.output;
  EXPECT_EQ(
      "shares: 0 segments listed by more than one file, 0 share records disagree with the files\n"
      "fsck: 2 files, 6 segments (0 open: their replicas not asked), 0 misplaced, 0 problems: "
      "HEALTHY\n",
      out.output);
  CommandResult quiet = RunCommand(fsck + " --noprogress");  // stderr too
  EXPECT_EQ(out.output, quiet.output);
}

TEST_F(AdminProgressTest, StatusWatchRedrawsOrSeparatesAndStops) {
  // Goal: --watch_count=N gives N reports: on a terminal each after a
  // clear-screen and a header, elsewhere after a "---" separator; bare
  // --watch works (2 s); bad values are refused with a clear error.
  CommandResult tty =
      RunInPty({LogfsBinary(), "status", "--meta=" + meta_, "--watch=0.2", "--watch_count=2"});
  ASSERT_EQ(0, tty.exit_code) << tty.output;
  std::vector<std::string> screens = absl::StrSplit(tty.output, "\x1b[H\x1b[2J");
  ASSERT_EQ(3u, screens.size()) << tty.output;
  for (int i = 1; i <= 2; ++i) {
    EXPECT_TRUE(absl::StartsWith(screens[i], "every 0.2s: logfs status --meta=" + meta_))
        << screens[i];
    EXPECT_TRUE(absl::StrContains(screens[i], "servers: 3 (3 live, 0 dead)")) << screens[i];
    EXPECT_TRUE(absl::StrContains(screens[i], "re-replication: 0 segments left")) << screens[i];
  }
  const std::string status = absl::StrCat(LogfsBinary(), " status --meta=", meta_);
  CommandResult plain = RunCommand(status + " --watch=0.2 --watch_count=3");
  ASSERT_EQ(0, plain.exit_code) << plain.output;
  EXPECT_EQ(std::string::npos, plain.output.find('\x1b')) << plain.output;
  for (int i = 1; i <= 3; ++i) {
    EXPECT_TRUE(std::regex_search(
        plain.output, std::regex(absl::StrCat("(^|\n)--- [0-9-]+ [0-9:]+ UTC \\(report ", i,
                                              "\\)\nservers: 3 "))))
        << plain.output;
  }
  EXPECT_EQ(std::string::npos, plain.output.find("(report 4)")) << plain.output;
  CommandResult bare = RunCommand(status + " --watch --watch_count=1");
  ASSERT_EQ(0, bare.exit_code) << bare.output;
  EXPECT_TRUE(absl::StrContains(bare.output, "(report 1)\nservers: 3")) << bare.output;
  // The interval as its own word, as watch(1) takes `-n 5`.
  CommandResult spaced = RunCommand(status + " --watch 0.2 --watch_count=2");
  ASSERT_EQ(0, spaced.exit_code) << spaced.output;
  EXPECT_TRUE(absl::StrContains(spaced.output, "(report 2)\nservers: 3")) << spaced.output;
  // Meta unreachable: each report says so, the watch goes on, and a
  // bounded one exits 1.
  CommandResult gone = RunCommand(LogfsBinary() +
                                  " status --meta=127.0.0.1:1 --watch=0.1 "
                                  "--watch_count=2 --rpc_timeout_ms=500");
  EXPECT_EQ(1, gone.exit_code) << gone.output;
  EXPECT_TRUE(absl::StrContains(gone.output,
                                "(report 2)\nlogfs status: cannot ask meta at "
                                "127.0.0.1:1"))
      << gone.output;
  CommandResult bad = RunCommand(status + " --watch=-1");
  EXPECT_EQ(1, bad.exit_code);
  EXPECT_TRUE(absl::StrContains(bad.output, "--watch=-1: want 0 (once) or 0.1 to 86400 seconds"))
      << bad.output;
  CommandResult bad_count = RunCommand(status + " --watch=1 --watch_count=-2");
  EXPECT_EQ(1, bad_count.exit_code);
  EXPECT_TRUE(absl::StrContains(bad_count.output, "--watch_count=-2")) << bad_count.output;
}

TEST_F(AdminProgressTest, StatusJsonSaysWhatTheTextSaysForScripts) {
  // Goal: `logfs status --format=json` prints one line, a JSON object with
  // the cluster as it is (3 live servers, the 2 files and 6 sealed
  // segments SetUp wrote, one active meta), naming the servers the text
  // names; with --watch, one such line per report and nothing else; a bad
  // --format is refused in one line.
  // Method: python3's json module parses the output when the machine has
  // python3; key fields are checked as text either way.
  const std::string status = absl::StrCat(LogfsBinary(), " status --meta=", meta_);
  // Braces: RunCommand appends its own 2>&1; stdout alone is the report.
  CommandResult json = RunCommand("{ " + status + " --format=json 2>/dev/null; }");
  ASSERT_EQ(0, json.exit_code) << json.output;
  ASSERT_TRUE(absl::EndsWith(json.output, "}\n")) << json.output;
  EXPECT_EQ(json.output.size() - 1, json.output.find('\n')) << json.output;
  for (const char* field :
       {"\"server_counts\":{\"total\":3,\"live\":3,\"dead\":0,\"failed\":0,\"unreachable\":0}",
        "\"files\":2,\"segments\":{\"total\":6,\"open\":0,\"under_replicated\":0}",
        "\"state\":\"live\""}) {
    EXPECT_TRUE(absl::StrContains(json.output, field)) << field << " in " << json.output;
  }
  CommandResult text = RunCommand("{ " + status + " 2>/dev/null; }");
  ASSERT_EQ(0, text.exit_code) << text.output;

  if (RunCommand("command -v python3").exit_code == 0) {
    char tmpl[] = "/tmp/logfs-status-json-XXXXXX";
    const int fd = mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    close(fd);
    const std::string path = tmpl;
    ASSERT_TRUE(WriteFile(path, json.output).ok());
    // One line: live count, states, files, segments (total, open,
    // under-replicated), active metas, whether every server reported
    // capacity >= free > 0, then the servers' addresses.
    const std::string script =
        "import json, sys\n"
        "d = json.load(open(sys.argv[1]))\n"
        "s = d['servers']\n"
        "print(d['server_counts']['live'], ','.join(x['state'] for x in s), d['files'],\n"
        "      d['segments']['total'], d['segments']['open'], d['segments']['under_replicated'],\n"
        "      sum(1 for m in d['metas'] if m['reachable'] and m['active']),\n"
        "      all(isinstance(x['free_bytes'], int) and x['capacity_bytes'] >= x['free_bytes'] > "
        "0\n"
        "          for x in s),\n"
        "      d['rereplication']['left_segments'], ' '.join(x['address'] for x in s))\n";
    ASSERT_TRUE(WriteFile(path + ".py", script).ok());
    CommandResult parsed = RunCommand("python3 " + path + ".py " + path);
    RunCommand("rm -f " + path + " " + path + ".py");
    ASSERT_EQ(0, parsed.exit_code) << parsed.output << "\nfrom:\n" << json.output;
    std::vector<std::string> words =
        absl::StrSplit(absl::StripTrailingAsciiWhitespace(parsed.output), ' ');
    ASSERT_EQ(12u, words.size()) << parsed.output;
    EXPECT_EQ("3 live,live,live 2 6 0 0 1 True 0",
              absl::StrJoin(words.begin(), words.begin() + 9, " "))
        << json.output;
    for (size_t i = 9; i < words.size(); ++i) {
      EXPECT_TRUE(absl::StrContains(text.output, words[i] + " ")) << words[i] << text.output;
    }
  }

  // With --watch: JSON Lines, no separators.
  CommandResult watch =
      RunCommand("{ " + status + " --format=json --watch=0.2 --watch_count=2 2>/dev/null; }");
  ASSERT_EQ(0, watch.exit_code) << watch.output;
  std::vector<std::string> lines = absl::StrSplit(watch.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(2u, lines.size()) << watch.output;
  for (const std::string& line : lines) {
    EXPECT_TRUE(absl::StartsWith(line, "{\"metas\":[")) << line;
    EXPECT_TRUE(absl::EndsWith(line, "}}")) << line;
  }

  CommandResult bad = RunCommand(status + " --format=xml");
  EXPECT_EQ(1, bad.exit_code) << bad.output;
  EXPECT_EQ("logfs status: --format=xml: want text or json\n", bad.output);
}

TEST_F(AdminProgressTest, StatusWatchExitsZeroOnCtrlC) {
  // Goal: SIGINT ends an unbounded watch with exit 0, also while it waits.
  // Method: read its stdout until the first report, then SIGINT.
  int out[2];
  ASSERT_EQ(0, pipe(out));
  const std::string meta_flag = "--meta=" + meta_;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    execl(LogfsBinary().c_str(), LogfsBinary().c_str(), "status", meta_flag.c_str(), "--watch=5",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string seen;
  const absl::Time deadline = absl::Now() + kCommandDeadline;
  char buf[4096];
  while (absl::Now() < deadline && !absl::StrContains(seen, "re-replication:")) {
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    const ssize_t n = read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    seen.append(buf, n);
  }
  EXPECT_TRUE(absl::StrContains(seen, "re-replication:")) << seen;
  ASSERT_EQ(0, kill(pid, SIGINT));
  int status = 0;
  pid_t done = 0;
  const absl::Time wait_deadline = absl::Now() + absl::Seconds(10);
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && absl::Now() < wait_deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    ADD_FAILURE() << "status --watch did not end on SIGINT";
  }
  close(out[0]);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(0, WEXITSTATUS(status));
}

}  // namespace
}  // namespace logfs::testing
