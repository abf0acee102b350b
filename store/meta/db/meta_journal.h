// The meta journal (docs/meta_ha.md "Journal"): the ordered log of every
// namespace change, committed before the change is applied to a replica's
// RocksDB. Each record is one MetadataDb batch (the bytes of a
// rocksdb::WriteBatch) with a sequence number 1, 2, ... and no gaps; every
// replica applies them in order and keeps the last one's seq in the same
// RocksDB batch (MetaCounter::kAppliedSeq), so a restart resumes exactly.
// This is the shape of HDFS's edit log (a quorum journal, applied by the
// standby NameNode) with etcd's Raft log as the quorum.
//
// Two implementations: LocalMetaJournal (a lone meta: RocksDB's own write-
// ahead log is the journal, nothing else to write) and EtcdMetaJournal
// (store/meta/ha/etcd_meta_journal.h).
//
// Thread-safety: implementations are thread-safe, but MetadataDb calls
// Append from one thread at a time, in seq order (the leader of each
// commit group, store/meta/db/metadata_db.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "store/format/logfs.pb.h"

namespace logfs::meta {

class MetaJournal {
 public:
  virtual ~MetaJournal() = default;

  // Commits records first_seq, first_seq + 1, ... holding `batches` (one
  // commit group of MetadataDb: as few journal writes as the journal's
  // limits allow, e.g. one etcd transaction for up to 120 records). OK:
  // every one is durable in the journal and every replica will apply it.
  // On an error, a prefix of them (possibly none) may have been appended:
  // kFailedPrecondition: record first_seq was NOT appended, and never will
  // be (this replica is not the active any more, or the seq is taken:
  // another active appended it), and no later one was either; a later
  // record's refusal says so too, after earlier ones were appended.
  // kInvalidArgument: a record larger than RecordBytesMax(), nothing
  // appended. Any other error (kUnavailable, kDeadlineExceeded): the
  // outcome is unknown. After any error the caller must stop appending
  // (MetadataDb fails every later write) and let the replica re-read the
  // journal.
  virtual absl::Status Append(uint64_t first_seq, absl::Span<const std::string> batches) = 0;

  // The largest batch one record may hold (bytes); MetadataDb refuses a
  // larger change with kInvalidArgument before it is staged.
  virtual size_t RecordBytesMax() const { return std::numeric_limits<size_t>::max(); }

  // Up to `max_records` records with seq >= `from`, in seq order (fewer
  // when the journal ends). Errors from the store.
  virtual absl::StatusOr<std::vector<proto::MetaJournalRecord>> Read(uint64_t from,
                                                                     size_t max_records) = 0;

  // Deletes every record with seq <= `through`; TrimmedThrough() returns at
  // least `through` afterwards. kFailedPrecondition when this replica is not
  // the active.
  virtual absl::Status Trim(uint64_t through) = 0;

  // The highest seq trimmed: records up to it are gone, and a replica that
  // has applied less must start from a peer's checkpoint (`logfs meta
  // bootstrap`). 0 when nothing was trimmed.
  virtual absl::StatusOr<uint64_t> TrimmedThrough() = 0;
};

// A lone meta's journal: RocksDB's write-ahead log already makes each
// synced batch durable and ordered, so Append writes nothing and Read finds
// nothing; no one else applies them.
class LocalMetaJournal : public MetaJournal {
 public:
  absl::Status Append(uint64_t first_seq, absl::Span<const std::string> batches) override {
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<proto::MetaJournalRecord>> Read(uint64_t from,
                                                             size_t max_records) override {
    return std::vector<proto::MetaJournalRecord>{};
  }
  absl::Status Trim(uint64_t through) override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> TrimmedThrough() override { return 0; }
};

}  // namespace logfs::meta
