// The fault-injection suite (DESIGN §3): the durability checker's writers
// append synced records to WAL files through a real mount of meta + 5
// segment servers while a real fault hits a real process; afterwards no
// acknowledged byte may be missing or damaged and no reader may have seen
// a file shrink. Each fault runs once here, briefly; tests/faults.sh runs
// them many times and prints a table.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/durability_checker.h"
#include "src/cluster/process.h"
#include "store/frame.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

int TrialSeconds() {
  const char* env = std::getenv("LOGFS_FAULT_SECONDS");
  int s = 0;
  return env != nullptr && absl::SimpleAtoi(env, &s) && s > 0 ? s : 3;
}

class FaultTest : public ::testing::Test {
 protected:
  virtual int TmpfsSegd() { return -1; }

  void SetUp() override {
    MountedClusterOptions options;
    if (TmpfsSegd() >= 0) options.tmpfs_segds = {TmpfsSegd()};
    options.segment_servers = 5;
    options.meta_flags = {"--dead_server_ms=2000", "--lease_timeout_ms=3000"};
    options.segd_flags = {"--heartbeat_interval_ms=250"};
    options.mount_flags = {"--wal_segment_bytes=262144", "--replica_timeout_ms=1000",
                           "--fsync_timeout_ms=10000", "--rpc_timeout_ms=3000"};
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = std::move(*mc);
    ASSERT_EQ(0, mkdir(cluster_->Path("wal").c_str(), 0755));
    ASSERT_EQ(0, setxattr(cluster_->Path("wal").c_str(), "user.logfs.kind", "wal", 3, 0));
    log_dir_ = cluster_->root() + "/acks";
    ASSERT_TRUE(cluster::MakeDirs(log_dir_).ok());
  }

  bench::CheckerOptions Options() {
    bench::CheckerOptions o;
    o.dir = cluster_->Path("wal");
    o.log_dir = log_dir_;
    o.writers = 16;
    o.duration = absl::Seconds(TrialSeconds());
    return o;
  }

  // Runs the writers, calls `fault` a third of the way in, then (after
  // `after`, e.g. a remount) verifies. Prints one table row.
  // Seconds until `logfs fsck` reports every sealed segment fully
  // replicated again (polled; -1 if not within 60 s).
  double SecondsToFullReplication(absl::Time since) {
    CommandResult last;
    const std::string fsck =
        absl::StrCat(LogfsBinary(), " fsck --meta=", cluster_->cluster().meta_address());
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      last = RunCommand(fsck);
      if (last.exit_code == 0) return absl::ToDoubleSeconds(absl::Now() - since);
      absl::SleepFor(absl::Milliseconds(100));  // poll: re-replication runs in passes
    }
    ADD_FAILURE() << "last fsck:\n" << last.output.substr(0, 3000);
    return -1;
  }

  void RunTrial(const std::string& name, const std::function<void()>& fault,
                const std::function<void()>& after = [] {}, bool wait_replication = false) {
    bench::CheckerOptions o = Options();
    absl::StatusOr<bench::WriteReport> written;
    std::thread writers([&] { written = bench::RunCheckerWriters(o); });
    absl::SleepFor(o.duration / 3);  // the fault's moment in the trial, not a wait
    absl::Time fault_time = absl::Now();
    fault();
    writers.join();
    after();
    double replicated_s = wait_replication ? SecondsToFullReplication(fault_time) : 0;
    ASSERT_TRUE(written.ok()) << written.status();
    auto verified = bench::VerifyCheckerFiles(o);
    ASSERT_TRUE(verified.ok()) << verified.status();
    std::printf("fault=%s acked_bytes=%lu acked_bytes_lost=%lu longest_fsync_ms=%.0f "
                "write_errors=%lu shrinks=%lu seconds_to_full_replication=%.1f\n",
                name.c_str(), static_cast<unsigned long>(verified->acked_bytes),
                static_cast<unsigned long>(verified->acked_bytes_lost),
                absl::ToDoubleMilliseconds(written->longest_fsync),
                static_cast<unsigned long>(written->write_errors),
                static_cast<unsigned long>(written->shrinks_seen), replicated_s);
    if (wait_replication) {
      EXPECT_GE(replicated_s, 0) << "fsck never reported full replication";
    }
    for (const auto& p : verified->problems) ADD_FAILURE() << p;
    EXPECT_GT(verified->acked_bytes, 0u);
    EXPECT_EQ(0u, verified->acked_bytes_lost);
    EXPECT_EQ(0u, verified->damaged_records);
    EXPECT_EQ(0u, verified->garbage_then_records);
    EXPECT_EQ(0u, written->shrinks_seen);
  }

  std::unique_ptr<MountedCluster> cluster_;
  std::string log_dir_;
};

