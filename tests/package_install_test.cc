// The Debian package installed on this machine (issue 15 item 4): dpkg -i
// build/deb/logfs_*.deb (`make test` runs `make deb` first; the test builds
// it if missing), meta and three segment servers started with the shipped
// flagfiles and the units' command lines as user logfs, mounts with
// `mount -t fuse.logfs` and with an fstab line, then dpkg --purge and the
// logfs user deleted, leaving the machine as it was. Skipped where logfs is
// already installed, a logfs user exists, or /etc/logfs or /var/lib/logfs
// exist: it would change them.
#include <errno.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "src/cluster/process.h"
#include "tests/mounted_cluster.h"
#include "tests/package_util.h"

namespace logfs::testing {
namespace {

// What the package puts on the machine (and what purge must take away).
constexpr const char* kPackagePaths[] = {
    "/usr/bin/logfs",  "/usr/sbin/mount.fuse.logfs",
    "/etc/logfs",      "/var/lib/logfs",
    "/run/logfs",      "/lib/systemd/system/logfs-meta.service",
    "/usr/share/logfs"};

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

std::string Trimmed(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

bool UserExists(const char* name) { return getpwnam(name) != nullptr; }

bool GroupListed(const char* name) {
  std::ifstream in("/etc/group");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, std::string(name) + ":")) return true;
  }
  return false;
}

// Undoes whatever the test did, however it ends: processes stopped (by
// pid), mounts detached, the package purged, the user and group deleted.
struct Machine {
  bool installed = false;
  std::vector<pid_t> pids;
  std::vector<std::string> mounts;
  std::vector<std::string> files;  // made by the test in the package's dirs
  std::string dir;

  ~Machine() {
    for (const std::string& m : mounts) RunCommand("umount -l " + m + " 2>/dev/null");
    for (auto it = pids.rbegin(); it != pids.rend(); ++it) {
      cluster::StopChild(*it, SIGTERM, absl::Seconds(10));
    }
    for (const std::string& f : files) unlink(f.c_str());
    if (installed) {
      RunCommand("dpkg --purge logfs");
      RunCommand("deluser --system --quiet logfs");
      RunCommand("delgroup --system --quiet logfs");
      // Purge keeps a data dir that holds data (debian/logfs.postrm); the
      // test made it, and found none before.
      RunCommand("rm -rf /var/lib/logfs");
    }
    if (!dir.empty()) RunCommand("rm -rf " + dir);
  }
};

// Replaces the line `flag=...` of flagfile `path` by `flag=value` (an
// admin's edit of a shipped flagfile).
void SetFlag(const std::string& path, const std::string& flag, const std::string& value) {
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << path;
  size_t at = text->find("\n" + flag + "=");
  ASSERT_NE(std::string::npos, at) << flag << " in " << path;
  size_t end = text->find('\n', at + 1);
  text->replace(at + 1, end - at - 1, flag + "=" + value);
  ASSERT_TRUE(WriteFile(path, *text).ok());
}

