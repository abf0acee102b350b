// Meta high availability (docs/meta_ha.md): one of N meta replicas, each
// with its own RocksDB, elected active through etcd, as HDFS elects one of
// its NameNodes through ZooKeeper; etcd's Raft log is the shared journal.
//
//   - Standby: applies the journal records the active commits
//     (EtcdMetaJournal), polling every poll_interval_ms; publishes its
//     applied seq under its own etcd lease (trimming waits for it); once it
//     has applied every record and no leader key exists, campaigns.
//   - Election: a transaction creates the leader key (value: the
//     advertised address) under this replica's lease if it does not exist.
//     The key's create revision is the meta epoch: etcd revisions only grow,
//     so a later active always has a higher epoch. The winner applies the
//     records a deposed active committed before its key expired, then
//     promotes (Hooks::promote) with a journal whose every append is guarded
//     by the epoch.
//   - Self-fencing: the lease is renewed every ttl/6; an active whose last
//     renewal was sent more than ttl/2 ago stops answering (ServingNow
//     false, checked before and after each request), so it is silent before
//     etcd can expire its lease (ttl after that renewal reached etcd) and
//     elect another (the rule of 3FS's and HDFS's fencing: the old active
//     must stop before the new one starts). It then steps down
//     (Hooks::step_down): meta re-executes itself as a standby.
//   - Trimming: the active deletes records every live replica has applied,
//     but never the last journal_keep_records; a replica behind the trimmed
//     point waits for `logfs meta bootstrap`.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "store/meta/ha/etcd/etcd_client.h"
#include "store/format/logfs.pb.h"
#include "store/meta/ha/etcd_meta_journal.h"
#include "store/meta/db/metadata_db.h"

namespace logfs::meta {

struct MetaHaOptions {
  std::vector<std::string> etcd_endpoints;  // "host:port" of etcd members
  etcd::EtcdTlsFiles etcd_tls;              // TLS to etcd (none: plain)
  std::string cluster;                      // names the keys: /logfs/<cluster>/meta/
  std::string advertised_address;           // what clients dial: the leader key's value
  int64_t lease_ttl_ms = 5000;              // this replica's etcd lease
  int64_t poll_interval_ms = 100;           // standby: journal poll period
  uint64_t journal_keep_records = 50000;    // never trims the last this many records
  int64_t trim_interval_ms = 10000;         // active: how often it trims
};

class MetaHa {
 public:
  struct Hooks {
    // Runs on the HA thread once this replica won the election and applied
    // the whole journal: serve as the active of `epoch`, appending to
    // `journal` (owned by MetaHa, valid until its destruction). An error
    // makes the replica step down.
    std::function<absl::Status(uint64_t epoch, MetaJournal* journal)> promote;
    // Runs at most once, on any thread: this replica must stop serving at
    // once (lease lost or expired, journal failed, promotion failed).
    std::function<void(const std::string& why)> step_down;
  };

  // Connects to etcd and takes a lease (retrying for up to 10 s: kUnavailable
  // "cannot reach etcd at ..." after that; kInvalidArgument for bad
  // options). `db` is not owned and must outlive this. Nothing runs
  // until Begin.
  static absl::StatusOr<std::unique_ptr<MetaHa>> Create(MetaHaOptions options, MetadataDb* db,
                                                        Hooks hooks);
  // Starts the standby's work (and so the hooks' calls). Once.
  void Begin();
  ~MetaHa();  // Stop()

  // Ends both threads (within one etcd call timeout) and revokes the lease,
  // so that another replica can be elected at once (after a clean stop).
  void Stop();

  // Active, and its last lease renewal was sent less than ttl/2 ago.
  bool ServingNow() const;
  // What MetaState answers.
  proto::MetaStateResponse State() const;
  // The journal failed (MetadataDb's failure handler): step down.
  void JournalFailed(const absl::Status& why);

 private:
  MetaHa(MetaHaOptions options, MetadataDb* db, Hooks hooks,
         std::unique_ptr<etcd::EtcdClient> etcd);
  void Run();            // the HA thread
  void KeepAliveLoop();  // the lease thread
  void StandbyStep();
  void ActiveStep();
  // Applies journal records after the applied seq: true when it reached
  // the journal's end, false with records left or on an error.
  bool CatchUp(int max_pages);
  void Campaign(int64_t lease);
  void PublishMember(int64_t lease);
  void MaybeTrim();
  void StepDown(const std::string& why);
  // Waits up to `ms` or until Stop; false when stopping.
  bool Pause(int64_t ms) ABSL_LOCKS_EXCLUDED(mu_);
  static int64_t SteadyNowNs();

  // Immutable after construction.
  const MetaHaOptions options_;
  const MetaEtcdKeys keys_;
  MetadataDb* const db_;
  const Hooks hooks_;
  const std::unique_ptr<etcd::EtcdClient> etcd_;
  EtcdMetaJournal reader_;  // epoch 0: reads only

  std::atomic<int64_t> lease_{0};           // 0: none (being granted again)
  std::atomic<int64_t> valid_until_ns_{0};  // steady clock; 0 never
  std::atomic<bool> active_{false};
  std::atomic<bool> stepped_down_{false};
  std::atomic<bool> needs_bootstrap_{false};

  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;          // the active's (ours once active)
  std::string active_address_ ABSL_GUARDED_BY(mu_);  // "" unknown
  std::unique_ptr<EtcdMetaJournal> journal_;         // set once at promotion (HA thread)

  // HA thread only.
  uint64_t published_seq_ = UINT64_MAX;
  int64_t published_ns_ = 0;
  int64_t trimmed_ns_ = 0;
  uint64_t trimmed_ = 0;

  std::thread ha_thread_;
  std::thread keepalive_thread_;
};

}  // namespace logfs::meta
