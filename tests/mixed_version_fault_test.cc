// A rolling upgrade from the previous release (issue 34 item 2), a row of
// the fault suite (tests/faults.sh, `make faults`): a cluster of the
// previous release (three meta replicas on etcd, four segment servers, two
// mounts), built by tests/old_release.sh from its tag, is upgraded to this
// build one process at a time in the order docs/OPERATIONS.md "Upgrade"
// gives (standby metas, the active meta, segment servers, then each mount),
// and one segment server is then taken back to the previous release. WAL
// writers (bench/durability_checker.h: 16 writers appending and
// fdatasyncing on mount 0) run through every step but mount 0's own, and a
// namespace workload (create, write, rename, unlink on mount 1) through
// every step but mount 1's. Promise: every acked byte and every
// acknowledged namespace operation is there at the end, read through the
// upgraded mounts; no write, fsync or namespace call failed, except the
// close of a block file whose seal met a segment server's restart, which
// fails with EIO by contract (a block file is durable on every replica at
// close; docs/OPERATIONS.md "Upgrade"): counted (block_close_eio), and
// that file must still exist.
//
// Skipped unless $LOGFS_OLD_BIN names the previous release's binary
// (faults.sh sets it: tests/old_release.sh).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <vector>
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
// name -> contents. A failed call is counted (none may fail), and its names
// become uncertain (a call that failed may still have been applied);
// `segd_restarting` says when a block file's close may fail with EIO.
class NamespaceChanges {
 public:
  NamespaceChanges(std::string dir, const std::atomic<bool>* segd_restarting)
      : dir_(std::move(dir)), segd_restarting_(segd_restarting) {}
  ~NamespaceChanges() { Stop(); }

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

  // After Stop: the names missing or different, or there after their
  // unlink or rename away, as read now under `dir` (another mount's path
  // to this directory); `*example` names the first.
  uint64_t Lost(const std::string& dir, std::string* example) const {
    uint64_t lost = 0;
    auto note = [&](const std::string& what) {
      ++lost;
      if (example->empty()) *example = what;
    };
    for (const auto& [name, contents] : expected_) {
      auto got = ReadFile(dir + "/" + name);
      if (!got.ok() || (contents != kUnknown && *got != contents)) {
        note(absl::StrCat(name, ": ", got.ok() ? "'" + *got + "'" : got.status().ToString(),
                          " instead of '", contents, "'"));
      }
    }
    for (const std::string& name : gone_) {
      struct stat st;
      if (expected_.count(name) == 0 && uncertain_.count(name) == 0 &&
          stat((dir + "/" + name).c_str(), &st) == 0) {
        note(name + " is there after its unlink or rename away");
      }
    }
    return lost;
  }

 private:
  // The contents of a file whose close failed: it exists, with what bytes
  // its replicas hold.
  static constexpr const char* kUnknown = "\x01unknown";

  void Fail(const std::string& what, int error, std::initializer_list<std::string> names) {
    ++failures_;
    if (first_failure_.empty()) first_failure_ = absl::StrCat(what, ": ", std::strerror(error));
    for (const std::string& name : names) {
      expected_.erase(name);
      uncertain_.insert(name);
    }
  }

