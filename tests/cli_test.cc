// Every logfs process exits non-zero with a one-line reason on bad flags,
// a busy port, an unusable data dir or an unreachable meta.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "tests/fakes/loopback_exchange.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// Processes a test spawned, stopped however it ends (last first).
struct Children {
  std::vector<pid_t> pids;
  ~Children() {
    for (auto it = pids.rbegin(); it != pids.rend(); ++it) {
      cluster::StopChild(*it, SIGTERM, absl::Seconds(10));
    }
  }
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-cli-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { RunCommand("rm -rf " + dir_); }

  // Runs logfs with `args`; expects failure with one line naming `reason`.
  void ExpectOneLineFailure(const std::string& args, const std::string& reason) {
    auto r = RunCommand(absl::StrCat("timeout 20 ", LogfsBinary(), " ", args));
    EXPECT_NE(0, r.exit_code) << args;
    EXPECT_NE(124, r.exit_code) << args << ": hung instead of failing";
    std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
    EXPECT_EQ(1u, lines.size()) << args << " printed:\n" << r.output;
    EXPECT_NE(std::string::npos, r.output.find(reason)) << args << " printed:\n" << r.output;
  }

  // Runs logfs with `args`, a flag value out of range; expects exit code 1
  // with `rule` ("logfs: --io_threads must be at least 1, not 0") as the
  // first line, then at most gflags' own generic line.
  void ExpectFlagRefused(const std::string& args, const std::string& rule) {
    auto r = RunCommand(absl::StrCat("timeout 20 ", LogfsBinary(), " ", args));
    EXPECT_EQ(1, r.exit_code) << args << " printed:\n" << r.output;
    std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
    ASSERT_FALSE(lines.empty()) << args;
    EXPECT_EQ(rule, lines[0]) << args << " printed:\n" << r.output;
    EXPECT_LE(lines.size(), 2u) << args << " printed:\n" << r.output;
  }

  std::string dir_;
};

TEST_F(CliTest, UnknownFlagAndSubcommand) {
  ExpectOneLineFailure("meta --data_dir=" + dir_ + " --no_such_flag=1", "no_such_flag");
  ExpectFlagRefused("segd --data_dir=" + dir_ + " --meta=127.0.0.1:1 --sync_interval_ms=-5",
                    "logfs: --sync_interval_ms must be at least 1, not -5");
  auto r = RunCommand(LogfsBinary() + " frobnicate");
  EXPECT_NE(0, r.exit_code);
  EXPECT_NE(std::string::npos, r.output.find("unknown subcommand 'frobnicate'"));
}

TEST_F(CliTest, AFlagValueOutOfRangeSaysWhatIsValid) {
  // Goal: a refused flag value names the flag and its rule, not only
  // gflags' "failed validation of new value", and nothing is created.
  ExpectFlagRefused("meta --data_dir=" + dir_ + "/m --dead_server_ms=0",
                    "logfs: --dead_server_ms must be at least 1, not 0");
  ExpectFlagRefused("status --meta=127.0.0.1:1 --io_threads=0",
                    "logfs: --io_threads must be at least 1, not 0");
  ExpectFlagRefused("segd --data_dir=" + dir_ + "/s --meta=127.0.0.1:1 --journal_bytes=4096",
                    "logfs: --journal_bytes must be at least 1048576, not 4096");
  ExpectFlagRefused("mount --meta=127.0.0.1:1 --meta_retry_ms=-1 " + dir_,
                    "logfs: --meta_retry_ms must be at least 0, not -1");
  EXPECT_NE(0, access((dir_ + "/m").c_str(), F_OK));
}

