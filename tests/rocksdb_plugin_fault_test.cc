// The fault suite's rows for RocksDB on the plugin (issue 32 item 4): a
// writer process (this binary, re-run as the DISABLED_ child test below)
// puts numbered, checksummed values with WriteOptions::sync through the
// plugin's FileSystem and logs, to a file outside logfs, every key whose
// Put returned OK (and how long that Put took); a real fault hits a real process; afterwards the DB,
// opened again through the plugin, must hold every logged key with its
// value. Prints the "fault=" rows tests/faults.sh tabulates.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "src/util/crc32c.h"
#include "tests/fault_row.h"
#include "tests/meta_ha_cluster.h"
#include "tests/mounted_cluster.h"
#include "tests/rocksdb_plugin_fs.h"

namespace logfs::testing {
namespace {

constexpr size_t kValueBytes = 200;

std::string KeyOf(uint64_t seq) {
  char key[24];
  std::snprintf(key, sizeof(key), "%016llu", static_cast<unsigned long long>(seq));
  return key;
}

// `kValueBytes` bytes that depend on `seq`, ending in their crc32c.
std::string ValueOf(uint64_t seq) {
  std::string value = Pattern(kValueBytes - 4, static_cast<int>(seq % 100000) + 1);
  const uint32_t crc = util::Crc32c(value.data(), value.size());
  value.append(reinterpret_cast<const char*>(&crc), 4);
  return value;
}

// The writer process: $LOGFS_ROCKSDB_URI, $LOGFS_ROCKSDB_DB, the ack log
// $LOGFS_ROCKSDB_ACKS and $LOGFS_ROCKSDB_SECONDS. A failed write (the DB
// stops on a WAL error) closes the DB and opens it again, as an engine
// restarts, until the time is up.
TEST(RocksdbPluginWriter, DISABLED_Child) {
  const char* uri = std::getenv("LOGFS_ROCKSDB_URI");
  const char* db_path = std::getenv("LOGFS_ROCKSDB_DB");
  const char* acks = std::getenv("LOGFS_ROCKSDB_ACKS");
  const char* seconds = std::getenv("LOGFS_ROCKSDB_SECONDS");
  ASSERT_TRUE(uri && db_path && acks && seconds);
  std::shared_ptr<rocksdb::FileSystem> fs = PluginFileSystem(uri);
  ASSERT_NE(nullptr, fs);
  std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
  const int ack_fd = ::open(acks, O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(ack_fd, 0);
  rocksdb::Options options;
  options.env = env.get();
  options.create_if_missing = true;
  // Small memtables: a flush every fraction of a second, so that SSTs,
  // MANIFEST records and compactions (creates, renames and deletes at
  // meta) happen while the fault hits.
  options.write_buffer_size = 256 << 10;
  options.level0_file_num_compaction_trigger = 2;
  rocksdb::WriteOptions synced;
  synced.sync = true;
  const absl::Time deadline = absl::Now() + absl::Seconds(std::atoi(seconds));
  uint64_t seq = 0;
  while (absl::Now() < deadline) {
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, db_path, &raw);
    if (!s.ok()) {
      std::fprintf(stderr, "open: %s\n", s.ToString().c_str());
      absl::SleepFor(absl::Milliseconds(100));  // the fault's process coming back
      continue;
    }
    std::unique_ptr<rocksdb::DB> db(raw);
    while (absl::Now() < deadline) {
      const absl::Time start = absl::Now();
      s = db->Put(synced, KeyOf(seq), ValueOf(seq));
      if (!s.ok()) {
        std::fprintf(stderr, "put %llu: %s\n", static_cast<unsigned long long>(seq),
                     s.ToString().c_str());
        break;
      }
      const std::string line =
          absl::StrCat(seq, " ", absl::ToInt64Microseconds(absl::Now() - start), "\n");
      ASSERT_EQ(static_cast<ssize_t>(line.size()), ::write(ack_fd, line.data(), line.size()));
      ++seq;
    }
  }
  ::close(ack_fd);
}

class RocksdbPluginFaultTest : public ::testing::Test {
 protected:
  virtual MountedClusterOptions ClusterOptions() {
    MountedClusterOptions options;
    options.segment_servers = 5;
    options.meta_flags = {"--dead_server_ms=2000", "--lease_timeout_ms=3000",
                          "--lease_recovery_delay_ms=500"};
    options.segd_flags = {"--heartbeat_interval_ms=250"};
    return options;
  }