  void Run() {
    // Bounded: at most 100,000 steps, paced (not waiting for anything) so
    // that a run of a minute makes a few thousand names.
    for (uint64_t i = 0; i < 100000 && !stop_; ++i) {
      const std::string name = absl::StrCat("f", i);
      const std::string contents = i % 4 == 0 ? absl::StrCat("contents of ", i) : "";
      const int fd =
          open((dir_ + "/" + name).c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) {
        Fail("create " + name, errno, {name});
      } else {
        ssize_t wrote = 0;
        if (!contents.empty()) wrote = write(fd, contents.data(), contents.size());
        const int write_error = wrote < 0 ? errno : EIO;  // EIO: a short write
        const int closed = close(fd);
        const int close_error = errno;
        if (wrote != static_cast<ssize_t>(contents.size())) {
          Fail("write " + name, write_error, {name});
        } else if (closed != 0 && close_error == EIO && segd_restarting_->load()) {
          ++close_eio_;
          expected_[name] = kUnknown;  // created: it must exist
        } else if (closed != 0) {
          Fail("close " + name, close_error, {name});
        } else {
          expected_[name] = contents;
        }
      }
      ++operations_;
      if (i % 3 == 2) {
        // Rename the previous name away, over nothing.
        const std::string from = absl::StrCat("f", i - 1), to = absl::StrCat("r", i - 1);
        if (expected_.count(from) != 0) {
          if (rename((dir_ + "/" + from).c_str(), (dir_ + "/" + to).c_str()) != 0) {
            Fail("rename " + from, errno, {from, to});
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
            Fail("unlink " + victim, errno, {victim});
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
  const std::atomic<bool>* const segd_restarting_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> operations_{0};
  std::atomic<uint64_t> failures_{0};
  std::atomic<uint64_t> close_eio_{0};
  // The workload thread's; read after Stop.
  std::string first_failure_;
  std::map<std::string, std::string> expected_;
  std::set<std::string> uncertain_;
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
    // The servers restarted under the writers must not keep their files
    // (and so the mounts) open; meta is replicated, so the FLUSH their
    // closing sends does not wait on the meta being started.
    options.close_inherited_fds = true;
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
    MakeWalDir(*cluster_);
    ASSERT_EQ(0, mkdir(cluster_->Path("ns").c_str(), 0755));
    ASSERT_EQ(0, mkdir(cluster_->Path("ns2").c_str(), 0755));
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
    if (!written.ok()) {
      ADD_FAILURE() << name << ": " << written.status();
      return;
    }
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
    absl::Status restarted = cluster_->cluster().RestartMeta(i);
    EXPECT_TRUE(restarted.ok()) << "meta " << i << ": " << restarted;
  }

  // Restarts segment server `i` on `binary`, then waits until every sealed
  // segment has its replicas again, so the next one may go.
  void RestartSegd(int i, const std::string& binary) {
    segd_restarting_ = true;
    cluster_->cluster().KillSegd(i, SIGTERM);
    cluster_->cluster().set_binary(binary);
    absl::Status restarted = cluster_->cluster().RestartSegd(i);
    EXPECT_TRUE(restarted.ok()) << "segd " << i << ": " << restarted;
  }
  void SegdBack() {
    WaitFullyReplicated();
    segd_restarting_ = false;
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
  std::atomic<bool> segd_restarting_{false};
};

TEST_F(MixedVersionFaultTest, RollingUpgradeFromThePreviousReleaseThenASegdDowngrade) {
  NamespaceChanges names(cluster_->Path("ns", 1), &segd_restarting_);
  names.Start();

  // 1. Standby metas, one at a time, each caught up before the next.
  auto active = WaitForActiveMeta(cluster_->cluster(), absl::Seconds(20));
  ASSERT_TRUE(active.ok()) << active.status();
  const char* nth[] = {"first", "second"};
  int standby = 0;
  for (int i = 0; i < cluster_->cluster().meta_replicas(); ++i) {
    if (i == *active) continue;
    Step(absl::StrCat("upgrade-", nth[standby++], "-standby-meta"),
         [&] { RestartMeta(i, new_bin_); });
    WaitCaughtUp(i);
  }
  // 2. The active: a new standby takes over; the old active returns new.
  Step("upgrade-active-meta", [&] { RestartMeta(*active, new_bin_); });
  WaitCaughtUp(*active);
  // 3. Segment servers, one at a time, each back before the next.
  for (int i = 0; i < cluster_->cluster().segment_servers(); ++i) {
    Step(absl::StrCat("upgrade-segd", i), [&] { RestartSegd(i, new_bin_); });
    SegdBack();
  }
  // 4. Mounts, one at a time: mount 1 under the WAL writers of mount 0
  // (its namespace workload stopped: a remount needs its files closed),
  // then mount 0 under a namespace workload on the new mount 1.
  names.Stop();
  cluster_->set_mount_binary(new_bin_);
  Step("upgrade-mount1", [&] {
    absl::Status remounted = cluster_->RemountOne(1);
    EXPECT_TRUE(remounted.ok()) << remounted;
  });
  NamespaceChanges names2(cluster_->Path("ns2", 1), &segd_restarting_);
  names2.Start();
  absl::Status remounted = cluster_->RemountOne(0);
  ASSERT_TRUE(remounted.ok()) << remounted;
  Step("after-upgrade-mount0", [] {});

  // 5. One segment server back to the previous release.
  Step("downgrade-segd0", [&] { RestartSegd(0, old_bin_); });
  SegdBack();
  names2.Stop();

  // Every acked byte of every step, read through the upgraded mounts.
  const uint64_t operations = names.operations() + names2.operations();
  const uint64_t failures = names.failures() + names2.failures();
  const uint64_t close_eio = names.close_eio() + names2.close_eio();
  for (const StepRun& run : steps_) {
    auto verified = bench::VerifyCheckerFiles(run.options);
    ASSERT_TRUE(verified.ok()) << run.name << ": " << verified.status();
    FaultRow row = RowOf("mixed-version-" + run.name, run.written, *verified);
    row.extra = absl::StrCat(" namespace_ops=", operations, " namespace_failures=", failures,
                             " block_close_eio=", close_eio);
    PrintFaultRow(row);
    ExpectDurable(run.written, *verified);
  }
  // Every acknowledged namespace operation, read through the other mount.
  EXPECT_EQ(0u, names.failures()) << "first: " << names.first_failure();
  EXPECT_EQ(0u, names2.failures()) << "first: " << names2.first_failure();
  std::string example;
  const uint64_t lost = names.Lost(cluster_->Path("ns", 0), &example) +
                        names2.Lost(cluster_->Path("ns2", 0), &example);
  std::printf("mixed-version namespace: operations=%llu lost=%llu failures=%llu "
              "block_close_eio=%llu\n",
              static_cast<unsigned long long>(operations), static_cast<unsigned long long>(lost),
              static_cast<unsigned long long>(failures),
              static_cast<unsigned long long>(close_eio));
  EXPECT_GT(operations, 100u);
  EXPECT_EQ(0u, lost) << "e.g. " << example;
}

}  // namespace
}  // namespace logfs::testing