TEST_F(CliTest, ASegmentSizeOrTimeoutOfZeroIsRefused) {
  // Goal: --wal_segment_bytes=0 (or block) made the first write roll
  // forever and --fsync_timeout_ms=0 failed every sync: mount refuses
  // them, and segment sizes under a page, up front.
  const std::string mount = "mount --meta=127.0.0.1:1 ";
  ExpectFlagRefused(mount + "--wal_segment_bytes=0 " + dir_,
                    "logfs: --wal_segment_bytes must be at least 4096, not 0");
  ExpectFlagRefused(mount + "--block_segment_bytes=4095 " + dir_,
                    "logfs: --block_segment_bytes must be at least 4096, not 4095");
  ExpectFlagRefused(mount + "--fsync_timeout_ms=0 " + dir_,
                    "logfs: --fsync_timeout_ms must be at least 1, not 0");
  ExpectFlagRefused(mount + "--replica_timeout_ms=-1 " + dir_,
                    "logfs: --replica_timeout_ms must be at least 1, not -1");
}

TEST_F(CliTest, AnUnexpectedArgumentIsRefusedWithTheUsage) {
  // Goal: a positional argument a subcommand does not take is refused
  // before anything is asked or created, naming it, with the usage line.
  struct Case {
    std::string args;
    int exit_code;
    std::string usage;
  };
  const std::vector<Case> cases = {
      {"fsck --meta=127.0.0.1:1 extra", 2, "usage: logfs fsck --meta=HOST:PORT"},
      {"status --meta=127.0.0.1:1 extra", 1, "usage: logfs status --meta=HOST:PORT"},
      {"meta --data_dir=" + dir_ + "/m extra", 1, "usage: logfs meta --data_dir=DIR"},
      {"segd --data_dir=" + dir_ + "/s --meta=127.0.0.1:1 extra", 1,
       "usage: logfs segd --data_dir=DIR"},
      {"recover " + dir_ + " extra", 1, "usage: logfs recover [--meta=HOST:PORT] PATH"},
      {"checker write extra", 1, "usage: logfs checker write|verify"},
  };
  for (const Case& c : cases) {
    auto r = RunCommand(absl::StrCat("timeout 20 ", LogfsBinary(), " ", c.args));
    EXPECT_EQ(c.exit_code, r.exit_code) << c.args << " printed:\n" << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "unexpected argument 'extra'")) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, c.usage)) << c.args << " printed:\n" << r.output;
  }
  EXPECT_NE(0, access((dir_ + "/m").c_str(), F_OK));
  EXPECT_NE(0, access((dir_ + "/s").c_str(), F_OK));
}

TEST_F(CliTest, HelpListsTheSubcommandsFlagsAndExitsZero) {
  auto mount = RunCommand(LogfsBinary() + " mount --help");
  EXPECT_EQ(0, mount.exit_code) << mount.output;
  EXPECT_NE(std::string::npos, mount.output.find("usage: logfs mount")) << mount.output;
  for (const char* flag : {"--block_cache_bytes=", "--short_circuit=", "--data_dir=", "--meta="}) {
    EXPECT_NE(std::string::npos, mount.output.find(flag)) << flag << " missing:\n" << mount.output;
  }
  EXPECT_EQ(std::string::npos, mount.output.find("--journal_bytes")) << mount.output;
  auto segd = RunCommand(LogfsBinary() + " segd -h");
  EXPECT_EQ(0, segd.exit_code) << segd.output;
  EXPECT_NE(std::string::npos, segd.output.find("--journal_bytes=")) << segd.output;
  EXPECT_EQ(std::string::npos, segd.output.find("--block_cache_bytes")) << segd.output;
  auto bench = RunCommand(LogfsBinary() + " bench --help");
  EXPECT_EQ(0, bench.exit_code) << bench.output;
  EXPECT_NE(std::string::npos, bench.output.find("--sync_every=")) << bench.output;
  EXPECT_NE(std::string::npos, bench.output.find("--scan_bytes=")) << bench.output;
}

TEST_F(CliTest, BusyPort) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(0, bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  ASSERT_EQ(0, listen(fd, 1));
  socklen_t len = sizeof(addr);
  ASSERT_EQ(0, getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len));
  std::string port = std::to_string(ntohs(addr.sin_port));
  ExpectOneLineFailure("meta --data_dir=" + dir_ + "/m --listen=127.0.0.1:" + port,
                       "cannot listen on 127.0.0.1:" + port);
  close(fd);
}

