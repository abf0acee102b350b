// The fault-injection suite (DESIGN §3): the durability checker's writers
// append synced records to WAL files through a real mount of meta + 5
// segment servers while a real fault hits a real process; afterwards no
// acknowledged byte may be missing or damaged and no reader may have seen
// a file shrink. Each fault runs once here, briefly; tests/faults.sh runs
// them many times and prints a table.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/durability_checker.h"
#include "src/cluster/process.h"
#include "src/env/posix_file.h"
#include "store/format/frame.h"
#include "tests/fault_row.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

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
    ASSERT_TRUE(env::MakeDirs(log_dir_).ok());
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
    FaultRow row = RowOf(name, *written, *verified);
    row.seconds_to_full_replication = replicated_s;
    PrintFaultRow(row);
    if (wait_replication) {
      EXPECT_GE(replicated_s, 0) << "fsck never reported full replication";
    }
    ExpectDurable(*written, *verified);
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
    StopProcess(pid);
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
        format::EncodeFrame(0, format::MessageType::kAppend, 1, "message", "data").substr(0, 30);
    std::string oversized = format::EncodeFrame(0, format::MessageType::kLookup, 1, "", "");
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

struct FlippedByte {
  std::string file;     // the checker's file, on the mount
  std::string segment;  // id
  std::string address;  // of the segment server with the damaged replica
  std::string path;     // of the replica file
  off_t offset = 0;
  char original = 0;
};

// Whether meta lists `address` as a replica of `segment` of `file`.
bool ListsReplica(const std::string& file, const std::string& segment,
                  const std::string& address) {
  char buf[16384];
  ssize_t n = getxattr(file.c_str(), "user.logfs.segments", buf, sizeof(buf));
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(buf, n > 0 ? n : 0), '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    if (fields.size() == 4 && fields[0] == segment) {
      for (absl::string_view a : absl::StrSplit(fields[1], ',')) {
        if (a == address) return true;
      }
    }
  }
  return false;
}

// Flips one byte in the replica that readers try first of a sealed segment
// of one of the checker's files. nullopt if no segment is sealed yet.
std::optional<FlippedByte> FlipAByteInASealedReplica(MountedCluster& mc,
                                                     const std::string& wal_dir) {
  DIR* dir = opendir(wal_dir.c_str());
  if (dir == nullptr) return std::nullopt;
  std::vector<std::string> files;
  while (struct dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') files.push_back(wal_dir + "/" + e->d_name);
  }
  closedir(dir);
  for (const std::string& file : files) {
    char buf[16384];
    ssize_t n = getxattr(file.c_str(), "user.logfs.segments", buf, sizeof(buf));
    if (n <= 0) continue;
    // "<id> <addr>,<addr>,... <length> sealed|open" per line.
    for (absl::string_view line :
         absl::StrSplit(absl::string_view(buf, n), '\n', absl::SkipEmpty())) {
      std::vector<std::string> fields = absl::StrSplit(line, ' ');
      uint64_t length = 0;
      if (fields.size() != 4 || fields[3] != "sealed" || !absl::SimpleAtoi(fields[2], &length) ||
          length == 0) {
        continue;
      }
      std::string first = std::vector<std::string>(absl::StrSplit(fields[1], ','))[0];
      for (int i = 0; i < mc.cluster().segment_servers(); ++i) {
        if (mc.cluster().segd_address(i) != first) continue;
        std::string path =
            absl::StrCat(mc.root(), "/data/segd", i, "/segments/", fields[0], ".seg");
        int fd = open(path.c_str(), O_RDWR);
        if (fd < 0) continue;
        char byte = 0;
        off_t at = static_cast<off_t>(length / 2);
        bool flipped = pread(fd, &byte, 1, at) == 1 &&
                       (byte = static_cast<char>(byte ^ 0x01), pwrite(fd, &byte, 1, at) == 1);
        close(fd);
        if (flipped) {
          return FlippedByte{file, fields[0], first, path, at, static_cast<char>(byte ^ 0x01)};
        }
      }
    }
  }
  return std::nullopt;
}

TEST_F(FaultTest, FlippedByteInASealedReplica) {
  // The verifier reads every byte back through a fresh mount (no page
  // cache): the bad replica is skipped, reported and replaced, and fsck is
  // clean again once re-replication has copied a good one.
  std::optional<FlippedByte> flipped;
  RunTrial(
      "flip-byte",
      [&] {
        // Poll until a segment has rolled (the writers are running).
        const absl::Time deadline = absl::Now() + absl::Seconds(TrialSeconds());
        while (!flipped.has_value() && absl::Now() < deadline) {
          flipped = FlipAByteInASealedReplica(*cluster_, cluster_->Path("wal"));
          if (!flipped.has_value()) absl::SleepFor(absl::Milliseconds(50));
        }
        ASSERT_TRUE(flipped.has_value()) << "no sealed segment to damage";
      },
      [&] { ASSERT_TRUE(cluster_->Remount().ok()); }, /*wait_replication=*/true);
  ASSERT_TRUE(flipped.has_value());
  // The reads found the damage: meta no longer lists the damaged copy, or
  // lists a fresh one copied from a good replica. (A dropped copy stays on
  // its server's disk, never served: meta queues no deletion for it.)
  if (ListsReplica(flipped->file, flipped->segment, flipped->address)) {
    int fd = open(flipped->path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0) << flipped->path;
    char byte = 0;
    EXPECT_EQ(1, pread(fd, &byte, 1, flipped->offset));
    close(fd);
    EXPECT_EQ(flipped->original, byte) << "meta still lists the damaged " << flipped->path;
  }
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
