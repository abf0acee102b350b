// FUSE workers are never parked on a segment server (DESIGN §2, issue 16
// item 4): reads that need a remote replica, writes that need a roll, and
// reads and stats of a live file (whose length its open segment's
// replicas hold) reply from the mount's waiting pool, so with every
// segment server stalled and more such requests in flight than the mount
// has FUSE workers, calls that need only meta (stat, ls) still answer at
// once.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/util/unique_fd.h"
#include "tests/caller_threads.h"
#include "tests/fakes/loopback_exchange.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr int kFuseWorkers = 4;
constexpr int kReaders = 8;
constexpr int kWriters = 4;
constexpr size_t kFileBytes = 64 << 10;  // one block-cache block
constexpr size_t kWalBytes = 4000;       // of a 4096-byte WAL segment

constexpr absl::Duration kRepliesAfterResume = absl::Seconds(30);

// Calls that need only meta, timed: a stat of a name never looked up (no
// kernel cache answers it) and a listing of a directory.
struct MetaOnlyCalls {
  int stat_errno = 0;
  absl::Duration stat_took, ls_took;
  size_t entries = 0;
  std::string ls_error;
};

MetaOnlyCalls TimeMetaOnlyCalls(const std::string& missing, const std::string& dir) {
  MetaOnlyCalls out;
  struct stat st;
  absl::Time start = absl::Now();
  out.stat_errno = stat(missing.c_str(), &st) == 0 ? 0 : errno;
  out.stat_took = absl::Now() - start;
  start = absl::Now();
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator(dir, error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++out.entries;
  }
  out.ls_took = absl::Now() - start;
  out.ls_error = error.message();
  return out;
}

// Both answered at once, right: ENOENT, and `entries` names in the listing.
void ExpectAnsweredAtOnce(const MetaOnlyCalls& calls, size_t entries) {
  EXPECT_EQ(ENOENT, calls.stat_errno);
  EXPECT_LT(calls.stat_took, absl::Seconds(1));
  EXPECT_LT(calls.ls_took, absl::Seconds(1));
  EXPECT_EQ(entries, calls.entries) << calls.ls_error;
}