TEST_F(CliTest, UnusableDataDir) {
  // Root can write anywhere, so use a path below a regular file.
  ExpectOneLineFailure("meta --data_dir=/etc/hostname/meta", "/etc/hostname");
  ExpectOneLineFailure("segd --data_dir=/etc/hostname/segd --meta=127.0.0.1:1",
                       "/etc/hostname");
  // What the user reads carries no status payloads ("[logfs/errno='20']").
  auto segd = RunCommand(LogfsBinary() + " segd --data_dir=/etc/hostname/segd --meta=127.0.0.1:1");
  EXPECT_EQ(std::string::npos, segd.output.find("[logfs/")) << segd.output;
}

TEST_F(CliTest, UnreachableMeta) {
  ExpectOneLineFailure(
      "segd --data_dir=" + dir_ + "/s --meta=127.0.0.1:1 --rpc_timeout_ms=2000 --register_wait_ms=0",
      "127.0.0.1:1");
  ASSERT_EQ(0, RunCommand("mkdir " + dir_ + "/mnt").exit_code);
  ExpectOneLineFailure(
      "mount --meta=127.0.0.1:1 --rpc_timeout_ms=2000 --mount_wait_ms=0 " + dir_ + "/mnt",
      "cannot reach meta at 127.0.0.1:1");
}

// A loopback port nothing listens on now (bound, read, closed).
int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

