// Replica reports through real processes (issue 11 item 7): a segment
// server tells meta which replicas it actually holds, and meta reconciles
// both ways. A server restarted under its identity on an empty disk gets
// its replicas copied back; a replica no file lists is deleted after the
// grace period; a second live process claiming a server's id is refused.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "store/client/segd_client.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/io_threads.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr absl::Duration kPollInterval = absl::Milliseconds(100);
constexpr int kDeadServerMs = 2000;

CommandResult Admin(MountedCluster& mc, const std::string& subcommand) {
  return RunCommand(absl::StrCat(LogfsBinary(), " ", subcommand, " --meta=",
                                 mc.cluster().meta_address(), " --rpc_timeout_ms=2000"));
}

std::string SegdDir(MountedCluster& mc, int i) { return absl::StrCat(mc.root(), "/data/segd", i); }

uint64_t ServerId(MountedCluster& mc, int i) {
  // "SERVER_ID CLUSTER_ID\n".
  auto text = ReadFile(SegdDir(mc, i) + "/server_id");
  uint64_t id = 0;
  if (!text.ok()) return 0;
  std::vector<std::string> fields = absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (fields.empty() || !absl::SimpleAtoi(fields[0], &id)) return 0;
  return id;
}

// Names of the replica data files (<id>.seg) in segment server i's dir.
std::vector<std::string> ReplicaFiles(MountedCluster& mc, int i) {
  std::vector<std::string> names;
  DIR* dir = opendir((SegdDir(mc, i) + "/segments").c_str());
  if (dir == nullptr) return names;
  while (struct dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".seg") == 0) names.push_back(name);
  }
  closedir(dir);
  return names;
}

// A blocking client of one segment server, for making replicas that no
// file lists.
class StrayMaker {
 public:
  explicit StrayMaker(const std::string& address) : address_(address) {}
  ~StrayMaker() { pool_.ShutdownAll(); }
  absl::Status Create(uint64_t segment_id) {
    return segd_.CreateSegment(address_, segment_id, 1, absl::Seconds(5)).status();
  }
  absl::Status Seal(uint64_t segment_id) {
    proto::SealRequest request;
    request.set_segment_id(segment_id);
    request.set_epoch(1);
    request.set_length(0);
    return segd_.Seal(address_, request, absl::Seconds(5)).status();
  }

 private:
  const std::string address_;
  rpc::IoThreads io_{1};
  rpc::ClientPool pool_{io_.io()};
  client::SegdClient segd_{pool_};
};

