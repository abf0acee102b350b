// The meta server (`logfs meta`): the namespace (inodes, directory
// entries, attributes, xattrs), each file's segment list, segment
// placement on segment servers, writer leases, and the segment-server
// registry. State lives in RocksDB under its data dir; every namespace
// change is durable before its reply, and changes that arrive together
// share one synced RocksDB write (and one journal append): group commit,
// store/meta/db/metadata_db.h.
//
// Thread-safe: requests are taken off the caller's io threads and served
// on a pool of handler threads (a change waits there for its group, never
// on an io thread); Start and Stop from one thread.
#pragma once

#include <asio.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "src/metrics/family_list.h"
#include "store/meta/ha/etcd/etcd_client.h"

namespace logfs::meta {

struct MetaServerOptions {
  std::string data_dir;        // created if missing; holds the RocksDB
  std::string listen_address;  // "host:port"; port 0 picks one
  // What others dial: "host:port", or "host" for the bound port
  // (rpc::AdvertisedAddress). Empty: the bound address; then a wildcard
  // listen_address (0.0.0.0) is refused.
  std::string advertise_address;
  int dead_server_ms = 10000;  // no heartbeat for this long: server is dead
  int lease_timeout_ms = 60000;  // writer lease without mount heartbeat
  // A lapsed lease's file is recovered by meta after this long (ms).
  int lease_recovery_delay_ms = 5000;
  int rpc_timeout_ms = 5000;   // for calls to segment servers
  // Threads serving namespace calls (`--meta_handler_threads`): a change
  // holds one while it waits for its group commit, so this bounds the
  // changes one group can hold, as HDFS's dfs.namenode.handler.count.
  int handler_threads = 32;
  // A mount trusts its cached names and attributes this long after meta
  // last answered its cache poll; changes wait for mounts to drop what
  // they make stale (docs/coherence.md). 0: no invalidations (mounts keep
  // names and attributes for 1 s, as before 0.2).
  int cache_lease_ms = 1000;
  uint32_t default_replication = 3;
  uint32_t wal_ack_quorum = 2;
  // Test only: the process exits (status 3) right after it handled its Nth
  // namespace change that carries a call id (Create, Unlink, Rename,
  // SetAttr, SetXattr, RemoveXattr; replays count), before it replies: a
  // change applied and synced whose answer is lost. 0: never.
  int TEST_exit_before_reply_to_change = 0;
  // Replica reports (docs/rpc.md "Replica reports"): how often meta asks
  // each segment server for one, and how long a replica no file lists
  // must stay unchanged before its server deletes it.
  int64_t replica_report_interval_ms = 600000;
  int64_t stray_replica_grace_ms = 300000;

  // High availability (docs/meta_ha.md, store/meta/ha/meta_ha.h). Empty: a
  // lone meta, active at epoch 0, as before. Else one replica of the
  // cluster `cluster`: a standby until etcd elects it.
  std::vector<std::string> etcd_endpoints;
  etcd::EtcdTlsFiles etcd_tls;  // TLS to etcd (docs/OPERATIONS.md step 2); none: plain
  std::string cluster;
  int64_t meta_lease_ttl_ms = 5000;
  int64_t meta_poll_interval_ms = 100;
  uint64_t journal_keep_records = 50000;
  int64_t journal_trim_interval_ms = 10000;
  // Called at most once, on any thread, when a replica must stop serving
  // (its lease lapsed, its journal failed): `logfs meta` re-executes
  // itself as a standby. Unset: the server only stops answering.
  std::function<void(const std::string& why)> step_down;
};

class MetaServer {
 public:
  // Opens (or creates) the database and listens; a replica (etcd_endpoints
  // set) then starts as a standby (MetaHa::Start's errors). Errors:
  // kFailedPrecondition (data dir unusable, database locked by another
  // meta), kUnavailable (address busy), kInvalidArgument (a wildcard
  // listen address without advertise_address, a bad one). `io` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<MetaServer>> Start(const MetaServerOptions& options,
                                                           asio::io_context& io);
  virtual ~MetaServer() = default;

  virtual std::string bound_address() const = 0;
  // "host:port" others dial.
  virtual std::string advertised_address() const = 0;

  // Stops accepting connections and fails calls to segment servers in
  // flight; later requests on open connections get kUnavailable. Destroy
  // the server only once `io` no longer runs its handlers (io stopped, or
  // every client connection closed): the destructor closes the database.
  virtual void Stop() = 0;

  // This replica's /metrics families (store/meta/meta_metrics.h); the
  // server table only while it serves. Thread-safe.
  virtual void CollectMetrics(metrics::FamilyList& out) const = 0;
};

}  // namespace logfs::meta
