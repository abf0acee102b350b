// The systemd units of the package (packaging/systemd/): each passes
// `systemd-analyze verify`, and each one's command line, run by hand as
// systemd would run it (these machines do not run systemd as PID 1), gets
// ready, serves and stops cleanly on SIGTERM. The package install test is
// tests/package_install_test.cc.
#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "src/util/version.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

constexpr const char* kUnits[] = {"logfs-meta.service", "logfs-segd@.service",
                                  "logfs-mount@.service", "logfs.target"};

std::string ReadOrEmpty(const std::string& path) {
  auto text = ReadFile(path);
  return text.ok() ? *text : "";
}

class SystemdUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-units-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    dir_ = tmpl;
    src_ = SourceDir();
    // The host's paths the units name, under dir_: the shipped flagfiles
    // with those paths moved there too (a test may not touch /etc/logfs).
    ASSERT_EQ(0, RunCommand(absl::StrCat("mkdir -p ", dir_, "/etc/logfs ", dir_,
                                         "/var/lib/logfs/segd ", dir_, "/run/logfs"))
                     .exit_code);
    for (const char* flags : {"meta.flags", "segd-example.flags", "mount.flags"}) {
      std::string text = ReadOrEmpty(src_ + "/packaging/etc/" + flags);
      ASSERT_FALSE(text.empty()) << flags;
      ASSERT_TRUE(WriteFile(dir_ + "/etc/logfs/" + flags, Relocate(text)).ok());
    }
  }

  void TearDown() override {
    for (auto it = pids_.rbegin(); it != pids_.rend(); ++it) {
      cluster::StopChild(*it, SIGKILL, absl::Seconds(5));
    }
    if (!mountpoint_.empty()) RunCommand("fusermount3 -uz " + mountpoint_ + " 2>/dev/null");
    RunCommand("rm -rf " + dir_);
  }

  // `text` with the host paths the units and flagfiles name moved under dir_.
  std::string Relocate(const std::string& text) const {
    return absl::StrReplaceAll(text, {{"/etc/logfs/", dir_ + "/etc/logfs/"},
                                      {"/var/lib/logfs/", dir_ + "/var/lib/logfs/"},
                                      {"/run/logfs/", dir_ + "/run/logfs/"}});
  }

  // Replaces the line starting with `flag=` in flagfile `name` under
  // dir_/etc/logfs (as an admin edits a shipped flagfile).
  void SetFlag(const std::string& name, const std::string& flag, const std::string& value) {
    std::string path = dir_ + "/etc/logfs/" + name;
    std::string text = ReadOrEmpty(path);
    size_t at = text.find("\n" + flag + "=");
    ASSERT_NE(std::string::npos, at) << flag << " in " << name;
    size_t end = text.find('\n', at + 1);
    text.replace(at + 1, end - at - 1, flag + "=" + value);
    ASSERT_TRUE(WriteFile(path, text).ok());
  }

  // The unit's ExecStart (and ExecStartPre in `pre`), expanded for
  // `instance`, relocated, with the binary under test for /usr/bin/logfs.
  std::vector<std::string> Command(const std::string& unit, const std::string& instance,
                                   const std::string& key = "ExecStart") {
    std::string text = ReadOrEmpty(src_ + "/packaging/systemd/" + unit);
    std::vector<std::string> values = UnitValues(text, key);
    EXPECT_EQ(1u, values.size()) << unit << " " << key;
    if (values.empty()) return {};
    std::vector<std::string> argv = ExpandCommand(Relocate(values[0]), instance);
    if (!argv.empty() && argv[0] == "/usr/bin/logfs") argv[0] = LogfsBinary();
    return argv;
  }

  // Starts `argv` with $NOTIFY_SOCKET at `notify` (as systemd does for
  // Type=notify), logging to dir_/NAME.log.
  pid_t Start(std::vector<std::string> argv, const NotifySocket& notify, const std::string& name) {
    argv.insert(argv.begin(), {"/usr/bin/env", "NOTIFY_SOCKET=" + notify.path()});
    auto pid = cluster::Spawn(argv, dir_ + "/" + name + ".log");
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return -1;
    pids_.push_back(*pid);
    return *pid;
  }

  // Sends SIGTERM (the units' KillSignal) and expects exit code 0 within
  // the units' TimeoutStopSec.
  void ExpectCleanStop(pid_t pid, const std::string& name) {
    ASSERT_EQ(0, kill(pid, SIGTERM));
    EXPECT_EQ(0, WaitExitCode(pid, absl::Seconds(30)))
        << name << ": " << cluster::LastLine(dir_ + "/" + name + ".log");
  }

  std::string Log(const std::string& name) const { return ReadOrEmpty(dir_ + "/" + name + ".log"); }

  std::string dir_;
  std::string src_;
  std::string mountpoint_;
  std::vector<pid_t> pids_;
};