// The installed unit's ExecStart for `instance`, run as its User= (setpriv)
// with $NOTIFY_SOCKET at `notify`, plus `extra` flags.
std::vector<std::string> UnitCommand(const std::string& unit, const std::string& instance,
                                     const NotifySocket& notify,
                                     const std::vector<std::string>& extra) {
  auto text = ReadFile("/lib/systemd/system/" + unit);
  EXPECT_TRUE(text.ok()) << unit;
  if (!text.ok()) return {};
  std::vector<std::string> argv;
  std::vector<std::string> user = UnitValues(*text, "User");
  if (!user.empty()) {
    argv = {"/usr/bin/setpriv", "--reuid=" + user[0], "--regid=" + user[0], "--init-groups"};
  }
  argv.insert(argv.end(), {"/usr/bin/env", "NOTIFY_SOCKET=" + notify.path()});
  for (std::string& word : ExpandCommand(UnitValues(*text, "ExecStart")[0], instance)) {
    argv.push_back(std::move(word));
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// Writes `data` to `path` and reads it back; the file's bytes or an error.
std::string WriteAndRead(const std::string& path, const std::string& data) {
  absl::Status written = WriteFile(path, data);
  if (!written.ok()) return written.ToString();
  auto read = ReadFile(path);
  return read.ok() ? *read : read.status().ToString();
}

// The package's .deb: the one in build/deb/, built by make-deb.sh if none.
std::string FindOrBuildDeb(const std::string& src) {
  const std::string find = "ls " + src + "/build/deb/logfs_*_amd64.deb 2>/dev/null | tail -1";
  std::string deb = Trimmed(RunCommand(find).output);
  if (deb.empty()) {
    auto built = RunCommand("cd " + src + " && nice -n 19 packaging/make-deb.sh build");
    EXPECT_EQ(0, built.exit_code) << built.output;
    deb = Trimmed(RunCommand(find).output);
  }
  return deb;
}

TEST(PackageInstallTest, InstallRunMountAndPurge) {
  // Goal: the .deb installs a working logfs whose shipped flagfiles, units
  // and mount helper run a cluster and mount it, installs nothing started
  // or enabled, and purges without a trace.
  if (getuid() != 0) GTEST_SKIP() << "needs root (dpkg -i)";
  if (RunCommand("dpkg-query -W -f='${Status}' logfs 2>/dev/null | grep -q installed").exit_code ==
          0 ||
      UserExists("logfs") || GroupListed("logfs")) {
    GTEST_SKIP() << "logfs is installed or a logfs user exists here: not touching them";
  }
  // README "Running a cluster by hand" keeps state there; purge would
  // delete it.
  for (const char* dir : {"/etc/logfs", "/var/lib/logfs"}) {
    if (Exists(dir)) GTEST_SKIP() << dir << " exists (a cluster run by hand?): not touching it";
  }
  bool before[std::size(kPackagePaths)];
  for (size_t i = 0; i < std::size(kPackagePaths); ++i) before[i] = Exists(kPackagePaths[i]);
  const std::string src = SourceDir();
  const std::string deb = FindOrBuildDeb(src);
  ASSERT_FALSE(deb.empty());
  {
    Machine machine;
    char tmpl[] = "/tmp/logfs-install-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(tmpl));
    machine.dir = tmpl;

    // (a) Install: files, user, dirs; the version; nothing enabled.
    machine.installed = true;
    auto installed = RunCommand("dpkg -i " + deb);
    ASSERT_EQ(0, installed.exit_code) << installed.output;
    std::string version = RunCommand("dpkg-query -W -f='${Version}' logfs").output;
    EXPECT_EQ("logfs " + version + "\n", RunCommand("/usr/bin/logfs --version").output);
    char link[256] = {};
    ASSERT_GT(readlink("/usr/sbin/mount.fuse.logfs", link, sizeof(link) - 1), 0);
    EXPECT_STREQ("../bin/logfs", link);
    ASSERT_TRUE(UserExists("logfs"));
    for (const char* dir : {"/var/lib/logfs", "/var/lib/logfs/segd", "/run/logfs"}) {
      struct stat st;
      ASSERT_EQ(0, stat(dir, &st)) << dir;
      EXPECT_EQ(getpwnam("logfs")->pw_uid, st.st_uid) << dir;
    }
    for (const char* conf : {"meta.flags", "segd-example.flags", "mount.flags"}) {
      EXPECT_TRUE(Exists(absl::StrCat("/etc/logfs/", conf))) << conf;
    }
    // The monitoring files (docs/OPERATIONS.md "What to alert on"): the
    // rules' unit tests run where they are installed, as an admin would.
    EXPECT_TRUE(Exists("/usr/share/logfs/grafana/logfs-dashboard.json"));
    auto rules = RunCommand(
        "cd /usr/share/logfs/prometheus && promtool check rules logfs-alerts.yml && "
        "promtool test rules logfs-alerts.test.yml");
    EXPECT_EQ(0, rules.exit_code) << rules.output;
    // The etcd TLS certificate maker (docs/OPERATIONS.md step 2), runnable.
    auto certs = RunCommand(absl::StrCat("/usr/lib/logfs/make-etcd-certs.sh ", machine.dir,
                                         "/etcd-tls 127.0.0.1 && openssl verify -CAfile ", machine.dir,
                                         "/etcd-tls/ca.pem ", machine.dir, "/etcd-tls/meta.pem"));
    EXPECT_EQ(0, certs.exit_code) << certs.output;
    EXPECT_EQ("", RunCommand("ls /etc/systemd/system/*.wants/ 2>/dev/null | grep logfs").output)
        << "a unit was enabled at install";

    // (b) meta, as logfs-meta.service runs it (StateDirectory= made by
    // hand, as systemd would); the shipped flagfile with a free port.
    RunCommand("install -d -o logfs -g logfs -m 0750 /var/lib/logfs/meta");
    SetFlag("/etc/logfs/meta.flags", "--listen", "127.0.0.1:0");
    NotifySocket meta_notify;
    const std::string meta_addr_file = "/run/logfs/test-meta.addr";
    auto meta = cluster::Spawn(
        UnitCommand("logfs-meta.service", "", meta_notify, {"--address_file=" + meta_addr_file}),
        machine.dir + "/meta.log");
    ASSERT_TRUE(meta.ok());
    machine.pids.push_back(*meta);
    ASSERT_TRUE(meta_notify.Wait("READY=1", absl::Seconds(30)))
        << cluster::LastLine(machine.dir + "/meta.log");
    auto meta_address = ReadFile(meta_addr_file);
    ASSERT_TRUE(meta_address.ok());
    auto uid = RunCommand(absl::StrCat("awk '/^Uid:/{print $2}' /proc/", *meta, "/status"));
    EXPECT_EQ(std::to_string(getpwnam("logfs")->pw_uid), Trimmed(uid.output)) << "User=logfs";

    // (c) Three segment servers: logfs-segd@t1..t3, each with a copy of the
    // example flagfile (as README "Install as a package" says).
    for (int i = 1; i <= 3; ++i) {
      std::string name = absl::StrCat("t", i);
      std::string flags = "/etc/logfs/segd-" + name + ".flags";
      machine.files.push_back(flags);
      ASSERT_EQ(0, RunCommand("cp /etc/logfs/segd-example.flags " + flags).exit_code);
      SetFlag(flags, "--meta", *meta_address);
      SetFlag(flags, "--listen", "127.0.0.1:0\n--journal_bytes=1048576");
      RunCommand("install -d -o logfs -g logfs -m 0750 /var/lib/logfs/segd/" + name);
      NotifySocket notify;
      auto segd = cluster::Spawn(UnitCommand("logfs-segd@.service", name, notify, {}),
                                 absl::StrCat(machine.dir, "/segd", i, ".log"));
      ASSERT_TRUE(segd.ok());
      machine.pids.push_back(*segd);
      ASSERT_TRUE(notify.Wait("READY=1", absl::Seconds(30)))
          << cluster::LastLine(absl::StrCat(machine.dir, "/segd", i, ".log"));
    }

    // (d) Mounts through the helper: mount -t, then an fstab line.
    const std::string mnt = machine.dir + "/mnt";
    ASSERT_EQ(0, mkdir(mnt.c_str(), 0755));
    {
      machine.mounts.push_back(mnt);
      auto mounted = RunCommand(
          absl::StrCat("mount -t fuse.logfs ", *meta_address, " ", mnt, " -o _netdev,nofail 2>&1"));
      ASSERT_EQ(0, mounted.exit_code) << mounted.output;
      ASSERT_TRUE(WaitMounted(mnt, true, absl::Seconds(1)));
      EXPECT_EQ("written through mount -t", WriteAndRead(mnt + "/a", "written through mount -t"));
      ASSERT_EQ(0, RunCommand("umount " + mnt).exit_code);
      ASSERT_TRUE(WaitMounted(mnt, false, absl::Seconds(10)));

      const std::string fstab = machine.dir + "/fstab";
      ASSERT_TRUE(
          WriteFile(fstab, absl::StrCat(
                               *meta_address, " ", mnt,
                               " fuse.logfs _netdev,nofail,flagfile=/etc/logfs/mount.flags 0 0\n"))
              .ok());
      auto all = RunCommand("mount -a -T " + fstab + " 2>&1");
      ASSERT_EQ(0, all.exit_code) << all.output;
      ASSERT_TRUE(WaitMounted(mnt, true, absl::Seconds(1)));
      auto a = ReadFile(mnt + "/a");
      EXPECT_TRUE(a.ok() && *a == "written through mount -t") << "the first mount's file";
      EXPECT_EQ("written through fstab", WriteAndRead(mnt + "/b", "written through fstab"));
      ASSERT_EQ(0, RunCommand("umount " + mnt).exit_code);
      ASSERT_TRUE(WaitMounted(mnt, false, absl::Seconds(10)));
      machine.mounts.clear();
    }

    // (e) Stop the servers (SIGTERM, exit code 0), last first.
    for (auto it = machine.pids.rbegin(); it != machine.pids.rend(); ++it) {
      ASSERT_EQ(0, kill(*it, SIGTERM));
      EXPECT_EQ(0, WaitExitCode(*it, absl::Seconds(30)));
    }
    machine.pids.clear();
    // Mount daemons exit once unmounted: no process of the package's binary
    // may outlive it (bounded wait).
    bool gone = false;
    for (int i = 0; i < 200 && !gone; ++i) {
      gone = RunCommand(
                 "for p in $(pgrep logfs); do readlink /proc/$p/exe; done | "
                 "grep -qx /usr/bin/logfs")
                 .exit_code != 0;
      if (!gone) absl::SleepFor(absl::Milliseconds(50));
    }
    EXPECT_TRUE(gone) << "a process of /usr/bin/logfs is still running";
    // (f) Purge (Machine's destructor), then check below.
  }
  EXPECT_FALSE(UserExists("logfs"));
  EXPECT_FALSE(GroupListed("logfs"));
  for (size_t i = 0; i < std::size(kPackagePaths); ++i) {
    EXPECT_EQ(before[i], Exists(kPackagePaths[i])) << kPackagePaths[i];
  }
  EXPECT_NE(0, RunCommand("dpkg-query -W -f='${Status}' logfs 2>/dev/null | grep -q 'ok installed'")
                   .exit_code);
}

}  // namespace
}  // namespace logfs::testing
