// Test only: a MetaJournal in memory whose Append can be held and failed,
// to see group commit (store/meta/db/metadata_db.h) group by group
// (metadata_db_journal_test.cc, namespace_group_commit_test.cc).
// Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "store/format/logfs.pb.h"
#include "store/meta/db/meta_journal.h"

namespace logfs::meta {

// Keeps what is appended, one call per group; Append blocks while held
// (Hold) and fails with the failure set (Fail) while it is set.
class GatedJournal : public MetaJournal {
 public:
  absl::Status Append(uint64_t first_seq, absl::Span<const std::string> batches) override {
    absl::MutexLock lock(&mu);
    ++appends;
    ++waiting;
    mu.Await(absl::Condition(
        +[](bool* held) { return !*held; }, &held));
    --waiting;
    if (!fail_with.ok()) return fail_with;
    group_sizes.push_back(batches.size());
    for (const std::string& batch : batches) {
      proto::MetaJournalRecord record;
      record.set_seq(first_seq++);
      record.set_batch(batch);
      records.push_back(std::move(record));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<proto::MetaJournalRecord>> Read(uint64_t from,
                                                             size_t max_records) override {
    absl::MutexLock lock(&mu);
    std::vector<proto::MetaJournalRecord> out;
    for (const auto& r : records) {
      if (r.seq() >= from && out.size() < max_records) out.push_back(r);
    }
    return out;
  }
  absl::Status Trim(uint64_t) override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> TrimmedThrough() override { return 0; }
  size_t RecordBytesMax() const override {
    absl::MutexLock lock(&mu);
    return record_bytes_max;
  }

  void Fail(absl::Status why) {
    absl::MutexLock lock(&mu);
    fail_with = std::move(why);
  }
  void SetRecordBytesMax(size_t bytes) {
    absl::MutexLock lock(&mu);
    record_bytes_max = bytes;
  }
  std::vector<proto::MetaJournalRecord> Records() const {
    absl::MutexLock lock(&mu);
    return records;
  }
  std::vector<size_t> GroupSizes() const {
    absl::MutexLock lock(&mu);
    return group_sizes;
  }
  int Appends() const {
    absl::MutexLock lock(&mu);
    return appends;
  }

  void Hold(bool on) {
    absl::MutexLock lock(&mu);
    held = on;
  }
  // Waits until an Append is held.
  void AwaitHeldAppend() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n > 0; }, &waiting));
  }

  mutable absl::Mutex mu;
  bool held ABSL_GUARDED_BY(mu) = false;
  int appends ABSL_GUARDED_BY(mu) = 0;
  size_t record_bytes_max ABSL_GUARDED_BY(mu) = 1 << 20;
  int waiting ABSL_GUARDED_BY(mu) = 0;
  absl::Status fail_with ABSL_GUARDED_BY(mu);
  std::vector<size_t> group_sizes ABSL_GUARDED_BY(mu);
  std::vector<proto::MetaJournalRecord> records ABSL_GUARDED_BY(mu);
};

}  // namespace logfs::meta
