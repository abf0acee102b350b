// A real etcd cluster for tests: N `etcd` members (Debian `etcd-server`,
// 3.4) on loopback with free client and peer ports, data and logs under one
// directory. Members can be killed, stopped (SIGSTOP), continued and
// restarted on their data dir, where they rejoin. The destructor SIGKILLs
// and reaps every member it started. Not thread-safe.
//
// Readiness is polled on etcd's HTTP health endpoint (GET /health on the
// client URL answers {"health":"true"} once the member has a leader and
// serves a read; etcd.io/docs/v3.4/op-guide/monitoring/), since this layer
// sits below the gRPC client. Every wait is bounded.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace logfs::cluster {

struct EtcdClusterOptions {
  int members = 3;
  std::string dir;                 // member<i>/ (data) and member<i>.log go below it; must exist
  std::string host = "127.0.0.1";  // listened on and advertised (client and peer URLs)
  std::string binary = "/usr/bin/etcd";
  // Raft timing, shorter than etcd's defaults (100 ms / 1000 ms) so that a
  // test's elections take well under a second.
  int heartbeat_interval_ms = 50;
  int election_timeout_ms = 500;
  // TLS with client-certificate auth for client and peer traffic (etcd's
  // --cert-file, --key-file, --trusted-ca-file, --client-cert-auth and
  // their --peer-* twins): PEM paths, one certificate for every member (it
  // must name `host`). Empty ca_file: plain HTTP. With TLS, readiness and
  // health are probed on a plain metrics URL of each member
  // (--listen-metrics-urls), and Leader() is not available.
  struct Tls {
    std::string ca_file, cert_file, key_file;
  } tls;
  std::vector<std::string> extra_flags;              // for every member, e.g. "--max-txn-ops=256"
  absl::Duration start_timeout = absl::Seconds(20);  // per Start() / Restart() / WaitHealthy()
};

class EtcdCluster {
 public:
  // Starts every member and waits until each one reports healthy. Ports
  // are picked free just before; if a member exits at start (a port taken
  // meanwhile), the cluster is wiped and started again on new ports, at most
  // 3 times. Errors: kFailedPrecondition with the member's last log line,
  // kDeadlineExceeded if not healthy within `start_timeout`.
  static absl::StatusOr<std::unique_ptr<EtcdCluster>> Start(EtcdClusterOptions options);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  int members() const { return static_cast<int>(members_.size()); }
  // "host:port" of every member's client URL, in member order (also of
  // members that are down); https with options.tls.
  std::vector<std::string> endpoints() const;
  std::string endpoint(int i) const;
  // The member's pid, -1 while it is not running (killed, not restarted).
  pid_t pid(int i) const { return members_[i].pid; }
  const std::string& log_path(int i) const { return members_[i].log_path; }

  // SIGKILLs member `i` and reaps it (bounded; no-op if not running).
  void Kill(int i);
  // SIGSTOP / SIGCONT: the member keeps its sockets but answers nothing.
  // Stop returns once the kernel reports it stopped (bounded by 5 s).
  absl::Status Stop(int i);
  absl::Status Continue(int i);
  // Starts member `i` again on its data dir and ports (killing it first if
  // it runs) and waits until it serves its peer port; it rejoins the
  // cluster by itself. Does not wait for health: with quorum lost that needs
  // other members back too, see WaitHealthy().
  absl::Status Restart(int i);
  // Waits until every running member reports healthy (has a leader, serves
  // reads). kDeadlineExceeded after `timeout`, naming the unhealthy ones.
  absl::Status WaitHealthy(absl::Duration timeout);
  // One health probe of member `i` (bounded by `timeout`).
  bool Healthy(int i, absl::Duration timeout) const;
  // The member that is the Raft leader now (asked through etcd's JSON
  // gateway, /v3/maintenance/status); kUnavailable if no running member
  // says it is.
  absl::StatusOr<int> Leader() const;

 private:
  struct Member {
    std::string name, data_dir, log_path;
    int client_port = 0, peer_port = 0, metrics_port = 0;
    pid_t pid = -1;
  };
  explicit EtcdCluster(EtcdClusterOptions options) : options_(std::move(options)) {}
  // Picks ports, starts every member, waits for health; kills what it
  // started on failure.
  absl::Status StartOnce();
  absl::Status Spawn(int i);
  // Polls until member `i` serves HTTP on its peer port;
  // kFailedPrecondition if it exits, kDeadlineExceeded at `deadline`.
  absl::Status WaitServing(int i, absl::Time deadline);
  std::vector<std::string> Argv(int i) const;
  void KillAll();

  EtcdClusterOptions options_;
  std::string token_;  // --initial-cluster-token, unique per cluster
  std::vector<Member> members_;
};

}  // namespace logfs::cluster