TEST_F(SystemdUnitTest, EveryUnitPassesSystemdAnalyzeVerify) {
  // Goal: systemd-analyze verify accepts every unit, with no complaint.
  // Method: it needs the units' binaries and systemd's own units (the
  // targets ours name) in one root: a temp root holding a copy of
  // /usr/lib/systemd/system, our units, logfs and fusermount3. Complaints
  // such as an unknown key go to stderr with exit status 0, so the output
  // must be empty too.
  std::string root = dir_ + "/root";
  ASSERT_EQ(0,
            RunCommand(absl::StrCat("mkdir -p ", root, "/usr/bin ", root, "/usr/lib/systemd ", root,
                                    "/etc && ln -s usr/bin ", root, "/bin && ln -s usr/lib ", root,
                                    "/lib && cp -a /usr/lib/systemd/system ", root,
                                    "/usr/lib/systemd/ && cp ", LogfsBinary(), " ", root,
                                    "/usr/bin/logfs && cp /usr/bin/fusermount3 ", root,
                                    "/usr/bin/ && cp ", src_, "/packaging/systemd/* ", root,
                                    "/usr/lib/systemd/system/"))
                .exit_code);
  for (const char* unit : kUnits) {
    std::string name = absl::StrReplaceAll(unit, {{"@.", "@disk1."}});
    if (absl::StartsWith(name, "logfs-mount@")) name = "logfs-mount@mnt-logfs.service";
    // --man=no: verify would look the Documentation= man pages up on this
    // machine, where the package is not installed; they are checked below.
    auto r = RunCommand(absl::StrCat("systemd-analyze verify --man=no --root=", root, " ", name));
    EXPECT_EQ(0, r.exit_code) << name << ":\n" << r.output;
    EXPECT_EQ("", r.output) << name;
  }
  // The man pages every unit names are in the package (debian/logfs.manpages).
  for (const char* unit : kUnits) {
    const std::string text = ReadOrEmpty(src_ + "/packaging/systemd/" + unit);
    EXPECT_TRUE(absl::StrContains(text, "Documentation=man:logfs(1) man:mount.fuse.logfs(8)"))
        << unit;
  }
  const std::string manpages = ReadOrEmpty(src_ + "/debian/logfs.manpages");
  EXPECT_TRUE(absl::StrContains(manpages, "packaging/man/logfs.1")) << manpages;
  EXPECT_TRUE(absl::StrContains(manpages, "packaging/man/mount.fuse.logfs.8")) << manpages;
  // The check is real: a unit with an unknown key is reported.
  ASSERT_EQ(0, RunCommand(
                   absl::StrCat("printf '[Service]\\nFrobnicate=1\\nExecStart=/usr/bin/logfs\\n' >",
                                root, "/usr/lib/systemd/system/logfs-bad.service"))
                   .exit_code);
  auto bad = RunCommand(absl::StrCat("systemd-analyze verify --root=", root, " logfs-bad.service"));
  EXPECT_TRUE(absl::StrContains(bad.output, "Unknown key 'Frobnicate'")) << bad.output;
}

