// A rolling upgrade from the previous release (issue 34 item 2), a row of
// the fault suite (tests/faults.sh, `make faults`): a cluster of the
// previous release (three meta replicas on etcd, four segment servers, two
// mounts), built by tests/old_release.sh from its tag, is upgraded to this
// build one process at a time in the order docs/OPERATIONS.md "Upgrade"
// gives (standby metas, the active meta, segment servers, mounts), and
// one segment server is then taken back to the previous release. WAL
// writers (bench/durability_checker.h: 16 writers appending and
// fdatasyncing) run through every step, and a namespace workload (create,
// write, rename, unlink on the second mount) through the server steps.
// Promise: every acked byte and every acknowledged namespace operation is
// there at the end, read through the upgraded mounts, and no fsync or
// namespace call failed.
//
// Skipped unless $LOGFS_OLD_BIN names the previous release's binary
// (faults.sh sets it: tests/old_release.sh).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/durability_checker.h"
#include "src/env/posix_file.h"
#include "tests/fault_row.h"
#include "tests/meta_ha_cluster.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// Creates, writes, renames and unlinks small files in one directory of a
// mount until stopped, and remembers what every call that succeeded left:
// name -> contents. A failed call is counted (none may fail).
class NamespaceWorkload {
 public:
  explicit NamespaceWorkload(std::string dir) : dir_(std::move(dir)) {}

  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  uint64_t operations() const { return operations_; }
  uint64_t failures() const { return failures_; }
  uint64_t close_eio() const { return close_eio_; }
  const std::string& first_failure() const { return first_failure_; }

  // Names expected and missing or different, and names that should be gone
  // but are there, as read now under `dir` (another mount's path to it).
  uint64_t Lost(const std::string& dir, std::string* example) const {
    uint64_t lost = 0;
    for (const auto& [name, contents] : expected_) {
      auto got = ReadFile(dir + "/" + name);
      if (!got.ok() || *got != contents) {
        ++lost;
        if (example->empty()) {
          *example = absl::StrCat(name, ": ", got.ok() ? "'" + *got + "'" : got.status().ToString(),
                                  " instead of '", contents, "'");
        }
      }
    }
    for (const std::string& name : gone_) {
      struct stat st;
      if (expected_.count(name) == 0 && stat((dir + "/" + name).c_str(), &st) == 0) {
        ++lost;
        if (example->empty()) *example = name + " is there after its unlink or rename away";
      }
    }
    return lost;
  }

 private:
  void Fail(const std::string& what) {
    ++failures_;
    if (first_failure_.empty()) first_failure_ = absl::StrCat(what, ": ", std::strerror(errno));
  }

  void Run() {
    // Bounded: at most 100,000 steps, paced (not waiting for anything) so
    // that a run of a minute makes a few thousand names.
    for (uint64_t i = 0; i < 100000 && !stop_; ++i) {
      const std::string name = absl::StrCat("f", i);
      const std::string contents = i % 4 == 0 ? absl::StrCat("contents of ", i) : "";
      const int fd = open((dir_ + "/" + name).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) {
        Fail("create " + name);
      } else {
        const bool wrote = contents.empty() ||
                           write(fd, contents.data(), contents.size()) ==
                               static_cast<ssize_t>(contents.size());
        if (!wrote) Fail("write " + name);
        if (close(fd) != 0) {
          // A block file seals on every replica at close (ack quorum =
          // replication): a segment server restarted under the seal fails
          // it with EIO, and the file was never acknowledged. Counted, not
          // a failure (docs/OPERATIONS.md "Upgrade").
          if (errno == EIO) {
            ++close_eio_;
          } else {
            Fail("close " + name);
          }
        } else if (wrote) {
          expected_[name] = contents;
        }
      }
      ++operations_;
      if (i % 3 == 2) {
        // Rename the previous name away, over nothing.
        const std::string from = absl::StrCat("f", i - 1), to = absl::StrCat("r", i - 1);
        if (expected_.count(from) != 0) {
          if (rename((dir_ + "/" + from).c_str(), (dir_ + "/" + to).c_str()) != 0) {
            Fail("rename " + from);
          } else {
            expected_[to] = expected_[from];
            expected_.erase(from);
            gone_.push_back(from);
          }
          ++operations_;
        }
      }
      if (i % 5 == 4) {
        const std::string victim = absl::StrCat("f", i - 2);
        if (expected_.count(victim) != 0) {
          if (unlink((dir_ + "/" + victim).c_str()) != 0) {
            Fail("unlink " + victim);
          } else {
            expected_.erase(victim);
            gone_.push_back(victim);
          }
          ++operations_;
        }
      }
      absl::SleepFor(absl::Milliseconds(20));  // pacing
    }
  }

