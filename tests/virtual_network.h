// A virtual network of "hosts" for multi-host tests: N network namespaces
// (hosts 1..N), each with loopback up and one veth interface `eth0` whose
// peer is a port of a bridge in a further "switch" namespace, so the test
// changes nothing in the machine's own network namespace. The hosts get
// addresses 10.A.B.1..N of a /24 derived from the pid (and the number of
// networks this process made) and checked unused in every namespace, so
// concurrent test processes never share one.
//
// Faults (no netfilter or tc is needed): Disconnect() takes a host's
// switch port down, which drops every packet to and from it, as a pulled
// cable; Partition() black-holes the neighbour (ARP) entries between a
// host and some peers in both directions (permanent entries with the
// all-zero MAC, which the bridge floods and every host ignores), so those
// pairs lose every packet while the rest of the network still works.
//
// Processes join a host with cluster::Spawn(..., Netns(host)) or
// `nsenter --net=` (Run(), through a CommandShell started with the
// network, so that commands run fast while files are open), which leave the mount namespace alone,
// so FUSE mounts made there are visible to the test. The destructor kills every process still in a
// host's namespace, lazily unmounts the mounts of any `logfs mount` among them and deletes the
// namespaces (the veths go with them), whatever state the test left. Create() first removes what a
// crashed earlier run (a dead pid) left under the same name prefix.
// Needs root. Not thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {

// A shell started once, early, that runs commands one at a time. A test
// process with files open on a FUSE mount should not fork: the child's
// copies of those descriptors are closed at its exec or exit, and each
// close sends the mount a flush, which on a cut-off mount waits until the
// writer gives up (seconds per command). Thread-compatible.
class CommandShell {
 public:
  CommandShell() = default;
  CommandShell(const CommandShell&) = delete;
  CommandShell& operator=(const CommandShell&) = delete;
  ~CommandShell();
  bool Start();
  // Runs `command` (stdout and stderr, stdin /dev/null) in a subshell.
  // After `timeout` the shell is killed and every later call fails
  // (exit_code -1).
  CommandResult Run(const std::string& command, absl::Duration timeout);

 private:
  pid_t pid_ = -1;
  int in_ = -1;   // its stdin
  int out_ = -1;  // its stdout and stderr
  int commands_ = 0;
};

class VirtualNetwork {
 public:
  // Makes `hosts` hosts (1..hosts, at most 200) and the switch.
  // kFailedPrecondition with the failing command's output.
  static absl::StatusOr<std::unique_ptr<VirtualNetwork>> Create(int hosts);
  ~VirtualNetwork();

  int hosts() const { return static_cast<int>(addresses_.size()); }
  // Namespace name (under /run/netns) and file of `host`, and its address.
  std::string Name(int host) const;
  std::string Netns(int host) const { return "/run/netns/" + Name(host); }
  const std::string& Address(int host) const { return addresses_[host - 1]; }

  // Runs a shell command inside `host`'s network namespace.
  CommandResult Run(int host, const std::string& command) const;

  // Takes `host`'s switch port down (every packet to or from it is lost)
  // and up again.
  absl::Status Disconnect(int host);
  absl::Status Reconnect(int host);
  // Drops every packet between `host` and each of `peers`, both ways, and
  // lets them through again.
  absl::Status Partition(int host, const std::vector<int>& peers);
  absl::Status Heal(int host, const std::vector<int>& peers);
  // Reconnects every host and heals every partition.
  void HealAll();

  // Whether a TCP connection from `from` to a listener on `to` completes
  // within `timeout`: the test's own probe of the faults above.
  bool Reaches(int from, int to, absl::Duration timeout = absl::Milliseconds(300));

  // Removes the namespaces (and their processes and mounts) left by test
  // processes that no longer run.
  static void RemoveLeftovers();

 private:
  VirtualNetwork() = default;
  absl::Status Build(int hosts);
  std::string SwitchName() const { return prefix_ + "sw"; }
  // `ip` in `host`'s network namespace.
  std::string Ip(int host) const;
  absl::Status Shell(const std::string& script) const;
  CommandResult Command(const std::string& command) const;

  mutable CommandShell shell_;          // runs every command but the destructor's
  std::string prefix_;                  // "lfsnet<pid>.<n>-"
  std::vector<std::string> addresses_;  // of hosts 1..N
  std::vector<int> listener_fds_;       // Reaches()'s listener in each host, -1 = none yet
  std::vector<int> listener_ports_;
  std::vector<std::vector<int>> partitions_;  // peers black-holed per host
  std::vector<bool> disconnected_;
};

}  // namespace logfs::testing
