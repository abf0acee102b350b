// Integration-test harness: a real cluster (meta + N segd processes on
// loopback, src/cluster/local_cluster.h) and real FUSE mounts of it in a
// temp dir. Everything is torn down by the destructor — mounts unmounted
// (lazily if they are stuck), processes stopped by PID, temp dir removed —
// so a failing test never leaves a mount behind.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/cluster/local_cluster.h"

namespace logfs::testing {

struct MountedClusterOptions {
  int segment_servers = 3;
  std::vector<std::string> meta_flags;
  std::vector<std::string> segd_flags;
  std::vector<std::string> mount_flags;  // e.g. "--wal_segment_bytes=65536"
  int mounts = 1;
  // These segment servers keep their data on tmpfs mounts of their own (as
  // big as the free space under /tmp, so placement treats them like the
  // others), which FillDisk() can make full. Unmounted by the destructor.
  std::vector<int> tmpfs_segds;
  // Where the cluster keeps its state: "" = <root>/data. Any other dir is
  // the caller's to remove, and holds nothing but the servers' state (as
  // with servers run by hand): their logs and address files go to
  // <root>/run.
  std::string data_dir;
  // Where meta, each segment server and each mount run (multi-host tests,
  // tests/multi_host_cluster.h): a network namespace each, with its
  // address and flags. Empty = all here on loopback. A mount host's
  // address is unused.
  cluster::ServerHost meta_host;
  std::vector<cluster::ServerHost> segd_hosts;   // one per segment server, or empty
  std::vector<cluster::ServerHost> mount_hosts;  // one per mount, or empty
  // Every server and mount runs with --cluster_secret_file, a secret the
  // cluster makes in its data dir (README "Authentication").
  bool authenticate = false;
  // Nonempty: `meta_replicas` replicas of an elected meta on these etcd
  // members (docs/meta_ha.md); mounting waits until one is active.
  std::vector<std::string> etcd_endpoints;
  int meta_replicas = 3;
  std::vector<std::vector<std::string>> meta_replica_flags;  // LocalClusterOptions'
  // The logfs binary every process runs at start; "" = LogfsBinary().
  std::string binary;
  // LocalClusterOptions' (servers and mounts close inherited descriptors).
  bool close_inherited_fds = false;
};

class MountedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<MountedCluster>> Start(MountedClusterOptions options);
  ~MountedCluster();

  // Path of `relative` under mount `i`.
  std::string Path(const std::string& relative, int i = 0) const;
  const std::string& mountpoint(int i = 0) const { return mountpoints_[i]; }
  const std::string& root() const { return root_; }
  cluster::LocalCluster& cluster() { return *cluster_; }

  // Unmounts every mount (waiting for their daemons), then mounts again.
  absl::Status Remount();
  absl::Status UnmountAll();
  absl::Status MountAll();
  // Unmounts mount `i` (waiting out a mount busy with a RELEASE still
  // being answered, up to 30 s), then mounts it again: one mount's upgrade.
  absl::Status RemountOne(int i);
  // `logfs mount --takeover` of mount `i` with the flags it was mounted
  // with: a new daemon serves it, without an unmount (docs/OPERATIONS.md
  // "Restarting a mount"). Returns once the new daemon serves.
  absl::Status TakeOver(int i);
  // Stops every process and starts the whole cluster again on the same state.
  absl::Status RestartCluster();

  // The logfs binary that later mounts (MountAll, Remount) run: a rolling
  // upgrade (the servers' is cluster().set_binary). Starts as
  // MountedClusterOptions::binary.
  void set_mount_binary(std::string binary) { mount_binary_ = std::move(binary); }

  // PID of the daemon serving mount `i`.
  pid_t MountPid(int i = 0) const;

  // Shrinks the tmpfs of segment server `segd` (one of tmpfs_segds) to
  // what it holds now plus `spare_bytes`: its disk is full from then on.
  absl::Status FillDisk(int segd, uint64_t spare_bytes);

  // kill -9 the daemon of mount `i` and detach its (now dead) mount; a
  // later MountAll() mounts it again.
  void KillMount(int i = 0);

 private:
  MountedCluster() = default;
  absl::Status MountOne(int i);
  // `logfs mount` of mount `i` as MountOne runs it (flags, then the mount point).
  std::vector<std::string> MountArgv(int i) const;
  absl::Status RunMount(int i, std::vector<std::string> argv, bool close_inherited_fds);
  // Unmounts mount `i`, retrying while it is busy for up to `busy_wait`;
  // then (or on any other failure) detaches it lazily.
  absl::Status UnmountOne(int i, absl::Duration busy_wait);
  cluster::LocalClusterOptions ClusterOptions() const;

  MountedClusterOptions options_;
  std::string root_;
  std::unique_ptr<cluster::LocalCluster> cluster_;
  std::vector<std::string> mountpoints_;
  std::vector<bool> mounted_;
  std::string mount_binary_;
  std::string TmpfsDir(int segd) const;
  std::vector<std::string> tmpfs_dirs_;  // mounted, unmounted by the destructor
};

// A test suite whose tests share one MountedCluster of `kMounts` mounts
// (default options otherwise), started before the suite's first test and
// torn down after its last: for suites of many short tests on disjoint
// directories. A suite that failed to start fails each test at SetUp.
template <int kMounts>
class SharedClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    MountedClusterOptions options;
    options.mounts = kMounts;
    auto mc = MountedCluster::Start(options);
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = mc->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(nullptr, cluster_); }

  static MountedCluster* cluster_;
};
template <int kMounts>
MountedCluster* SharedClusterTest<kMounts>::cluster_ = nullptr;

// Makes <mount 0>/wal a directory of WAL files (user.logfs.kind=wal).
void MakeWalDir(MountedCluster& c);

// Sends SIGSTOP to `pid` and polls until every thread of it is stopped
// (kill returns before threads running elsewhere have stopped, and such a
// thread may still answer a request). False if not within 5 s.
bool StopProcess(pid_t pid);

// The mount's counters (user.logfs.stats of `path`, any path on it) by
// name; empty if the xattr cannot be read.
std::map<std::string, uint64_t> MountStats(const std::string& path);

// The value of xattr `name` of `path`; "" if it cannot be read.
std::string Xattr(const std::string& path, const char* name);

// One line of a file's user.logfs.segments ("<id> <addr>,... <length>
// sealed|open"): its replicas' advertised addresses.
struct SegmentLine {
  std::string id;
  std::vector<std::string> replicas;
  uint64_t length = 0;
  std::string state;  // "sealed" or "open"
};
std::vector<SegmentLine> Segments(const std::string& path);

// sync, then empties the kernel's page, dentry and inode caches.
void DropKernelCaches();

// The logfs binary under test ($LOGFS_BIN, else build/logfs).
std::string LogfsBinary();

// Runs a shell command; returns its exit status and its stdout+stderr.
struct CommandResult {
  int exit_code = -1;
  std::string output;
};
CommandResult RunCommand(const std::string& command);

// `n` pseudo-random bytes (xorshift32), the same for the same `seed`.
std::string Pattern(size_t n, int seed);

// Whole-file helpers that report errno.
absl::StatusOr<std::string> ReadFile(const std::string& path);
absl::Status WriteFile(const std::string& path, const std::string& data, int flags = 0);

}  // namespace logfs::testing