TEST_F(CliTest, ASegmentServerStartedBeforeMetaWaitsForIt) {
  // Goal: at boot a segment server may start before meta (another host,
  // or a unit ordered only After=): it keeps trying to register for
  // --register_wait_ms and serves once meta does; a SIGTERM while it waits
  // stops it at once with exit code 0 (a systemd stop, not a failure).
  // Its /metrics serves meanwhile: logfs_segd_registered 0, then 1.
  const int port = FreeLoopbackPort();
  ASSERT_GT(port, 0);
  const std::string meta_address = absl::StrCat("127.0.0.1:", port);
  Children children;
  const std::string metrics_file = dir_ + "/segd.metrics_address";
  auto segd =
      cluster::Spawn({LogfsBinary(), "segd", "--data_dir=" + dir_ + "/s", "--listen=127.0.0.1:0",
                      "--meta=" + meta_address, "--register_wait_ms=60000",
                      "--address_file=" + dir_ + "/segd.addr", "--metrics_listen=127.0.0.1:0",
                      "--metrics_address_file=" + metrics_file},
                     dir_ + "/segd.log");
  ASSERT_TRUE(segd.ok()) << segd.status();
  children.pids.push_back(*segd);
  // Poll the log for its first retry: it is waiting, not gone.
  bool waiting = false;
  for (int i = 0; i < 400 && !waiting; ++i) {
    waiting = absl::StrContains(ReadFile(dir_ + "/segd.log").value_or(""), "(round 1)");
    if (!waiting) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(waiting) << cluster::LastLine(dir_ + "/segd.log");
  ASSERT_TRUE(cluster::ChildRunning(*segd));
  int metrics_port = 0;
  const std::string metrics_address = ReadFile(metrics_file).value_or("");
  ASSERT_TRUE(
      absl::SimpleAtoi(metrics_address.substr(metrics_address.rfind(':') + 1), &metrics_port))
      << metrics_address;
  EXPECT_EQ(0, MetricSample(ScrapeMetrics(metrics_port), "logfs_segd_registered"));
  auto meta = cluster::Spawn(
      {LogfsBinary(), "meta", "--data_dir=" + dir_ + "/m", "--listen=" + meta_address},
      dir_ + "/meta.log");
  ASSERT_TRUE(meta.ok()) << meta.status();
  children.pids.insert(children.pids.begin(), *meta);  // stopped last
  auto registered = cluster::WaitForFile(dir_ + "/segd.addr", absl::Seconds(30), *segd);
  ASSERT_TRUE(registered.ok()) << registered.status() << ": " << cluster::LastLine(dir_ + "/segd.log");
  auto status = RunCommand(LogfsBinary() + " status --meta=" + meta_address);
  EXPECT_TRUE(absl::StrContains(status.output, "servers: 1 (1 live")) << status.output;
  const std::string serving = ScrapeMetrics(metrics_port);
  EXPECT_EQ(1, MetricSample(serving, "logfs_segd_registered")) << serving;
  EXPECT_EQ(0, MetricSample(serving, "logfs_segd_replicas{state=\"open\"}")) << serving;

  // A second one, with no meta at all, asked to stop while it waits.
  auto lonely = cluster::Spawn({LogfsBinary(), "segd", "--data_dir=" + dir_ + "/s2",
                                "--listen=127.0.0.1:0", "--meta=127.0.0.1:1",
                                "--register_wait_ms=60000"},
                               dir_ + "/lonely.log");
  ASSERT_TRUE(lonely.ok()) << lonely.status();
  waiting = false;
  for (int i = 0; i < 400 && !waiting; ++i) {
    waiting = absl::StrContains(ReadFile(dir_ + "/lonely.log").value_or(""), "(round 1)");
    if (!waiting) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(waiting) << cluster::LastLine(dir_ + "/lonely.log");
  ASSERT_EQ(0, kill(*lonely, SIGTERM));
  int wait_status = 0;
  bool exited = false;
  for (int i = 0; i < 100 && !exited; ++i) {  // 5 s at most
    exited = !cluster::ChildRunning(*lonely, &wait_status);
    if (!exited) absl::SleepFor(absl::Milliseconds(50));
  }
  if (!exited) cluster::StopChild(*lonely, SIGKILL, absl::Seconds(5));
  ASSERT_TRUE(exited) << "segd did not stop while waiting for meta";
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << wait_status;
}

TEST_F(CliTest, AWildcardListenNeedsAnAdvertisedAddress) {
  // Goal (issue 13 item 1): a server bound to a wildcard address cannot
  // tell others how to dial it, so it refuses to start without
  // --advertise and says so.
  ExpectOneLineFailure("meta --data_dir=" + dir_ + "/m --listen=0.0.0.0:0", "--advertise");
  ExpectOneLineFailure("segd --data_dir=" + dir_ + "/s --listen=0.0.0.0:0 --meta=127.0.0.1:1",
                       "--advertise");
  ExpectOneLineFailure("meta --data_dir=" + dir_ + "/m --listen=0.0.0.0:0 --advertise=0.0.0.0",
                       "wildcard");
  // ... and before it creates anything in its data dir, as for an address
  // that does not parse.
  ExpectOneLineFailure("meta --data_dir=" + dir_ + "/m --listen=garbage", "'garbage'");
  ExpectOneLineFailure("segd --data_dir=" + dir_ +
                           "/s --listen=127.0.0.1:0 --advertise=a:b:c "
                           "--meta=127.0.0.1:1",
                       "--advertise=a:b:c");
  EXPECT_NE(0, access((dir_ + "/m").c_str(), F_OK));
  EXPECT_NE(0, access((dir_ + "/s").c_str(), F_OK));
}

TEST_F(CliTest, ServersOnAWildcardListenRegisterTheirAdvertisedAddress) {
  // Goal: meta and a segment server listening on 0.0.0.0 with --advertise
  // (host only: the bound port) write the advertised address to their
  // address files, and meta's registry lists the segment server under
  // it, never under 0.0.0.0, with its failure domain. Only 127.0.0.1 is
  // dialled.
  const std::string meta_file = dir_ + "/meta.addr", segd_file = dir_ + "/segd.addr";
  Children children;
  auto meta =
      cluster::Spawn({LogfsBinary(), "meta", "--data_dir=" + dir_ + "/m", "--listen=0.0.0.0:0",
                      "--advertise=127.0.0.1", "--address_file=" + meta_file},
                     dir_ + "/meta.log");
  ASSERT_TRUE(meta.ok()) << meta.status();
  children.pids.push_back(*meta);
  auto meta_address = cluster::WaitForFile(meta_file, absl::Seconds(20), *meta);
  ASSERT_TRUE(meta_address.ok()) << meta_address.status() << cluster::LastLine(dir_ + "/meta.log");
  EXPECT_TRUE(absl::StartsWith(*meta_address, "127.0.0.1:")) << *meta_address;
  auto segd =
      cluster::Spawn({LogfsBinary(), "segd", "--data_dir=" + dir_ + "/s", "--listen=0.0.0.0:0",
                      "--advertise=127.0.0.1", "--meta=" + *meta_address,
                      "--address_file=" + segd_file, "--failure_domain=rack1/host7"},
                     dir_ + "/segd.log");
  ASSERT_TRUE(segd.ok()) << segd.status();
  children.pids.push_back(*segd);
  auto segd_address = cluster::WaitForFile(segd_file, absl::Seconds(20), *segd);
  EXPECT_TRUE(segd_address.ok()) << segd_address.status();
  if (segd_address.ok()) {
    EXPECT_TRUE(absl::StartsWith(*segd_address, "127.0.0.1:")) << *segd_address;
    auto status = RunCommand(LogfsBinary() + " status --meta=" + *meta_address);
    EXPECT_EQ(0, status.exit_code) << status.output;
    EXPECT_NE(std::string::npos, status.output.find(*segd_address)) << status.output;
    EXPECT_EQ(std::string::npos, status.output.find("0.0.0.0")) << status.output;
    // ... and with the failure domain it registered (issue 13 item 3).
    EXPECT_NE(std::string::npos, status.output.find("rack1/host7")) << status.output;
  }
}

TEST_F(CliTest, AnAdvertisedAddressNobodyCanReachIsShownUnreachable) {
  // Goal (issue 13 item 7): a segment server that advertises an address
  // where nothing listens (a mistyped --advertise) registers, but `logfs
  // status` marks it unreachable and says why, naming --advertise.
  const std::string meta_file = dir_ + "/meta.addr", segd_file = dir_ + "/segd.addr";
  Children children;
  auto meta = cluster::Spawn({LogfsBinary(), "meta", "--data_dir=" + dir_ + "/m",
                              "--listen=127.0.0.1:0", "--address_file=" + meta_file},
                             dir_ + "/meta.log");
  ASSERT_TRUE(meta.ok()) << meta.status();
  children.pids.push_back(*meta);
  auto meta_address = cluster::WaitForFile(meta_file, absl::Seconds(20), *meta);
  ASSERT_TRUE(meta_address.ok()) << meta_address.status();
  // Port 1 on loopback: nothing listens there, so a dial is refused.
  auto segd = cluster::Spawn(
      {LogfsBinary(), "segd", "--data_dir=" + dir_ + "/s", "--listen=127.0.0.1:0",
       "--advertise=127.0.0.1:1", "--meta=" + *meta_address, "--address_file=" + segd_file},
      dir_ + "/segd.log");
  ASSERT_TRUE(segd.ok()) << segd.status();
  children.pids.push_back(*segd);
  ASSERT_TRUE(cluster::WaitForFile(segd_file, absl::Seconds(20), *segd).ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  CommandResult status;
  do {
    status = RunCommand(LogfsBinary() + " status --meta=" + *meta_address);
    if (absl::StrContains(status.output, "unreachable:")) break;
    absl::SleepFor(absl::Milliseconds(100));  // poll: meta dials once per re-replication pass
  } while (absl::Now() < deadline);
  EXPECT_EQ(0, status.exit_code) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "127.0.0.1:1 ")) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, " unreachable ")) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "meta cannot dial 127.0.0.1:1")) << status.output;
  EXPECT_TRUE(absl::StrContains(status.output, "--advertise")) << status.output;
  // ... and counted in the header, which does not look healthy meanwhile.
  EXPECT_TRUE(absl::StrContains(status.output, "servers: 1 (1 live (1 unreachable), 0 dead)"))
      << status.output;
}

TEST_F(CliTest, MountPointMustBeADirectory) {
  ExpectOneLineFailure("mount --meta=127.0.0.1:1 " + dir_ + "/missing", "not a directory");
}

}  // namespace
}  // namespace logfs::testing
