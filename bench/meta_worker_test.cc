#include "bench/meta_worker.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "src/status/posix_error.h"

namespace logfs::bench {
namespace {

// Directories of names in memory, keyed by path. `hidden` names exist but
// are left out of listings (a lost directory entry).
class MemNamespaceOps : public NamespaceOps {
 public:
  NamespaceDir Root() const override { return {"/mem", 0}; }
  std::string Describe() const override { return "mem"; }
  bool ForkSafe() const override { return false; }
  absl::StatusOr<NamespaceDir> MakeDir(const NamespaceDir& parent,
                                       const std::string& name) override {
    absl::MutexLock lock(&mu_);
    const std::string path = parent.path + "/" + name;
    dirs_[path];
    return NamespaceDir{path, 0};
  }
  absl::Status RemoveDir(const NamespaceDir& parent, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    dirs_.erase(parent.path + "/" + name);
    return absl::OkStatus();
  }
  absl::Status CreateFile(const NamespaceDir& dir, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    if (!dirs_[dir.path].insert(name).second) return PosixError(EEXIST, "create " + name);
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> StatMode(const NamespaceDir& dir, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    if (dirs_[dir.path].count(name) == 0) return PosixError(ENOENT, "stat " + name);
    return S_IFREG | 0644;
  }
  absl::StatusOr<std::vector<std::string>> ListNames(const NamespaceDir& dir) override {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    for (const std::string& name : dirs_[dir.path]) {
      if (hidden_.count(name) == 0) names.push_back(name);
    }
    return names;
  }
  absl::Status Rename(const NamespaceDir& dir, const std::string& from,
                      const std::string& to) override {
    absl::MutexLock lock(&mu_);
    auto& names = dirs_[dir.path];
    if (names.erase(from) == 0) return PosixError(ENOENT, "rename " + from);
    names.insert(to);
    return absl::OkStatus();
  }
  absl::Status Unlink(const NamespaceDir& dir, const std::string& name) override {
    absl::MutexLock lock(&mu_);
    if (dirs_[dir.path].erase(name) == 0) return PosixError(ENOENT, "unlink " + name);
    return absl::OkStatus();
  }

  void Hide(const std::string& name) {
    absl::MutexLock lock(&mu_);
    hidden_.insert(name);
  }
  size_t Count(const std::string& path) {
    absl::MutexLock lock(&mu_);
    return dirs_[path].size();
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, std::set<std::string>> dirs_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> hidden_ ABSL_GUARDED_BY(mu_);
};

MetaWorkerPlan Plan(int worker, int workers, int files, bool shared) {
  MetaWorkerPlan plan;
  plan.worker = worker;
  plan.workers = workers;
  plan.files = files;
  plan.dir = {shared ? "/mem/shared" : "/mem/w" + std::to_string(worker), 0};
  plan.shared_dir = shared;
  return plan;
}

TEST(MetaWorkerTest, EveryPhaseCountsItsOpsAndLeavesNothing) {
  MemNamespaceOps ops;
  const MetaWorkerPlan plan = Plan(2, 3, 5, false);
  for (MetaPhase phase : kMetaPhases) {
    WorkerReport report = RunMetaPhase(ops, plan, phase);
    ASSERT_TRUE(report.error.ok()) << MetaPhaseName(phase) << ": " << report.error;
    EXPECT_EQ(5u, report.ops) << MetaPhaseName(phase);
    // One sample per call; readdir's one call is a whole listing.
    EXPECT_EQ(phase == MetaPhase::kReaddir ? 1u : 5u, report.latency_ns.size());
    EXPECT_LE(report.start_ns, report.end_ns);
  }
  EXPECT_EQ(0u, ops.Count("/mem/w2"));
}

TEST(MetaWorkerTest, SharedDirectoryListingExpectsEveryWorkersNames) {
  // Goal: in a shared directory each worker's readdir counts and checks
  // all workers' files, and fails while another worker's are missing.
  MemNamespaceOps ops;
  ASSERT_TRUE(RunMetaPhase(ops, Plan(0, 2, 4, true), MetaPhase::kCreate).error.ok());
  WorkerReport early = RunMetaPhase(ops, Plan(0, 2, 4, true), MetaPhase::kReaddir);
  EXPECT_EQ(absl::StatusCode::kDataLoss, early.error.code());
  EXPECT_NE(std::string::npos,
            early.error.message().find("listed 4 names, want 8; 4 missing, such as f.1.0"))
      << early.error;
  ASSERT_TRUE(RunMetaPhase(ops, Plan(1, 2, 4, true), MetaPhase::kCreate).error.ok());
  WorkerReport all = RunMetaPhase(ops, Plan(1, 2, 4, true), MetaPhase::kReaddir);
  ASSERT_TRUE(all.error.ok()) << all.error;
  EXPECT_EQ(8u, all.ops);
}

TEST(MetaWorkerTest, ListingThatLostANameFailsNamingIt) {
  MemNamespaceOps ops;
  const MetaWorkerPlan plan = Plan(0, 1, 3, false);
  ASSERT_TRUE(RunMetaPhase(ops, plan, MetaPhase::kCreate).error.ok());
  ops.Hide("f.0.1");
  WorkerReport report = RunMetaPhase(ops, plan, MetaPhase::kReaddir);
  EXPECT_EQ(absl::StatusCode::kDataLoss, report.error.code());
  EXPECT_EQ("worker 0, readdir: readdir /mem/w0: listed 2 names, want 3; 1 missing, such as f.0.1",
            report.error.message());
}

TEST(MetaWorkerTest, FailedCallStopsThePhaseAndNamesItsErrno) {
  // Goal: the error says which worker, phase and call failed and with
  // which errno; the ops before it are counted.
  MemNamespaceOps ops;
  const MetaWorkerPlan plan = Plan(1, 2, 3, false);
  ASSERT_TRUE(ops.CreateFile(plan.dir, MetaFileName(1, 2)).ok());
  WorkerReport report = RunMetaPhase(ops, plan, MetaPhase::kCreate);
  EXPECT_EQ(absl::StatusCode::kAlreadyExists, report.error.code());
  EXPECT_EQ("worker 1, create: create f.1.2 (errno 17, EEXIST)", report.error.message());
  EXPECT_EQ(2u, report.ops);
}

TEST(MetaWorkerTest, ServesPhasesOverASocketUntilQuit) {
  MemNamespaceOps ops;
  int fds[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
  absl::Status served;
  std::thread worker([&] { served = ServeMetaWorker(ops, Plan(0, 1, 7, false), fds[1]); });
  ASSERT_TRUE(SendMetaWorkerCommand(fds[0], static_cast<uint8_t>(MetaPhase::kCreate)).ok());
  auto report = ReceiveWorkerReport(fds[0]);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(7u, report->ops);
  ASSERT_TRUE(SendMetaWorkerCommand(fds[0], kMetaWorkerQuit).ok());
  worker.join();
  EXPECT_TRUE(served.ok()) << served;
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace logfs::bench