  const std::string dir_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> operations_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> close_eio_{0};
  std::string first_failure_;
  std::map<std::string, std::string> expected_;  // the workload thread's, read after Stop
  std::vector<std::string> gone_;
};

class MixedVersionFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old_bin = std::getenv("LOGFS_OLD_BIN");
    if (old_bin == nullptr || *old_bin == '\0') {
      GTEST_SKIP() << "no previous release: set LOGFS_OLD_BIN (tests/faults.sh runs "
                      "tests/old_release.sh)";
    }
    old_bin_ = old_bin;
    new_bin_ = LogfsBinary();
    ASSERT_TRUE(etcd_.Start().ok());
    MountedClusterOptions options;
    options.binary = old_bin_;
    options.mounts = 2;
    options.segment_servers = 4;
    options.etcd_endpoints = etcd_->endpoints();
    options.meta_replicas = 3;
    options.meta_flags = {"--meta_lease_ttl_ms=2000", "--dead_server_ms=5000"};
    options.segd_flags = {"--heartbeat_interval_ms=250"};
    options.mount_flags = {"--wal_segment_bytes=262144", "--replica_timeout_ms=1000",
                           "--fsync_timeout_ms=20000", "--rpc_timeout_ms=3000",
                           "--meta_retry_ms=30000"};
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = std::move(*mc);
    ASSERT_EQ(0, mkdir(cluster_->Path("wal").c_str(), 0755));
    ASSERT_EQ(0, setxattr(cluster_->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
    ASSERT_EQ(0, mkdir(cluster_->Path("ns").c_str(), 0755));
  }
  void TearDown() override {
    cluster_.reset();
    etcd_.Stop();
  }

  bench::CheckerOptions Options(int step) {
    bench::CheckerOptions o;
    o.dir = cluster_->Path(absl::StrCat("wal/step", step));
    o.log_dir = absl::StrCat(cluster_->root(), "/acks", step);
    o.writers = 16;
    o.duration = absl::Seconds(TrialSeconds());
    EXPECT_EQ(0, mkdir(o.dir.c_str(), 0755)) << o.dir;
    EXPECT_TRUE(env::MakeDirs(o.log_dir).ok());
    return o;
  }

  // Runs the WAL writers of step `step` with `change` a third of the way
  // in; the run's report joins `written_`.
  void Step(const std::string& name, const std::function<void()>& change) {
    const int step = static_cast<int>(steps_.size());
    bench::CheckerOptions o = Options(step);
    absl::StatusOr<bench::WriteReport> written;
    std::thread writers([&] { written = bench::RunCheckerWriters(o); });
    absl::SleepFor(o.duration / 3);  // the change's moment in the run, not a wait
    change();
    writers.join();
    ASSERT_TRUE(written.ok()) << name << ": " << written.status();
    EXPECT_EQ(0u, written->write_errors) << name << ": " << written->summary;
    steps_.push_back({name, o, *written});
  }

  // Until `logfs fsck` (this build) says every sealed segment has all its
  // replicas: a segment server is back before the next one goes.
  void WaitFullyReplicated() {
    const std::string fsck = absl::StrCat(new_bin_, " fsck --meta=",
                                          cluster_->cluster().meta_address(), " 2>&1");
    CommandResult last;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      last = RunCommand(fsck);
      if (last.exit_code == 0) return;
      absl::SleepFor(absl::Milliseconds(200));  // poll: replica reports and copies run in passes
    }
    ADD_FAILURE() << "not fully replicated after 60 s:\n" << last.output.substr(0, 2000);
  }

  // Waits until meta replica `i` answers as a standby that has applied
  // the active's journal up to what the active had when asked.
  void WaitCaughtUp(int i) {
    auto active = WaitForActiveMeta(cluster_->cluster(), absl::Seconds(20));
    ASSERT_TRUE(active.ok()) << active.status();
    auto target = MetaStateOf(cluster_->cluster().meta_address(*active));
    ASSERT_TRUE(target.ok()) << target.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      auto state = MetaStateOf(cluster_->cluster().meta_address(i));
      if (state.ok() && state->applied_seq() >= target->applied_seq()) return;
      absl::SleepFor(absl::Milliseconds(50));  // poll the standby's journal position
    }
    ADD_FAILURE() << "meta replica " << i << " did not catch up";
  }

  void RestartMeta(int i, const std::string& binary) {
    cluster_->cluster().KillMeta(i, SIGTERM);
    cluster_->cluster().set_binary(binary);
    ASSERT_TRUE(cluster_->cluster().RestartMeta(i).ok());
  }

  void RestartSegd(int i, const std::string& binary) {
    cluster_->cluster().KillSegd(i, SIGTERM);
    cluster_->cluster().set_binary(binary);
    ASSERT_TRUE(cluster_->cluster().RestartSegd(i).ok());
  }

  struct StepRun {
    std::string name;
    bench::CheckerOptions options;
    bench::WriteReport written;
  };

  TempEtcd etcd_;
  std::unique_ptr<MountedCluster> cluster_;
  std::string old_bin_, new_bin_;
  std::vector<StepRun> steps_;
};