  void SetUp() override {
    auto mc = MountedCluster::Start(ClusterOptions());
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = std::move(*mc);
    uri_ = absl::StrCat("logfs://", cluster_->cluster().meta_address());
    acks_ = cluster_->root() + "/acks";
  }

  pid_t StartWriter(int seconds) {
    const pid_t pid = ::fork();
    if (pid != 0) return pid;
    const std::string out = cluster_->root() + "/writer.out";
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::setenv("LOGFS_ROCKSDB_URI", uri_.c_str(), 1);
    ::setenv("LOGFS_ROCKSDB_DB", "/db", 1);
    ::setenv("LOGFS_ROCKSDB_ACKS", acks_.c_str(), 1);
    ::setenv("LOGFS_ROCKSDB_SECONDS", std::to_string(seconds).c_str(), 1);
    ::execl("/proc/self/exe", "logfs_test", "--gtest_filter=RocksdbPluginWriter.DISABLED_Child",
            "--gtest_also_run_disabled_tests", static_cast<char*>(nullptr));
    ::_exit(127);
  }

  // Polls until the writer has `count` acked keys (false after 60 s).
  bool WaitForAcks(size_t count) {
    for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
      auto acks = ReadFile(acks_);
      if (acks.ok() &&
          static_cast<size_t>(std::count(acks->begin(), acks->end(), '\n')) >= count) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  // Opens the DB through the plugin (a new client session: polls while
  // the dead writer's lock lease has not lapsed) and checks every acked
  // key. Prints the row.
  void Verify(const std::string& fault, uint64_t write_errors) {
    auto acks = ReadFile(acks_);
    ASSERT_TRUE(acks.ok());
    std::vector<uint64_t> acked;
    int64_t longest_put_us = 0;
    for (absl::string_view line : absl::StrSplit(*acks, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> fields = absl::StrSplit(line, ' ');
      uint64_t seq;
      int64_t put_us;
      ASSERT_TRUE(fields.size() == 2 && absl::SimpleAtoi(fields[0], &seq) &&
                  absl::SimpleAtoi(fields[1], &put_us))
          << line;
      acked.push_back(seq);
      longest_put_us = std::max(longest_put_us, put_us);
    }
    ASSERT_FALSE(acked.empty()) << ReadFile(cluster_->root() + "/writer.out").value_or("");
    std::shared_ptr<rocksdb::FileSystem> fs = PluginFileSystem(uri_);
    ASSERT_NE(nullptr, fs);
    std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
    rocksdb::Options options;
    options.env = env.get();
    std::unique_ptr<rocksdb::DB> db;
    rocksdb::Status s;
    for (const absl::Time deadline = absl::Now() + absl::Seconds(60); absl::Now() < deadline;) {
      rocksdb::DB* raw = nullptr;
      s = rocksdb::DB::Open(options, "/db", &raw);
      if (s.ok()) {
        db.reset(raw);
        break;
      }
      absl::SleepFor(absl::Milliseconds(200));  // the lock's lease lapsing
    }
    ASSERT_NE(nullptr, db) << s.ToString();
    uint64_t lost = 0;
    std::string value;
    for (uint64_t seq : acked) {
      s = db->Get(rocksdb::ReadOptions(), KeyOf(seq), &value);
      if (!s.ok() || value != ValueOf(seq)) {
        if (lost++ < 5) ADD_FAILURE() << "acked key " << seq << " lost: " << s.ToString();
      }
    }
    FaultRow row;
    row.name = fault;
    row.acked_bytes = acked.size() * kValueBytes;
    row.acked_bytes_lost = lost * kValueBytes;
    row.write_errors = write_errors;
    row.longest_fsync = absl::Microseconds(longest_put_us);  // the longest synced Put
    row.extra = absl::StrCat(" acked_puts=", acked.size());
    PrintFaultRow(row);
    EXPECT_EQ(0u, lost);
  }

  // Waits for the writer to end by itself; its exit status.
  int WaitWriter(pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }

  uint64_t WriteErrors() {
    auto out = ReadFile(cluster_->root() + "/writer.out");
    if (!out.ok()) return 0;
    uint64_t errors = 0;
    for (absl::string_view line : absl::StrSplit(*out, '\n')) {
      if (absl::StartsWith(line, "put ")) ++errors;
    }
    return errors;
  }

  std::unique_ptr<MountedCluster> cluster_;
  std::string uri_;
  std::string acks_;
};

TEST_F(RocksdbPluginFaultTest, KillTheEngineProcess) {
  const pid_t writer = StartWriter(60);
  ASSERT_TRUE(WaitForAcks(200)) << ReadFile(cluster_->root() + "/writer.out").value_or("");
  absl::SleepFor(absl::Seconds(TrialSeconds()) / 3);  // the fault's shape: mid-run
  ASSERT_EQ(0, ::kill(writer, SIGKILL));
  WaitWriter(writer);
  Verify("rocksdb-kill-engine", WriteErrors());
}

TEST_F(RocksdbPluginFaultTest, KillTwoSegmentServers) {
  const pid_t writer = StartWriter(TrialSeconds());
  ASSERT_TRUE(WaitForAcks(100)) << ReadFile(cluster_->root() + "/writer.out").value_or("");
  cluster_->cluster().KillSegd(0, SIGKILL);
  absl::SleepFor(absl::Milliseconds(50));  // 50 ms apart, as the mount's row
  cluster_->cluster().KillSegd(1, SIGKILL);
  const int status = WaitWriter(writer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Verify("rocksdb-kill-2-segd", WriteErrors());
}

TEST_F(RocksdbPluginFaultTest, KillAndRestartMeta) {
  const pid_t writer = StartWriter(TrialSeconds() + 2);
  ASSERT_TRUE(WaitForAcks(100)) << ReadFile(cluster_->root() + "/writer.out").value_or("");
  cluster_->cluster().KillMeta(SIGKILL);
  ASSERT_TRUE(cluster_->cluster().RestartMeta().ok());
  const int status = WaitWriter(writer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Verify("rocksdb-restart-meta", WriteErrors());
}

// Meta as three replicas on a three-member etcd: the plugin's client
// follows the active through the meta list in its URI, as a mount does.
class RocksdbPluginHaFaultTest : public RocksdbPluginFaultTest {
 protected:
  MountedClusterOptions ClusterOptions() override {
    MountedClusterOptions options = RocksdbPluginFaultTest::ClusterOptions();
    options.etcd_endpoints = etcd_->endpoints();
    options.meta_replicas = 3;
    options.meta_flags.push_back("--meta_lease_ttl_ms=2000");
    return options;
  }
  void SetUp() override {
    ASSERT_TRUE(etcd_.Start().ok());
    RocksdbPluginFaultTest::SetUp();
  }
  void TearDown() override {
    cluster_.reset();
    etcd_.Stop();
  }

  TempEtcd etcd_;
};

TEST_F(RocksdbPluginHaFaultTest, KillTheActiveMeta) {
  auto active = WaitForActiveMeta(cluster_->cluster(), absl::Seconds(20));
  ASSERT_TRUE(active.ok()) << active.status();
  const pid_t writer = StartWriter(TrialSeconds() + 4);
  ASSERT_TRUE(WaitForAcks(100)) << ReadFile(cluster_->root() + "/writer.out").value_or("");
  cluster_->cluster().KillMeta(*active, SIGKILL);
  auto next = WaitForActiveMeta(cluster_->cluster(), absl::Seconds(20), *active);
  ASSERT_TRUE(next.ok()) << next.status();
  const int status = WaitWriter(writer);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Verify("rocksdb-kill-active-meta", WriteErrors());
}

}  // namespace
}  // namespace logfs::testing