TEST_F(SystemdUnitTest, UnitsNameTheirInstanceFilesAndHardening) {
  // Goal: the unit files say what the package promises (README "Install as
  // a package"): notify readiness, the logfs user, per-instance flagfile
  // and data dir, and a mount unit with no ExecStartPre (`logfs mount`
  // clears a dead mount itself).
  std::string meta = ReadOrEmpty(src_ + "/packaging/systemd/logfs-meta.service");
  std::string segd = ReadOrEmpty(src_ + "/packaging/systemd/logfs-segd@.service");
  std::string mount = ReadOrEmpty(src_ + "/packaging/systemd/logfs-mount@.service");
  for (const std::string* unit : {&meta, &segd}) {
    EXPECT_EQ(std::vector<std::string>{"notify"}, UnitValues(*unit, "Type"));
    EXPECT_EQ(std::vector<std::string>{"logfs"}, UnitValues(*unit, "User"));
    EXPECT_EQ(std::vector<std::string>{"strict"}, UnitValues(*unit, "ProtectSystem"));
    EXPECT_EQ(std::vector<std::string>{"yes"}, UnitValues(*unit, "NoNewPrivileges"));
  }
  EXPECT_EQ(
      (std::vector<std::string>{LogfsBinary(), "segd", "--flagfile=/etc/logfs/segd-disk1.flags",
                                "--data_dir=/var/lib/logfs/segd/disk1",
                                "--short_circuit_socket=/run/logfs/segd-disk1.sock"}),
      ExpandCommand(absl::StrReplaceAll(UnitValues(segd, "ExecStart")[0],
                                        {{"/usr/bin/logfs", LogfsBinary()}}),
                    "disk1"));
  // `logfs mount` clears a dead mount point itself; nothing detaches a
  // live one.
  EXPECT_TRUE(UnitValues(mount, "ExecStartPre").empty());
  EXPECT_EQ(std::vector<std::string>{"notify"}, UnitValues(mount, "Type"));
  EXPECT_EQ(std::vector<std::string>{"umount.target"}, UnitValues(mount, "Conflicts"));
  EXPECT_EQ(std::vector<std::string>{"on-failure"}, UnitValues(mount, "Restart"));
  // A restart hands the mount to the next instance through the store
  // (docs/OPERATIONS.md "Restarting a mount"): two descriptors.
  EXPECT_EQ(std::vector<std::string>{"4"}, UnitValues(mount, "FileDescriptorStoreMax"));
  // Private mount namespaces would hide the mount from the host.
  EXPECT_TRUE(UnitValues(mount, "ProtectSystem").empty());
  EXPECT_TRUE(UnitValues(mount, "PrivateDevices").empty());
  EXPECT_TRUE(UnitValues(mount, "PrivateTmp").empty());
}