TEST_F(MixedVersionFaultTest, RollingUpgradeFromThePreviousReleaseThenASegdDowngrade) {
  NamespaceWorkload names(cluster_->Path("ns", 1));
  names.Start();

  // 1. Standby metas, one at a time, each caught up before the next.
  auto active = WaitForActiveMeta(cluster_->cluster(), absl::Seconds(20));
  ASSERT_TRUE(active.ok()) << active.status();
  for (int i = 0; i < cluster_->cluster().meta_replicas(); ++i) {
    if (i == *active) continue;
    Step(absl::StrCat("upgrade-standby-meta", i), [&] { RestartMeta(i, new_bin_); });
    WaitCaughtUp(i);
  }
  // 2. The active: a new standby takes over; the old active returns new.
  Step("upgrade-active-meta", [&] { RestartMeta(*active, new_bin_); });
  WaitCaughtUp(*active);
  // 3. Segment servers, one at a time, each back before the next.
  for (int i = 0; i < cluster_->cluster().segment_servers(); ++i) {
    Step(absl::StrCat("upgrade-segd", i), [&] { RestartSegd(i, new_bin_); });
    WaitFullyReplicated();
  }
  names.Stop();
  EXPECT_EQ(0u, names.failures()) << "first: " << names.first_failure();

  // 4. Mounts: closed files, unmounted, mounted with this build.
  absl::Status unmounted = cluster_->UnmountAll();
  ASSERT_TRUE(unmounted.ok()) << unmounted << "\n"
                              << RunCommand("for p in /proc/[0-9]*; do ls -l $p/fd $p/cwd 2>/dev/null "
                                            "| grep -q logfs-test && echo $p $(cat $p/comm) "
                                            "$(ls -l $p/fd $p/cwd 2>/dev/null | grep logfs-test "
                                            "| head -3); done; grep logfs-test /proc/self/mountinfo")
                                     .output;
  cluster_->set_mount_binary(new_bin_);
  ASSERT_TRUE(cluster_->MountAll().ok());
  Step("upgrade-mounts", [] {});

  // 5. One segment server back to the previous release, and forward again.
  Step("downgrade-segd0", [&] { RestartSegd(0, old_bin_); });
  WaitFullyReplicated();

  // Every acked byte of every step, read through the upgraded mounts.
  for (const StepRun& run : steps_) {
    auto verified = bench::VerifyCheckerFiles(run.options);
    ASSERT_TRUE(verified.ok()) << run.name << ": " << verified.status();
    FaultRow row = RowOf("mixed-version-" + run.name, run.written, *verified);
    row.extra = absl::StrCat(" namespace_ops=", names.operations(), " namespace_failures=",
                             names.failures(), " block_close_eio=", names.close_eio());
    PrintFaultRow(row);
    ExpectDurable(run.written, *verified);
  }
  // Every acknowledged namespace operation, from the other upgraded mount.
  std::string example;
  const uint64_t lost = names.Lost(cluster_->Path("ns", 0), &example);
  std::printf("mixed-version namespace: operations=%llu lost=%llu failures=%llu "
              "block_close_eio=%llu\n",
              static_cast<unsigned long long>(names.operations()),
              static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>(names.failures()),
              static_cast<unsigned long long>(names.close_eio()));
  EXPECT_GT(names.operations(), 100u);
  EXPECT_EQ(0u, lost) << "e.g. " << example;
}

}  // namespace
}  // namespace logfs::testing
