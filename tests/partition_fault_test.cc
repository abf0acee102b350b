// Network partitions in the fault-injection suite (issue 13 item 4): the
// durability checker of tests/fault_test.cc runs on a cluster spread over
// network namespaces (tests/multi_host_cluster.h: meta on host 1, five
// segment servers on hosts 2-6 in three racks, mounts A and B on hosts 7
// and 8) while part of the network is cut off and healed. As there: no
// acknowledged byte may be lost or damaged, no file may shrink, and every
// fsync returns within --fsync_timeout_ms. Each trial prints the same
// `fault=...` line, so tests/faults.sh tabulates these with the others.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/durability_checker.h"
#include "src/env/posix_file.h"
#include "tests/fault_row.h"
#include "tests/multi_host_cluster.h"

namespace logfs::testing {
namespace {

constexpr int kFsyncTimeoutMs = 5000;
constexpr int kDeadServerMs = 2000;
// What an fsync may take beyond --fsync_timeout_ms: the FUSE round trip
// and scheduling on a loaded machine.
constexpr absl::Duration kFsyncSlack = absl::Milliseconds(500);

class PartitionFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MultiHostClusterOptions options;  // 5 segment servers on 3 racks, 2 mounts
    options.meta_flags = {absl::StrCat("--dead_server_ms=", kDeadServerMs),
                          "--lease_timeout_ms=3000"};
    options.segd_flags = {"--heartbeat_interval_ms=250"};
    // A mount cut off from meta gives up on a call after --meta_retry_ms,
    // so its writers move on within the trial.
    options.mount_flags = {"--wal_segment_bytes=262144", "--replica_timeout_ms=1000",
                           absl::StrCat("--fsync_timeout_ms=", kFsyncTimeoutMs),
                           "--rpc_timeout_ms=1000", "--meta_retry_ms=3000"};
    auto c = MultiHostCluster::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
    MakeWalDir(cluster_->mounted());
    log_dir_ = cluster_->mounted().root() + "/acks";
    ASSERT_TRUE(env::MakeDirs(log_dir_).ok());
  }

  MountedCluster& mounted() { return cluster_->mounted(); }
  VirtualNetwork& network() { return cluster_->network(); }

  // The checker's writers on mount A; the trial runs long enough for
  // writes after a heal too.
  bench::CheckerOptions Options() {
    bench::CheckerOptions o;
    o.dir = mounted().Path("wal", 0);
    o.log_dir = log_dir_;
    o.writers = 16;
    o.duration = absl::Seconds(TrialSeconds() + 3);
    return o;
  }

  // Seconds until `logfs fsck` (run on meta's host) reports every sealed
  // segment fully replicated (polled; -1 if not within 60 s).
  double SecondsToFullReplication(absl::Time since) {
    CommandResult last;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      last = cluster_->Logfs(MultiHostCluster::kMetaHost, "fsck");
      if (last.exit_code == 0) return absl::ToDoubleSeconds(absl::Now() - since);
      absl::SleepFor(absl::Milliseconds(100));  // poll: re-replication runs in passes
    }
    ADD_FAILURE() << "last fsck:\n" << last.output.substr(0, 3000);
    return -1;
  }

  // Runs the writers on mount A, calls `fault` a third of the way in,
  // then `after`, then verifies every acknowledged byte through mount
  // `verify_mount`. `extra_fsync` is the slowest fsync of the trial's own
  // writers, if any. Prints one table row.
  void RunTrial(
      const std::string& name, const std::function<void()>& fault,
      const std::function<void()>& after, bool wait_replication, int verify_mount,
      const std::function<absl::Duration()>& extra_fsync = [] { return absl::ZeroDuration(); }) {
    bench::CheckerOptions o = Options();
    absl::StatusOr<bench::WriteReport> written;
    std::thread writers([&] { written = bench::RunCheckerWriters(o); });
    absl::SleepFor(o.duration / 3);  // the fault's moment in the trial, not a wait
    const absl::Time fault_time = absl::Now();
    fault();
    writers.join();
    after();
    const double replicated_s = wait_replication ? SecondsToFullReplication(fault_time) : 0;
    ASSERT_TRUE(written.ok()) << written.status();
    o.dir = mounted().Path("wal", verify_mount);
    auto verified = bench::VerifyCheckerFiles(o);
    ASSERT_TRUE(verified.ok()) << verified.status();
    const absl::Duration longest = std::max(written->longest_fsync, extra_fsync());
    FaultRow row = RowOf(name, *written, *verified);
    row.longest_fsync = longest;
    row.seconds_to_full_replication = replicated_s;
    PrintFaultRow(row);
    if (wait_replication) {
      EXPECT_GE(replicated_s, 0) << "fsck never reported full replication";
    }
    ExpectDurable(*written, *verified);
    EXPECT_LE(longest, absl::Milliseconds(kFsyncTimeoutMs) + kFsyncSlack)
        << "an fsync ran past --fsync_timeout_ms";
  }

  // Polls until `logfs status` on meta's host counts every server live.
  void ExpectAllServersLiveAgain() {
    CommandResult status;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      status = cluster_->Logfs(MultiHostCluster::kMetaHost, "status");
      if (status.output.find("servers: 5 (5 live, 0 dead)") != std::string::npos) return;
      absl::SleepFor(absl::Milliseconds(100));  // poll: heartbeats resume
    }
    ADD_FAILURE() << "servers not all live again:\n" << status.output;
  }

  std::unique_ptr<MultiHostCluster> cluster_;
  std::string log_dir_;
};