TEST_F(FaultTest, KillTwoSegmentServers50MsApart) {
  RunTrial(
      "kill-2-segd",
      [&] {
        cluster_->cluster().KillSegd(0, SIGKILL);
        absl::SleepFor(absl::Milliseconds(50));  // the fault's shape: 50 ms apart
        cluster_->cluster().KillSegd(1, SIGKILL);
      },
      [] {}, /*wait_replication=*/true);
}

TEST_F(FaultTest, StopASegmentServerPastTheReplicaTimeout) {
  RunTrial("sigstop-segd", [&] {
    pid_t pid = cluster_->cluster().segd_pid(2);
    kill(pid, SIGSTOP);
    absl::SleepFor(absl::Milliseconds(1500));  // longer than --replica_timeout_ms
    kill(pid, SIGCONT);
  });
}

TEST_F(FaultTest, RestartMetaWhileWritersRun) {
  RunTrial("restart-meta", [&] {
    cluster_->cluster().KillMeta(SIGKILL);
    ASSERT_TRUE(cluster_->cluster().RestartMeta().ok());
  });
}

TEST_F(FaultTest, KillTheWritingMountThenVerifyFromANewMount) {
  RunTrial(
      "kill-mount", [&] { cluster_->KillMount(0); },
      [&] { ASSERT_TRUE(cluster_->MountAll().ok()); });
}

// Sends raw bytes to a server and closes.
void SendGarbage(const std::string& address, const std::string& bytes) {
  auto colon = address.rfind(':');
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    ssize_t ignored = write(fd, bytes.data(), bytes.size());
    (void)ignored;
  }
  close(fd);
}

TEST_F(FaultTest, GarbageTruncatedAndOversizedFramesToEveryServer) {
  RunTrial("garbage-frames", [&] {
    std::string garbage(100, 'x');
    std::string truncated =
        store::EncodeFrame(0, store::MessageType::kAppend, 1, "message", "data").substr(0, 30);
    std::string oversized = store::EncodeFrame(0, store::MessageType::kLookup, 1, "", "");
    oversized[19] = 0x7f;  // message_bytes far over the limit
    std::vector<std::string> targets = {cluster_->cluster().meta_address()};
    for (int i = 0; i < 5; ++i) targets.push_back(cluster_->cluster().segd_address(i));
    for (const auto& t : targets) {
      SendGarbage(t, garbage);
      SendGarbage(t, truncated);
      SendGarbage(t, oversized);
    }
  });
  // Every server is still up.
  EXPECT_TRUE(cluster::ChildRunning(cluster_->cluster().meta_pid()));
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(cluster::ChildRunning(cluster_->cluster().segd_pid(i)));
}

class DiskFullFaultTest : public FaultTest {
 protected:
  int TmpfsSegd() override { return 4; }
};

TEST_F(DiskFullFaultTest, ASegmentServersDiskFillsUp) {
  // Segment server 4's data disk (a tmpfs sized like the others' free
  // space, so it gets segments) is shrunk to full mid-run: its appends
  // fail with ENOSPC and writers roll away from it.
  RunTrial("disk-full", [&] {
    absl::Status filled = cluster_->FillDisk(4, 4096);
    ASSERT_TRUE(filled.ok()) << filled;
  });
}

}  // namespace
}  // namespace logfs::testing
