// Helpers of the tests that stall segment servers and make calls that may
// hang: every segment server stopped by PID (StalledServers), and caller
// threads joined with a deadline past which the mount's daemon is killed
// (CallerThreads), so that a call whose reply is lost fails its test
// instead of hanging the run (tests/run_tests.sh has no per-test timeout).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "src/cluster/local_cluster.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {

// Every segment server of `cluster` stopped (SIGSTOP, polled until every
// thread is stopped) until Resume or destruction.
class StalledServers {
 public:
  explicit StalledServers(cluster::LocalCluster& cluster) : cluster_(cluster) {}
  ~StalledServers() { Resume(); }
  // False if a server did not stop within 5 s.
  bool Stall();
  void Resume();

 private:
  cluster::LocalCluster& cluster_;
  std::vector<pid_t> stopped_;
};

// Threads that make calls on mount `mount` of `c`, joined with a deadline.
// Past the deadline the mount's daemon is killed: that aborts its FUSE
// connection, so calls still waiting in the kernel return (ECONNABORTED)
// and their threads can be joined. Not thread-safe: one test thread
// starts and joins.
class CallerThreads {
 public:
  CallerThreads(MountedCluster& c, int mount) : cluster_(c), mount_(mount) {}
  ~CallerThreads() { JoinWithin(absl::Seconds(30)); }

  // Runs `body` on a thread of its own; it counts as ended when it returns.
  void Start(std::function<void()> body);
  // How many bodies have returned.
  int ended() const { return ended_.load(); }
  // Joins every thread started. False (and the mount killed) if they had
  // not all ended within `deadline`.
  bool JoinWithin(absl::Duration deadline);

 private:
  MountedCluster& cluster_;
  const int mount_;
  std::vector<std::thread> threads_;
  std::atomic<int> ended_{0};
};

}  // namespace logfs::testing