TEST_F(PartitionFaultTest, SegmentServerHostCutOffThenHealed) {
  // Host 2 (segment server 0) loses its link for longer than
  // --dead_server_ms: writers roll away from it, meta marks it dead and
  // copies its sealed segments elsewhere; healed, it is live again and
  // fsck is clean.
  const int host = cluster_->SegdHost(0);
  RunTrial(
      "partition-segd-host",
      [&] {
        ASSERT_TRUE(network().Disconnect(host).ok());
        absl::SleepFor(absl::Milliseconds(kDeadServerMs + 500));  // the cut's length
        ASSERT_TRUE(network().Reconnect(host).ok());
      },
      [&] { ExpectAllServersLiveAgain(); }, /*wait_replication=*/true, /*verify_mount=*/0);
}

TEST_F(PartitionFaultTest, MetaCutOffFromTheSegmentServersNotFromTheMounts) {
  // Meta hears no heartbeat for longer than --dead_server_ms and counts
  // every server dead, while the mounts still reach both sides; healed,
  // every server is live again and nothing acknowledged is lost.
  RunTrial(
      "partition-meta-segd",
      [&] {
        ASSERT_TRUE(network().Partition(MultiHostCluster::kMetaHost, cluster_->SegdHosts()).ok());
        absl::SleepFor(absl::Milliseconds(kDeadServerMs + 1000));  // the cut's length
        ASSERT_TRUE(network().Heal(MultiHostCluster::kMetaHost, cluster_->SegdHosts()).ok());
      },
      [&] { ExpectAllServersLiveAgain(); }, /*wait_replication=*/true, /*verify_mount=*/0);
}

// One writer that knows which of its writes came after a cut: appends
// 4 KiB chunks with fdatasync to one file until stopped, keeping every
// byte it wrote, the end of its last successful fsync before the cut, and
// what happened to each write and fsync issued after it. After an error
// it keeps using the same (poisoned) descriptor, so every later attempt
// shows whether the cut-off writer can still get anything acknowledged.
class ProbeWriter {
 public:
  ProbeWriter(std::string path, int seed, const std::atomic<bool>* cut)
      : path_(std::move(path)), seed_(seed), cut_(cut) {}
  ~ProbeWriter() { Stop(); }

  bool Start() {
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0) return false;
    thread_ = std::thread([this] { Run(); });
    return true;
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) close(fd_);  // fails on a fenced file; nothing to check
    fd_ = -1;
  }

  struct Result {
    std::string written;                    // every byte whose write() returned
    uint64_t acked = 0;                     // end of the last good fsync before the cut
    uint64_t first_after_cut = UINT64_MAX;  // offset of the first write after the cut
    int attempts_after_cut = 0;             // write + fsync rounds begun after the cut
    int acked_after_cut = 0;                // fsyncs returning 0 over post-cut writes
    absl::Duration longest_fsync;
  };
  Result result() {
    absl::MutexLock lock(&mu_);
    return result_;
  }

 private:
  void Run() {
    for (int i = 0; !stop_; ++i) {
      const bool after_cut = cut_->load();
      const std::string chunk = Pattern(4096, seed_ * 100000 + i);
      const ssize_t n = write(fd_, chunk.data(), chunk.size());
      const absl::Time begin = absl::Now();
      const int rc = fdatasync(fd_);
      const absl::Duration took = absl::Now() - begin;
      Note(after_cut, chunk, n, rc, took);
      if (rc != 0 || n < 0) {
        absl::SleepFor(absl::Milliseconds(20));  // back off between failing attempts
      }
    }
  }

  void Note(bool after_cut, const std::string& chunk, ssize_t n, int rc, absl::Duration took) {
    absl::MutexLock lock(&mu_);
    result_.longest_fsync = std::max(result_.longest_fsync, took);
    if (after_cut) ++result_.attempts_after_cut;
    if (n == static_cast<ssize_t>(chunk.size())) {
      if (after_cut && result_.first_after_cut == UINT64_MAX) {
        result_.first_after_cut = result_.written.size();
      }
      result_.written += chunk;
    }
    const bool covers_cut = result_.first_after_cut != UINT64_MAX;
    if (rc == 0 && covers_cut) ++result_.acked_after_cut;
    if (rc == 0 && !covers_cut) result_.acked = result_.written.size();
  }

  const std::string path_;
  const int seed_;
  const std::atomic<bool>* const cut_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  absl::Mutex mu_;
  Result result_ ABSL_GUARDED_BY(mu_);
};