TEST(ReplicaReportTest, WipedServerRestartedUnderItsIdGetsItsReplicasBack) {
  // Goal: a segment server that comes back under its identity with an
  // empty disk is noticed, and its replicas are copied back within
  // --dead_server_ms plus copy time. Method: (a) 3 servers, 4 block files
  // of 3 segments (every segment has a replica on each server), fsck
  // clean; (b) kill segd 0, wipe its data dir, restart it with
  // --server_id of its old id; (c) poll fsck until clean (before the fix
  // it stayed at "2 of 3" forever: meta believed the server still held
  // its replicas); (d) segd 0 holds all 12 replicas again; (e) with the
  // two other servers killed, every byte reads back from segd 0 alone.
  MountedClusterOptions options;
  options.meta_flags = {absl::StrCat("--dead_server_ms=", kDeadServerMs)};
  options.segd_flags = {"--heartbeat_interval_ms=200"};
  options.mount_flags = {"--block_segment_bytes=262144", "--replica_timeout_ms=3000"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  // (a)
  std::vector<std::string> contents;
  for (int i = 0; i < 4; ++i) {
    contents.push_back(Pattern(600000 + i * 1000, 40 + i));
    ASSERT_TRUE(WriteFile(c.Path(absl::StrCat("f", i)), contents.back()).ok());
  }
  CommandResult clean = Admin(c, "fsck");
  ASSERT_EQ(0, clean.exit_code) << clean.output;
  ASSERT_EQ(12u, ReplicaFiles(c, 0).size());
  const uint64_t id = ServerId(c, 0);
  ASSERT_NE(0u, id);
  // (b)
  c.cluster().KillSegd(0, SIGKILL);
  ASSERT_EQ(0, RunCommand("rm -rf " + SegdDir(c, 0)).exit_code);
  const absl::Time restarted = absl::Now();
  ASSERT_TRUE(c.cluster().RestartSegd(0, {absl::StrCat("--server_id=", id)}).ok());
  EXPECT_EQ(id, ServerId(c, 0));
  // (c)
  CommandResult last;
  bool saw_failure = false;
  const absl::Time deadline = restarted + absl::Milliseconds(kDeadServerMs) + absl::Seconds(15);
  while (absl::Now() < deadline) {
    last = Admin(c, "fsck");
    if (last.exit_code == 0) break;
    saw_failure = true;
    absl::SleepFor(kPollInterval);
  }
  ASSERT_EQ(0, last.exit_code) << "not repaired " << absl::Now() - restarted
                               << " after the restart:\n"
                               << last.output;
  EXPECT_TRUE(saw_failure) << "fsck never saw the lost replicas";
  EXPECT_NE(std::string::npos, last.output.find("0 problems")) << last.output;
  // (d) Each segment is back on segd 0 (3 servers, RF 3: nowhere else).
  EXPECT_EQ(12u, ReplicaFiles(c, 0).size());
  CommandResult status = Admin(c, "status");
  EXPECT_NE(std::string::npos, status.output.find("servers: 3 (3 live, 0 dead)")) << status.output;
  // (e) Read through a fresh mount (no page or block cache) from segd 0.
  c.cluster().KillSegd(1, SIGKILL);
  c.cluster().KillSegd(2, SIGKILL);
  ASSERT_TRUE(c.Remount().ok());
  for (int i = 0; i < 4; ++i) {
    auto back = ReadFile(c.Path(absl::StrCat("f", i)));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(contents[i], *back) << "file " << i;
  }
}

TEST(ReplicaReportTest, ReplicaNoFileListsIsDeletedAfterTheGracePeriod) {
  // Goal: replicas meta does not know (a failed create, a deleted file's
  // replica whose deletion was lost) do not stay forever, and nothing
  // else is deleted. Method: (a) write a file; (b) create two replicas no
  // file lists on segd 1, one open and one sealed; (c) poll until both are
  // gone, not before the 1 s grace; (d) the file's replicas are all still
  // there, fsck is clean and the file reads back.
  MountedClusterOptions options;
  options.meta_flags = {absl::StrCat("--dead_server_ms=", kDeadServerMs),
                        "--replica_report_interval_ms=300", "--stray_replica_grace_ms=1000"};
  options.segd_flags = {"--heartbeat_interval_ms=100"};
  options.mount_flags = {"--block_segment_bytes=262144"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  // (a)
  const std::string data = Pattern(600000, 7);
  ASSERT_TRUE(WriteFile(c.Path("f"), data).ok());
  const std::vector<std::string> legit = ReplicaFiles(c, 1);
  ASSERT_EQ(3u, legit.size());
  // (b)
  constexpr uint64_t kOpenStray = 900000001;
  constexpr uint64_t kSealedStray = 900000002;
  const absl::Time created = absl::Now();
  {
    StrayMaker segd(c.cluster().segd_address(1));
    ASSERT_TRUE(segd.Create(kOpenStray).ok());
    ASSERT_TRUE(segd.Create(kSealedStray).ok());
    ASSERT_TRUE(segd.Seal(kSealedStray).ok());
  }
  ASSERT_EQ(5u, ReplicaFiles(c, 1).size());
  // (c)
  const absl::Time deadline = created + absl::Seconds(15);
  while (absl::Now() < deadline && ReplicaFiles(c, 1).size() > 3) absl::SleepFor(kPollInterval);
  const absl::Duration took = absl::Now() - created;
  // (d)
  std::vector<std::string> left = ReplicaFiles(c, 1);
  std::sort(left.begin(), left.end());
  std::vector<std::string> expected = legit;
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(expected, left) << "after " << took;
  EXPECT_GE(took, absl::Seconds(1)) << "deleted before the grace period";
  CommandResult fsck = Admin(c, "fsck");
  EXPECT_EQ(0, fsck.exit_code) << fsck.output;
  ASSERT_TRUE(c.Remount().ok());
  auto back = ReadFile(c.Path("f"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(data, *back);
}

TEST(ReplicaReportTest, SecondLiveServerWithTheSameIdIsRefused) {
  // Goal: two processes claiming one server id are refused with a clear
  // message, and the first keeps serving. Method: (a) start a segd with
  // a fresh data dir and --server_id of live segd 0; it must exit 1 and
  // say who holds the id; (b) the same for a copy of segd 0's data dir;
  // (c) segd 0 is still live and files can be written.
  MountedClusterOptions options;
  options.segd_flags = {"--heartbeat_interval_ms=200"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  const uint64_t id = ServerId(c, 0);
  ASSERT_NE(0u, id);
  const std::string segd = absl::StrCat("timeout 20 ", LogfsBinary(), " segd --listen=127.0.0.1:0",
                                        " --meta=", c.cluster().meta_address());
  // (a)
  CommandResult fresh =
      RunCommand(absl::StrCat(segd, " --data_dir=", c.root(), "/dup1", " --server_id=", id));
  EXPECT_EQ(1, fresh.exit_code) << fresh.output;
  EXPECT_NE(std::string::npos, fresh.output.find(absl::StrCat(
                                   "server id ", id, " is held by a live segment server at ",
                                   c.cluster().segd_address(0))))
      << fresh.output;
  // (b)
  ASSERT_EQ(0, RunCommand(absl::StrCat("mkdir -p ", c.root(), "/dup2 && cp ", SegdDir(c, 0),
                                       "/server_id ", c.root(), "/dup2/"))
                   .exit_code);
  CommandResult copied = RunCommand(absl::StrCat(segd, " --data_dir=", c.root(), "/dup2"));
  EXPECT_EQ(1, copied.exit_code) << copied.output;
  EXPECT_NE(std::string::npos, copied.output.find("is held by a live segment server"))
      << copied.output;
  // (c)
  CommandResult status = Admin(c, "status");
  EXPECT_NE(std::string::npos, status.output.find("servers: 3 (3 live, 0 dead)")) << status.output;
  EXPECT_NE(std::string::npos, status.output.find(c.cluster().segd_address(0))) << status.output;
  ASSERT_TRUE(WriteFile(c.Path("f"), Pattern(300000, 3)).ok());
  EXPECT_EQ(Pattern(300000, 3), *ReadFile(c.Path("f")));
}

TEST(ReplicaReportTest, AServerOfAnotherClusterIsRefusedAndKeepsItsReplicas) {
  // Goal: a meta that lost its database (a new cluster id) must not take
  // in the old servers, whose every replica it would delete as a stray
  // after the grace. Method: (a) write a file; (b) kill meta, remove its
  // data dir, start it again; (c) restart segd 0 against it: refused with
  // a clear message, its replica files untouched.
  MountedClusterOptions options;
  options.segd_flags = {"--heartbeat_interval_ms=200"};
  options.meta_flags = {"--stray_replica_grace_ms=0"};
  auto mc = MountedCluster::Start(options);
  ASSERT_TRUE(mc.ok()) << mc.status();
  MountedCluster& c = **mc;
  // (a)
  ASSERT_TRUE(WriteFile(c.Path("f"), Pattern(300000, 4)).ok());
  const std::string segments = SegdDir(c, 0) + "/segments";
  const std::string before = RunCommand("ls " + segments).output;
  ASSERT_FALSE(before.empty());
  // (b)
  c.cluster().KillMeta(SIGKILL);
  ASSERT_EQ(0, RunCommand("rm -rf " + c.root() + "/data/meta").exit_code);
  ASSERT_TRUE(c.cluster().RestartMeta().ok());
  // (c)
  absl::Status restarted = c.cluster().RestartSegd(0);
  EXPECT_FALSE(restarted.ok());
  EXPECT_NE(std::string::npos, restarted.ToString().find("belongs to cluster")) << restarted;
  EXPECT_EQ(before, RunCommand("ls " + segments).output);
}

}  // namespace
}  // namespace logfs::testing
