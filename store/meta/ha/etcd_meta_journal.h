// The meta journal in etcd (docs/meta_ha.md "What is in etcd"): record
// `seq` is the key <prefix>journal/<seq, 20 decimal digits>, its value a
// serialized proto::MetaJournalRecord. The active appends a commit group's
// records in as few etcd transactions as etcd's limits allow (at most
// kJournalRecordsPerTxnMax puts and kJournalTxnBytesMax bytes each), each
// guarded by its election: it succeeds only while the leader key still
// has the create revision the active got when it won (its meta epoch) and
// the transaction's first key does not exist yet, so a deposed active's
// append fails (etcd's concurrency API: "use the lock key with
// transactions to ensure updates only occur while holding ownership").
// Only the active writes records, in seq order without gaps, so a first
// key that is absent means every later one is too.
// Readers (standbys) range over the keys in order. Trimmed records are
// deleted; <prefix>trimmed holds the highest seq deleted.
//
// Thread-safe (EtcdClient is).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/format/wire_version.h"
#include "store/meta/db/meta_journal.h"
#include "store/meta/ha/etcd/etcd_client.h"

namespace logfs::meta {

// The etcd keys of one logfs cluster's meta replicas, all under
// "/logfs/<cluster>/meta/".
struct MetaEtcdKeys {
  explicit MetaEtcdKeys(const std::string& cluster);
  std::string prefix;
  std::string leader;          // the active's advertised address, under its lease
  std::string journal_prefix;  // records
  std::string trimmed;         // highest seq trimmed, decimal
  std::string members_prefix;  // members/<address>: its applied seq, under its lease
  std::string Record(uint64_t seq) const;
  std::string Member(const std::string& address) const;
};

// A record larger than this is refused (kInvalidArgument) before it is
// sent: etcd refuses requests over --max-request-bytes (1.5 MiB by default).
inline constexpr size_t kJournalRecordBytesMax = 1 << 20;
// One append transaction holds at most this many records (etcd refuses a
// transaction of more than --max-txn-ops operations, 128 by default) and,
// past its first record, at most this many bytes of records.
inline constexpr size_t kJournalRecordsPerTxnMax = 120;
inline constexpr size_t kJournalTxnBytesMax = 1 << 20;

class EtcdMetaJournal : public MetaJournal {
 public:
  // Appends and trims as the active of epoch `epoch` (the leader key's
  // create revision; 0: a reader, whose Append and Trim fail with
  // kFailedPrecondition). `etcd` is not owned and must outlive this.
  // An append whose outcome etcd left unknown (a timeout while etcd
  // changes leaders) is sent again for up to `retry_for`: the transaction
  // is idempotent (it writes only an absent key), and a retry that finds
  // the key holding this very record knows the first one landed.
  EtcdMetaJournal(etcd::EtcdClient* etcd, const std::string& cluster, int64_t epoch,
                  absl::Duration retry_for = absl::ZeroDuration());

  absl::Status Append(uint64_t first_seq, absl::Span<const std::string> batches) override;
  // Less than kJournalRecordBytesMax by a record's own fields.
  size_t RecordBytesMax() const override;
  absl::StatusOr<std::vector<proto::MetaJournalRecord>> Read(uint64_t from,
                                                             size_t max_records) override;
  absl::Status Trim(uint64_t through) override;
  absl::StatusOr<uint64_t> TrimmedThrough() override;

  // Writes <prefix>trimmed = `through` without deleting anything, guarded
  // like Append: a first active whose database already holds `through`
  // records none of which is in the journal (a lone meta turned into a
  // replicated one) makes every other replica start from its checkpoint.
  absl::Status SetBase(uint64_t through);

 private:
  // The guard of every write: the election is still ours.
  etcd::Compare StillActive() const;
  // One transaction: records first_seq.. holding `values` (serialized
  // records), retried while etcd's answer is unknown (retry_for_).
  absl::Status AppendTxn(uint64_t first_seq, const std::vector<std::string>& values);

  etcd::EtcdClient* const etcd_;
  const MetaEtcdKeys keys_;
  const int64_t epoch_;
  // What every record says it was written by (store/format/wire_version.h).
  const uint32_t wire_version_ = format::OwnVersion("meta").wire_max();
  const absl::Duration retry_for_;
};

}  // namespace logfs::meta