// Polls until each probe has begun `more` attempts since `since[k]` (or
// since the cut, when `since` is empty).
void AwaitProbeAttempts(std::vector<std::unique_ptr<ProbeWriter>>& probes, int more,
                        const std::vector<int>& since = {}) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  for (size_t k = 0; k < probes.size(); ++k) {
    const int target = (since.empty() ? 0 : since[k]) + more;
    while (probes[k]->result().attempts_after_cut < target && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));  // poll: failing attempts back off
    }
    EXPECT_GE(probes[k]->result().attempts_after_cut, target) << "probe " << k << " stuck";
  }
}

// The checks of one probe: nothing written after the cut was acked;
// `recovered` (read through mount B after the recovery) holds every byte
// acked before it and none written after it; `now` is the same.
void CheckProbe(const ProbeWriter::Result& r, const std::string& recovered,
                const std::string& now) {
  std::printf(
      "probe: written=%zu acked=%lu first_after_cut=%ld attempts_after_cut=%d "
      "recovered=%zu longest_fsync_ms=%.0f\n",
      r.written.size(), static_cast<unsigned long>(r.acked),
      r.first_after_cut == UINT64_MAX ? -1L : static_cast<long>(r.first_after_cut),
      r.attempts_after_cut, recovered.size(), absl::ToDoubleMilliseconds(r.longest_fsync));
  EXPECT_EQ(0, r.acked_after_cut) << "an fsync over a write after the cut returned 0";
  EXPECT_GE(r.attempts_after_cut, 4);
  EXPECT_GE(recovered.size(), r.acked);
  EXPECT_LE(recovered.size(), std::min<uint64_t>(r.first_after_cut, r.written.size()));
  EXPECT_TRUE(r.written.compare(0, recovered.size(), recovered) == 0) << "damaged";
  EXPECT_EQ(recovered.size(), now.size()) << "the file changed after the heal";
  EXPECT_TRUE(now == recovered);
}

TEST_F(PartitionFaultTest, WritingMountCutOffFromEveryServer) {
  // Mount A's host loses meta and every segment server (not mount B).
  // A's writes and fsyncs after the cut never succeed; mount B recovers
  // every file (`logfs recover`: meta fences the open segment and seals
  // what its quorum acked), reads every acknowledged byte and none that
  // A wrote after the cut; after the heal A's old descriptors stay fenced
  // and the recovered files do not change.
  std::atomic<bool> cut{false};
  std::vector<std::unique_ptr<ProbeWriter>> probes;
  auto probe_path = [&](size_t k, int mount) {
    return mounted().Path(absl::StrCat("wal/probe-", k), mount);
  };
  for (int k = 0; k < 2; ++k) {
    probes.push_back(std::make_unique<ProbeWriter>(probe_path(k, 0), k, &cut));
    ASSERT_TRUE(probes.back()->Start());
  }
  std::vector<int> servers = cluster_->SegdHosts();
  servers.push_back(MultiHostCluster::kMetaHost);
  const int a = cluster_->MountHost(0), b = cluster_->MountHost(1);
  std::vector<std::string> recovered(probes.size());
  auto probe_fsyncs = [&] {
    absl::Duration longest;
    for (auto& p : probes) longest = std::max(longest, p->result().longest_fsync);
    return longest;
  };
  RunTrial(
      "partition-writing-mount",
      [&] {
        ASSERT_TRUE(network().Partition(a, servers).ok());
        cut = true;
        AwaitProbeAttempts(probes, 2);  // each has failed since the cut
        CommandResult r = network().Run(
            b, absl::StrCat("for f in ", mounted().Path("wal", 1), "/*; do ", LogfsBinary(),
                            " recover", cluster_->SecretFlag(), " \"$f\" || exit 1; done"));
        ASSERT_EQ(0, r.exit_code) << r.output;
        for (size_t k = 0; k < probes.size(); ++k) {
          auto data = ReadFile(probe_path(k, 1));
          ASSERT_TRUE(data.ok()) << data.status();
          recovered[k] = *data;
        }
        ASSERT_TRUE(network().Heal(a, servers).ok());
      },
      [&] {
        // A's probes try again after the heal, then stop.
        std::vector<int> attempts;
        for (auto& p : probes) attempts.push_back(p->result().attempts_after_cut);
        AwaitProbeAttempts(probes, 2, attempts);
        for (auto& p : probes) p->Stop();
      },
      /*wait_replication=*/false, /*verify_mount=*/1, probe_fsyncs);
  for (size_t k = 0; k < probes.size(); ++k) {
    SCOPED_TRACE(absl::StrCat("probe ", k));
    auto now = ReadFile(probe_path(k, 1));
    ASSERT_TRUE(now.ok()) << now.status();
    CheckProbe(probes[k]->result(), recovered[k], *now);
  }
}

}  // namespace
}  // namespace logfs::testing