TEST(FuseWorkersTest, StatAndLsAnswerWhileEveryWorkerWouldWaitOnAStalledReplica) {
  // Goal: with all segment servers stopped, 8 reads of sealed data over
  // TCP and 4 writes that each need a roll are in the mount at once, 3
  // times its 4 FUSE workers; stat of a new name and a listing of the
  // root (meta only) must answer within a second meanwhile. Before the
  // waiting pool each of those requests held a worker until the servers
  // came back, and stat waited behind them.
  // Method: short-circuit reads off (every read goes over TCP) and
  // 4096-byte WAL segments; files written first; kernel page cache and
  // block cache dropped; the servers stopped by PID; the mount's counters
  // (remote_reads, rolls) polled until every request reached the mount;
  // stat and readdir timed; then the servers resumed and every read and
  // write checked.
  MountedClusterOptions options;
  options.mount_flags = {absl::StrCat("--fuse_threads=", kFuseWorkers),
                         "--noshort_circuit",
                         "--wal_segment_bytes=4096",
                         "--rpc_timeout_ms=60000",
                         "--replica_timeout_ms=60000",
                         "--fsync_timeout_ms=60000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  MakeWalDir(c);
  for (int i = 0; i < kReaders; ++i) {
    ASSERT_TRUE(WriteFile(c.Path(absl::StrCat("sealed", i)), Pattern(kFileBytes, i)).ok());
  }
  for (int i = 0; i < kWriters; ++i) {
    ASSERT_TRUE(WriteFile(c.Path(absl::StrCat("wal/log", i)), Pattern(kWalBytes, 100 + i)).ok());
  }
  ASSERT_EQ(0, RunCommand("sync; echo 3 >/proc/sys/vm/drop_caches").exit_code);
  ASSERT_EQ(0, setxattr(c.mountpoint().c_str(), "user.logfs.drop_block_cache", "1", 1, 0));
  std::map<std::string, uint64_t> before = MountStats(c.mountpoint());
  ASSERT_FALSE(before.empty());

  StalledServers stalled(c.cluster());
  ASSERT_TRUE(stalled.Stall());
  std::vector<std::string> read_results(kReaders);
  std::vector<ssize_t> write_results(kWriters, -2);
  CallerThreads callers(c, 0);
  for (int i = 0; i < kReaders; ++i) {
    callers.Start([&, i] {
      const int fd = open(c.Path(absl::StrCat("sealed", i)).c_str(), O_RDONLY | O_DIRECT);
      if (fd >= 0) {
        std::unique_ptr<char, decltype(&std::free)> buf(
            static_cast<char*>(std::aligned_alloc(4096, kFileBytes)), &std::free);
        const ssize_t n = pread(fd, buf.get(), kFileBytes, 0);
        read_results[i] = n > 0 ? std::string(buf.get(), n) : "";
        close(fd);
      }
    });
  }
  for (int i = 0; i < kWriters; ++i) {
    callers.Start([&, i] {
      const int fd = open(c.Path(absl::StrCat("wal/log", i)).c_str(), O_WRONLY | O_APPEND);
      if (fd >= 0) {
        const std::string more = Pattern(200, 200 + i);
        write_results[i] = write(fd, more.data(), more.size());
        close(fd);
      }
    });
  }
  // The probe, on a thread of its own so that a mount that parks its
  // workers fails the test instead of hanging it: (a) polls the mount's
  // counters until every request is in the mount, waiting (the stats
  // xattr is itself a FUSE call), then times (b) a stat of a name never
  // looked up (no kernel cache answers it) and (c) a listing of the root.
  struct Probe {
    bool in_flight = false;
    std::string counters;
    MetaOnlyCalls calls;
  };
  auto probe = std::make_shared<Probe>();
  auto probed = std::make_shared<absl::Notification>();
  CallerThreads prober(c, 0);
  prober.Start([&c, before, probe, probed] {
    std::map<std::string, uint64_t> now;
    for (int poll = 0; poll < 300 && !probe->in_flight; ++poll) {
      now = MountStats(c.mountpoint());
      probe->in_flight = now["remote_reads"] >= before.at("remote_reads") + kReaders &&
                         now["rolls"] >= before.at("rolls") + kWriters;
      if (!probe->in_flight) absl::SleepFor(absl::Milliseconds(20));
    }
    probe->counters =
        absl::StrCat("remote_reads ", before.at("remote_reads"), " -> ", now["remote_reads"],
                     ", rolls ", before.at("rolls"), " -> ", now["rolls"]);
    probe->calls = TimeMetaOnlyCalls(c.Path("never-there"), c.mountpoint());
    probed->Notify();
  });
  const bool answered = probed->WaitForNotificationWithTimeout(absl::Seconds(20));
  EXPECT_TRUE(answered) << "stat and ls did not answer while requests waited for the servers";
  EXPECT_EQ(0, callers.ended()) << "the servers were stalled all along";
  if (answered) {
    EXPECT_TRUE(probe->in_flight) << "not every read and write reached the mount: "
                                  << probe->counters;
    ExpectAnsweredAtOnce(probe->calls, kReaders + 1);
  }

  // Resumed: every waiting request completes with the right result.
  stalled.Resume();
  ASSERT_TRUE(prober.JoinWithin(kRepliesAfterResume)) << "stat or ls never answered";
  ASSERT_TRUE(callers.JoinWithin(kRepliesAfterResume)) << "a read or write never answered";
  for (int i = 0; i < kReaders; ++i) {
    EXPECT_TRUE(read_results[i] == Pattern(kFileBytes, i)) << "reader " << i;
  }
  for (int i = 0; i < kWriters; ++i) EXPECT_EQ(200, write_results[i]) << "writer " << i;
  for (int i = 0; i < kWriters; ++i) {
    auto wal = ReadFile(c.Path(absl::StrCat("wal/log", i)));
    ASSERT_TRUE(wal.ok()) << wal.status();
    EXPECT_TRUE(*wal == Pattern(kWalBytes, 100 + i) + Pattern(200, 200 + i)) << "log " << i;
  }
}

// Two mounts of a cluster whose meta serves metrics; mount 0 writes a WAL
// file (wal/tailed), fsyncs and keeps it open; mount 1 reads it: a tail -f
// from another mount. Everything is undone by the destructor.
class TailedFile {
 public:
  static constexpr size_t kFirst = 3000;  // bytes before mount 1 opens the file
  static constexpr size_t kMore = 500;    // bytes appended after

  // Starts the cluster with `mount_flags`, writes and fsyncs kFirst bytes on
  // mount 0, opens the file on mount 1 and reads them there, then appends
  // and fsyncs kMore bytes on mount 0. ok() says whether all of it worked.
  explicit TailedFile(std::vector<std::string> mount_flags) {
    char tmpl[] = "/tmp/logfs-fuse-workers-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      error_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    MountedClusterOptions options;
    options.mounts = 2;
    options.mount_flags = std::move(mount_flags);
    options.meta_flags = {"--metrics_listen=127.0.0.1:0",
                          "--metrics_address_file=" + dir_ + "/meta.metrics_address"};
    auto mc = MountedCluster::Start(options);
    if (!mc.ok()) {
      error_ = mc.status().ToString();
      return;
    }
    cluster_ = std::move(*mc);
    MakeWalDir(*cluster_);
    port_ = PortInAddressFile(dir_ + "/meta.metrics_address");
    writer_.Reset(open(cluster_->Path("wal/tailed", 0).c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644));
    if (port_ <= 0) {
      error_ = "meta wrote no metrics address";
      return;
    }
    if (writer_.get() < 0 || !Append(first()).ok()) {
      error_ = absl::StrCat("writing on mount 0 failed: errno ", errno);
      return;
    }
    reader_.Reset(open(cluster_->Path("wal/tailed", 1).c_str(), O_RDONLY));
    if (reader_.get() < 0) {
      error_ = absl::StrCat("open on mount 1 failed: errno ", errno);
      return;
    }
    std::string got(kFirst + kMore, '\0');
    if (pread(reader_.get(), got.data(), got.size(), 0) != static_cast<ssize_t>(kFirst) ||
        got.substr(0, kFirst) != first() || !Append(more()).ok()) {
      error_ = "reading on mount 1 or appending on mount 0 failed";
      return;
    }
    ok_ = true;
  }
  ~TailedFile() {
    reader_.Reset();
    writer_.Reset();
    cluster_.reset();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  bool ok() const { return ok_; }
  // Why not ok().
  const std::string& error() const { return error_; }
  MountedCluster& cluster() { return *cluster_; }
  int reader() const { return reader_.get(); }
  static std::string first() { return Pattern(kFirst, 1); }
  static std::string more() { return Pattern(kMore, 2); }
  // Calls meta has answered for an inode (get_inode), -1 if the scrape fails.
  double GetInodeCalls() const {
    return MetricSample(ScrapeMetrics(port_),
                        "logfs_meta_call_duration_seconds_count{op=\"get_inode\"}");
  }
  // mount 1's pread of the kMore appended bytes: what came back.
  std::string ReadMore() const {
    std::string got(kMore, '\0');
    const ssize_t n = pread(reader_.get(), got.data(), got.size(), kFirst);
    return n < 0 ? absl::StrCat("(errno ", errno, ")") : got.substr(0, n);
  }

 private:
  // Writes `data` on mount 0 and fsyncs it.
  absl::Status Append(const std::string& data) {
    if (write(writer_.get(), data.data(), data.size()) != static_cast<ssize_t>(data.size()) ||
        fsync(writer_.get()) != 0) {
      return absl::ErrnoToStatus(errno, "append on mount 0");
    }
    return absl::OkStatus();
  }

  std::string dir_;
  std::unique_ptr<MountedCluster> cluster_;
  int port_ = 0;
  util::UniqueFd writer_, reader_;
  bool ok_ = false;
  std::string error_;
};

TEST(FuseWorkersTest, ReadingNewBytesOfAFileAnotherMountWritesAsksMetaOnce) {
  // Goal: a read on mount 1 of bytes that mount 0 appended to a WAL file
  // it keeps open asks meta for the file's inode once. Before, the FUSE
  // worker asked meta for the live length, found the new bytes in an open
  // segment (which only a segment server serves), handed the read to the
  // waiting pool, and the pool asked meta again.
  // Method: meta's count of get_inode calls is read before and after mount
  // 1's pread of the appended bytes, which must come back whole. Mount 1's
  // handle is direct I/O (the file is open for write), so the kernel sends
  // no getattr with the read; mount 0 never asks meta for its own file.
  TailedFile tailed({});
  ASSERT_TRUE(tailed.ok()) << tailed.error();
  const double before = tailed.GetInodeCalls();
  EXPECT_EQ(TailedFile::more(), tailed.ReadMore());
  const double after = tailed.GetInodeCalls();
  EXPECT_GE(before, 1);
  EXPECT_EQ(1, after - before) << "get_inode calls for one read";
}

// With every segment server of `tailed`'s cluster stopped by PID, runs
// each of `calls` on mount 1 on a thread of its own; each must ask meta
// for the file's inode and then its open segment's replicas. Meta's
// get_inode count is polled until every call has asked; a stat and a
// listing on mount 1 (meta only) must answer within a second meanwhile,
// on a thread of their own so that a mount that parks its FUSE workers
// fails the test instead of hanging it. Then the servers are resumed and
// each call's result returned, in order.
std::vector<std::string> RunWithServersStalled(
    TailedFile& tailed, const std::vector<std::function<std::string()>>& calls) {
  MountedCluster& c = tailed.cluster();
  const double before = tailed.GetInodeCalls();
  EXPECT_GE(before, 1);
  const double asked = before + static_cast<double>(calls.size());
  StalledServers stalled(c.cluster());
  EXPECT_TRUE(stalled.Stall());
  std::vector<std::string> results(calls.size(), "(no reply)");
  CallerThreads callers(c, 1);
  for (size_t i = 0; i < calls.size(); ++i) {
    callers.Start([&, i] { results[i] = calls[i](); });
  }
  struct Probe {
    double get_inodes = 0;
    MetaOnlyCalls calls;
  };
  auto probe = std::make_shared<Probe>();
  auto probed = std::make_shared<absl::Notification>();
  CallerThreads prober(c, 1);
  prober.Start([&c, &tailed, asked, probe, probed] {
    for (int poll = 0; poll < 500; ++poll) {
      probe->get_inodes = tailed.GetInodeCalls();
      if (probe->get_inodes >= asked) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    probe->calls = TimeMetaOnlyCalls(c.Path("never-there", 1), c.mountpoint(1));
    probed->Notify();
  });
  const bool answered = probed->WaitForNotificationWithTimeout(absl::Seconds(20));
  EXPECT_TRUE(answered) << "stat and ls did not answer while calls waited for the servers";
  EXPECT_EQ(0, callers.ended()) << "the servers were stalled all along";
  if (answered) {
    EXPECT_GE(probe->get_inodes, asked) << "not every call reached the waiting pool";
    ExpectAnsweredAtOnce(probe->calls, 1);  // wal
  }
  stalled.Resume();
  EXPECT_TRUE(prober.JoinWithin(kRepliesAfterResume)) << "stat or ls never answered";
  EXPECT_TRUE(callers.JoinWithin(kRepliesAfterResume)) << "a call never answered";
  return results;
}

TEST(FuseWorkersTest, ReadsOfALiveFileDoNotWaitBehindOneOnAStalledReplica) {
  // Goal: with every segment server stopped, 8 reads of one handle on
  // mount 1 (twice its 4 FUSE workers), each needing the open segment's
  // acked length from the replicas, are all handed to the waiting pool,
  // and stat and ls on mount 1 answer within a second meanwhile. Before,
  // the first read's pool job held the handle's lock while it waited for
  // the replicas, and every other read waited for that lock on a worker.
  // Method: RunWithServersStalled; then every read checked.
  TailedFile tailed({absl::StrCat("--fuse_threads=", kFuseWorkers), "--rpc_timeout_ms=60000",
                     "--replica_timeout_ms=60000", "--fsync_timeout_ms=60000"});
  ASSERT_TRUE(tailed.ok()) << tailed.error();
  std::vector<std::function<std::string()>> reads(2 * kFuseWorkers,
                                                  [&tailed] { return tailed.ReadMore(); });
  std::vector<std::string> results = RunWithServersStalled(tailed, reads);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(TailedFile::more(), results[i]) << "read " << i;
  }
}

TEST(FuseWorkersTest, StatsOfALiveFileDoNotParkWorkersOnAStalledReplica) {
  // Goal: getattr, setattr and getxattr user.logfs.durable_length on mount
  // 1 of a file mount 0 writes take its size from the open segment's
  // replicas; with every segment server stopped, 9 of them (more than
  // twice mount 1's 4 FUSE workers) wait on the waiting pool, and stat and
  // ls answer within a second meanwhile. Before, each parked a FUSE
  // worker until the replicas answered, and stat and ls waited behind
  // them.
  // Method: RunWithServersStalled with 4 fstat, 4 fgetxattr and 1
  // futimens of mount 1's handle (no path, so no lookup stands in for
  // them; the handle's attribute timeout is 0, so every fstat asks the
  // mount; the kernel holds the inode lock through a setattr, so a second
  // futimens would wait in the kernel, not in the mount); then every
  // result checked: the size mount 0 fsynced, and 0 from futimens.
  TailedFile tailed({absl::StrCat("--fuse_threads=", kFuseWorkers), "--rpc_timeout_ms=60000",
                     "--replica_timeout_ms=60000", "--fsync_timeout_ms=60000"});
  ASSERT_TRUE(tailed.ok()) << tailed.error();
  const int fd = tailed.reader();
  auto failed = [](const char* call) { return absl::StrCat(call, " errno ", errno); };
  std::vector<std::function<std::string()>> calls;
  for (int i = 0; i < kFuseWorkers; ++i) {
    calls.push_back([fd, failed] {
      struct stat st;
      return fstat(fd, &st) == 0 ? std::to_string(st.st_size) : failed("fstat");
    });
    calls.push_back([fd, failed] {
      char value[32];
      const ssize_t n = fgetxattr(fd, "user.logfs.durable_length", value, sizeof(value));
      return n >= 0 ? std::string(value, n) : failed("fgetxattr");
    });
  }
  calls.push_back([fd, failed] {
    const timespec times[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    return futimens(fd, times) == 0 ? "0" : failed("futimens");
  });
  std::vector<std::string> results = RunWithServersStalled(tailed, calls);
  const std::string size = std::to_string(TailedFile::kFirst + TailedFile::kMore);
  for (size_t i = 0; i + 1 < results.size(); ++i) EXPECT_EQ(size, results[i]) << "call " << i;
  EXPECT_EQ("0", results.back()) << "futimens";
}

TEST(FuseWorkersTest, ASignalledMountRepliesToTheRequestsItHoldsBeforeItUnmounts) {
  // Goal: SIGTERM to a mount whose waiting pool holds a read (its replica
  // stalled) ends the FUSE session, and the mount still answers that read
  // with the right bytes once the replica is back, then unmounts and exits.
  // Before, the session was unmounted and freed at once: the read failed
  // (ENOTCONN), and the pool's late reply wrote through the freed session.
  // Method: short-circuit reads off and caches dropped, so the read goes
  // over TCP to the pool; the servers stopped by PID; the mount's
  // remote_reads counter polled until the read is in the pool; SIGTERM;
  // the daemon's log polled for the end of the session; the servers
  // resumed; the read checked; the daemon's exit polled by PID.
  MountedClusterOptions options;
  options.mount_flags = {absl::StrCat("--fuse_threads=", kFuseWorkers), "--noshort_circuit",
                         "--rpc_timeout_ms=60000", "--replica_timeout_ms=60000",
                         "--fsync_timeout_ms=60000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  ASSERT_TRUE(WriteFile(c.Path("sealed"), Pattern(kFileBytes, 7)).ok());
  ASSERT_EQ(0, RunCommand("sync; echo 3 >/proc/sys/vm/drop_caches").exit_code);
  ASSERT_EQ(0, setxattr(c.mountpoint().c_str(), "user.logfs.drop_block_cache", "1", 1, 0));
  const uint64_t remote_reads = MountStats(c.mountpoint())["remote_reads"];
  const pid_t mount_pid = c.MountPid();
  ASSERT_GT(mount_pid, 0);

  StalledServers stalled(c.cluster());
  ASSERT_TRUE(stalled.Stall());
  std::string read_result = "(not read)";
  CallerThreads reader(c, 0);
  reader.Start([&c, &read_result] {
    const int fd = open(c.Path("sealed").c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) {
      read_result = absl::StrCat("(open errno ", errno, ")");
      return;
    }
    std::unique_ptr<char, decltype(&std::free)> buf(
        static_cast<char*>(std::aligned_alloc(4096, kFileBytes)), &std::free);
    const ssize_t n = pread(fd, buf.get(), kFileBytes, 0);
    read_result = n >= 0 ? std::string(buf.get(), n) : absl::StrCat("(errno ", errno, ")");
    close(fd);
  });
  bool in_pool = false;
  for (int poll = 0; poll < 500 && !in_pool; ++poll) {
    in_pool = MountStats(c.mountpoint())["remote_reads"] > remote_reads;
    if (!in_pool) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(in_pool) << "the read never reached the mount";
  ASSERT_EQ(0, kill(mount_pid, SIGTERM));
  const std::string log_path = c.root() + "/mount0.daemon.log";
  bool ended = false;
  for (int poll = 0; poll < 500 && !ended; ++poll) {
    auto log = ReadFile(log_path);
    ended = log.ok() && log->find("FUSE session ended") != std::string::npos;
    if (!ended) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(ended) << "the session did not end on SIGTERM";
  stalled.Resume();
  EXPECT_TRUE(reader.JoinWithin(kRepliesAfterResume)) << "the held read never answered";
  EXPECT_TRUE(read_result == Pattern(kFileBytes, 7))
      << "the held read got " << read_result.substr(0, 40);
  bool exited = false;
  for (int poll = 0; poll < 1000 && !exited; ++poll) {
    exited = kill(mount_pid, 0) != 0 && errno == ESRCH;
    if (!exited) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_TRUE(exited) << "the mount did not exit after its last reply";
  auto log = ReadFile(log_path);
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_NE(std::string::npos, log->find("unmounted " + c.mountpoint())) << *log;
}

}  // namespace
}  // namespace logfs::testing