TEST_F(SystemdUnitTest, MetaAndSegdNotifyReadyOnceServingAndStopCleanly) {
  // Goal: logfs-meta.service and logfs-segd@.service are Type=notify:
  // READY=1 comes only once the server answers, STOPPING=1 and exit code 0
  // on SIGTERM (KillSignal).
  // Method: run each unit's ExecStart with the shipped flagfiles (paths
  // moved under a temp dir; --listen set to port 0 as an admin would set a
  // port) and $NOTIFY_SOCKET at a socket we bound; the moment READY=1
  // arrives, `logfs status` must succeed and list the server.
  NotifySocket meta_notify;
  ASSERT_FALSE(meta_notify.path().empty());
  // (a) meta.
  SetFlag("meta.flags", "--listen", "127.0.0.1:0");
  std::vector<std::string> meta_argv = Command("logfs-meta.service", "");
  ASSERT_EQ(3u, meta_argv.size()) << absl::StrJoin(meta_argv, " ");
  meta_argv.push_back("--address_file=" + dir_ + "/meta.addr");
  pid_t meta = Start(meta_argv, meta_notify, "meta");
  ASSERT_TRUE(meta_notify.Wait("READY=1", absl::Seconds(30))) << Log("meta");
  auto meta_address = ReadFile(dir_ + "/meta.addr");
  ASSERT_TRUE(meta_address.ok()) << "READY=1 before the address file";
  auto status = RunCommand(absl::StrCat(LogfsBinary(), " status --meta=", *meta_address));
  EXPECT_EQ(0, status.exit_code) << status.output;
  EXPECT_FALSE(meta_notify.Wait("STOPPING=1", absl::ZeroDuration()));
  struct stat st;
  EXPECT_EQ(0, stat((dir_ + "/var/lib/logfs/meta").c_str(), &st)) << "meta.flags' --data_dir";

  // (b) segd@disk1, from a copy of the example flagfile pointing at meta.
  ASSERT_EQ(0, RunCommand(absl::StrCat("cp ", dir_, "/etc/logfs/segd-example.flags ", dir_,
                                       "/etc/logfs/segd-disk1.flags"))
                   .exit_code);
  SetFlag("segd-disk1.flags", "--meta", *meta_address);
  SetFlag("segd-disk1.flags", "--listen", "127.0.0.1:0\n--journal_bytes=1048576");
  std::vector<std::string> segd_argv = Command("logfs-segd@.service", "disk1");
  segd_argv.push_back("--address_file=" + dir_ + "/segd.addr");
  NotifySocket segd_notify;
  pid_t segd = Start(segd_argv, segd_notify, "segd");
  ASSERT_TRUE(segd_notify.Wait("READY=1", absl::Seconds(30))) << Log("segd");
  auto segd_address = ReadFile(dir_ + "/segd.addr");
  ASSERT_TRUE(segd_address.ok());
  EXPECT_EQ(0, stat((dir_ + "/var/lib/logfs/segd/disk1").c_str(), &st)) << "the unit's --data_dir";
  EXPECT_EQ(0, stat((dir_ + "/run/logfs/segd-disk1.sock").c_str(), &st))
      << "the unit's short-circuit socket";
  // Registered within a heartbeat interval of its start (1 s): poll.
  bool listed = false;
  for (int i = 0; i < 100 && !listed; ++i) {
    status = RunCommand(absl::StrCat(LogfsBinary(), " status --meta=", *meta_address));
    listed = absl::StrContains(status.output, *segd_address);
    if (!listed) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(listed) << status.output;

  // (c) Stop, last first, as logfs.target would.
  ExpectCleanStop(segd, "segd");
  EXPECT_TRUE(segd_notify.Wait("STOPPING=1", absl::Seconds(1)));
  ExpectCleanStop(meta, "meta");
  EXPECT_TRUE(meta_notify.Wait("STOPPING=1", absl::Seconds(1)));
}

TEST_F(SystemdUnitTest, MountUnitServesStopsAndClearsADeadMount) {
  // Goal: logfs-mount@.service's command line mounts and serves, SIGTERM
  // unmounts with exit code 0, and after a killed daemon the next
  // ExecStart (Restart=on-failure) detaches the "Transport endpoint is not
  // connected" mount it left and mounts again; a start on a live mount
  // fails and leaves that mount alone.
  // Method: an embedded cluster (MountedCluster's) stands in for meta and
  // segd; mount.flags gets its meta address; the instance is the escaped
  // mount point (systemd-escape -p).
  MountedClusterOptions options;
  options.mounts = 0;
  auto cluster = MountedCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  mountpoint_ = dir_ + "/mnt";
  ASSERT_EQ(0, mkdir(mountpoint_.c_str(), 0755));
  auto escaped = RunCommand("systemd-escape -p " + mountpoint_);
  ASSERT_EQ(0, escaped.exit_code);
  std::string instance = std::string(absl::StripTrailingAsciiWhitespace(escaped.output));
  SetFlag("mount.flags", "--meta", (*cluster)->cluster().meta_address());
  std::vector<std::string> start = Command("logfs-mount@.service", instance);
  ASSERT_EQ(mountpoint_, start.back());
  for (int round = 0; round < 2; ++round) {
    NotifySocket notify;  // one per start: each must say READY=1
    // (a) ExecStart, on a fresh mount point, then on a dead one.
    pid_t mount = Start(start, notify, absl::StrCat("mount", round));
    // Type=notify: READY=1 once it serves, so the mount is there by then.
    ASSERT_TRUE(notify.Wait("READY=1", absl::Seconds(30))) << Log(absl::StrCat("mount", round));
    ASSERT_TRUE(WaitMounted(mountpoint_, true, absl::Seconds(1))) << Log("mount0");
    // (b) It serves.
    std::string file = absl::StrCat(mountpoint_, "/f", round);
    ASSERT_TRUE(WriteFile(file, "round " + std::to_string(round)).ok());
    auto read = ReadFile(file);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_EQ("round " + std::to_string(round), *read);
    if (round == 0) {
      // (c) Killed: the mount point is dead until the next start clears it.
      ASSERT_EQ(0, kill(mount, SIGKILL));
      WaitExitCode(mount, absl::Seconds(10));
      // A name never looked up (cached attributes would answer for others).
      struct stat st;
      EXPECT_NE(0, stat((mountpoint_ + "/never-looked-up").c_str(), &st));
      EXPECT_EQ(ENOTCONN, errno);
    } else {
      EXPECT_TRUE(absl::StrContains(Log("mount1"), "was a dead mount")) << Log("mount1");
      // (d) A second start on the live mount fails, and the mount serves on.
      auto again = RunCommand(absl::StrJoin(start, " ") + " 2>&1");
      EXPECT_EQ(1, again.exit_code) << again.output;
      EXPECT_TRUE(absl::StrContains(again.output, "is already a mount point")) << again.output;
      EXPECT_EQ("round 1", ReadFile(file).value_or(""));
      // (e) Stopped: unmounted, exit code 0.
      ExpectCleanStop(mount, "mount1");
      EXPECT_TRUE(notify.Wait("STOPPING=1", absl::Seconds(1)));
      EXPECT_TRUE(WaitMounted(mountpoint_, false, absl::Seconds(10)));
    }
  }
}

TEST(PackageVersionTest, LogfsPrintsItsBuildVersion) {
  // Goal: `logfs --version` and `logfs version` print "logfs VERSION",
  // VERSION being the one logfs::Version() returns, a Debian-valid version.
  const std::string expected = absl::StrCat("logfs ", Version(), "\n");
  EXPECT_EQ(expected, RunCommand(LogfsBinary() + " --version 2>&1").output);
  EXPECT_EQ(expected, RunCommand(LogfsBinary() + " version 2>&1").output);
  auto extra = RunCommand(LogfsBinary() + " version x 2>&1");
  EXPECT_EQ(2, extra.exit_code);
  EXPECT_EQ("logfs: unexpected argument 'x' after version\n", extra.output);
  auto valid = RunCommand(absl::StrCat("dpkg --compare-versions '", Version(), "' gt 0"));
  EXPECT_EQ(0, valid.exit_code) << Version() << " is not a Debian version";
}

TEST(PackageVersionTest, VersionScriptFollowsTagsCommitsAndEdits) {
  // Goal: packaging/version.sh gives each documented form, in increasing
  // Debian order. Method: a scratch git repository holding the script and
  // a VERSION file, committed, tagged and edited step by step.
  char tmpl[] = "/tmp/logfs-version-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl));
  const std::string dir = tmpl;
  const std::string git = "git -c user.name=t -c user.email=t@example.org -C " + dir + " ";
  auto run = [&](const std::string& command) {
    auto r = RunCommand(command);
    EXPECT_EQ(0, r.exit_code) << command << ": " << r.output;
    return std::string(absl::StripTrailingAsciiWhitespace(r.output));
  };
  const std::string version = dir + "/packaging/version.sh";
  run(absl::StrCat("mkdir -p ", dir, "/packaging && cp ", SourceDir(), "/packaging/version.sh ",
                   version, " && echo 0.3.0 >", dir, "/VERSION"));
  // (a) No git: the VERSION file.
  EXPECT_EQ("0.3.0", run(version));
  // (b) Untagged commits: VERSION~gitN.SHA.
  run(git + "init -q && " + git + "add -A && " + git + "commit -qm one");
  std::string sha = run(git + "rev-parse --short HEAD");
  std::string untagged = run(version);
  EXPECT_EQ("0.3.0~git1." + sha, untagged);
  // (c) Tagged, then a commit after the tag, then an edit.
  run(git + "tag v0.3.0");
  EXPECT_EQ("0.3.0", run(version));
  run(git + "commit -q --allow-empty -m two");
  sha = run(git + "rev-parse --short HEAD");
  std::string after = run(version);
  EXPECT_EQ("0.3.0+git1." + sha, after);
  run("echo edit >>" + dir + "/VERSION");
  EXPECT_EQ(after + ".dirty", run(version));
  // (d) Each later form sorts after the one before.
  for (const auto& [lower, higher] : std::vector<std::pair<std::string, std::string>>{
           {untagged, "0.3.0"}, {"0.3.0", after}, {after, after + ".dirty"}}) {
    EXPECT_EQ(0, RunCommand("dpkg --compare-versions " + lower + " lt " + higher).exit_code)
        << lower << " < " << higher;
  }
  // (f) VERSION names the next release after the tag: builds sort after
  // the tag's and below that release.
  run("echo 0.4.0 >" + dir + "/VERSION && " + git + "commit -qam three");
  sha = run(git + "rev-parse --short HEAD");
  const std::string towards = run(version);
  EXPECT_EQ("0.4.0~git3." + sha, towards) << "numbered by the commits in HEAD, as untagged";
  EXPECT_EQ(0, RunCommand("dpkg --compare-versions " + after + " lt " + towards).exit_code);
  EXPECT_EQ(0, RunCommand("dpkg --compare-versions " + towards + " lt 0.4.0").exit_code);
  // (e) $LOGFS_VERSION wins.
  EXPECT_EQ("9.9", run("LOGFS_VERSION=9.9 " + version));
  RunCommand("rm -rf " + dir);
}

}  // namespace
}  // namespace logfs::testing
