#include "store/meta/ha/etcd_meta_journal.h"

#include <cinttypes>
#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/status/macros.h"

namespace logfs::meta {

MetaEtcdKeys::MetaEtcdKeys(const std::string& cluster)
    : prefix(absl::StrCat("/logfs/", cluster, "/meta/")),
      leader(prefix + "leader"),
      journal_prefix(prefix + "journal/"),
      trimmed(prefix + "trimmed"),
      members_prefix(prefix + "members/") {}

std::string MetaEtcdKeys::Record(uint64_t seq) const {
  char digits[21];
  std::snprintf(digits, sizeof(digits), "%020" PRIu64, seq);
  return journal_prefix + digits;
}

std::string MetaEtcdKeys::Member(const std::string& address) const {
  return members_prefix + address;
}

EtcdMetaJournal::EtcdMetaJournal(etcd::EtcdClient* etcd, const std::string& cluster, int64_t epoch,
                                 absl::Duration retry_for)
    : etcd_(etcd), keys_(cluster), epoch_(epoch), retry_for_(retry_for) {}

etcd::Compare EtcdMetaJournal::StillActive() const {
  etcd::Compare compare;
  compare.key = keys_.leader;
  compare.target = etcd::Compare::Target::kCreateRevision;
  compare.result = etcd::Compare::Result::kEqual;
  compare.number = epoch_;
  return compare;
}

namespace {
// A record's bytes besides its batch: seq, meta epoch, and the batch's tag
// and length.
constexpr size_t kRecordOverheadBytesMax = 32;
}  // namespace

size_t EtcdMetaJournal::RecordBytesMax() const {
  return kJournalRecordBytesMax - kRecordOverheadBytesMax;
}

absl::Status EtcdMetaJournal::Append(uint64_t first_seq, absl::Span<const std::string> batches) {
  if (epoch_ == 0) return absl::FailedPreconditionError("a journal reader cannot append");
  for (const std::string& batch : batches) {
    if (batch.size() > RecordBytesMax()) {
      return absl::InvalidArgumentError(absl::StrCat("a namespace change of ", batch.size(),
                                                     " bytes is over the journal's limit of ",
                                                     RecordBytesMax()));
    }
  }
  std::vector<std::string> values;
  size_t txn_bytes = 0;
  uint64_t txn_first = first_seq;
  for (size_t i = 0; i < batches.size(); ++i) {
    proto::MetaJournalRecord record;
    record.set_seq(first_seq + i);
    record.set_meta_epoch(static_cast<uint64_t>(epoch_));
    record.set_batch(batches[i]);
    record.set_wire_version(wire_version_);
    std::string value = record.SerializeAsString();
    if (!values.empty() && (values.size() >= kJournalRecordsPerTxnMax ||
                            txn_bytes + value.size() > kJournalTxnBytesMax)) {
      RETURN_IF_ERROR(AppendTxn(txn_first, values));
      txn_first += values.size();
      values.clear();
      txn_bytes = 0;
    }
    txn_bytes += value.size();
    values.push_back(std::move(value));
  }
  if (values.empty()) return absl::OkStatus();
  return AppendTxn(txn_first, values);
}

absl::Status EtcdMetaJournal::AppendTxn(uint64_t first_seq,
                                        const std::vector<std::string>& values) {
  etcd::Compare absent;
  absent.key = keys_.Record(first_seq);
  absent.target = etcd::Compare::Target::kCreateRevision;
  absent.result = etcd::Compare::Result::kEqual;
  absent.number = 0;
  std::vector<etcd::Op> puts(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    puts[i].type = etcd::Op::Type::kPut;
    puts[i].key = keys_.Record(first_seq + i);
    puts[i].value = values[i];
  }
  const uint64_t last_seq = first_seq + values.size() - 1;
  const absl::Time give_up = absl::Now() + retry_for_;
  bool resent = false;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<etcd::TxnResult> result = etcd_->Txn({StillActive(), absent}, puts, {});
    if (result.ok() && result->succeeded) return absl::OkStatus();
    if (result.ok()) {
      // Refused. After a resend, the keys may hold the first attempt's
      // records (a transaction lands whole or not at all).
      if (resent) {
        auto kvs = etcd_->Range(keys_.Record(first_seq));
        if (kvs.ok() && !kvs->empty() && (*kvs)[0].value == values[0]) return absl::OkStatus();
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "journal records ", first_seq, " to ", last_seq, " not appended: this meta (epoch ",
          epoch_, ") is no longer the active, or another active appended them"));
    }
    const absl::Status& s = result.status();
    const bool unknown = absl::IsDeadlineExceeded(s) || absl::IsInternal(s);
    if ((!unknown && !absl::IsUnavailable(s)) || absl::Now() >= give_up || attempt >= 100) {
      return s;
    }
    resent = resent || unknown;
    absl::SleepFor(absl::Milliseconds(20));  // etcd is electing a leader
  }
}

absl::StatusOr<std::vector<proto::MetaJournalRecord>> EtcdMetaJournal::Read(uint64_t from,
                                                                            size_t max_records) {
  ASSIGN_OR_RETURN(std::vector<etcd::KeyValue> kvs,
                   etcd_->Range(keys_.Record(from), etcd::PrefixEnd(keys_.journal_prefix),
                                static_cast<int64_t>(max_records)));
  std::vector<proto::MetaJournalRecord> records;
  records.reserve(kvs.size());
  for (const etcd::KeyValue& kv : kvs) {
    proto::MetaJournalRecord record;
    if (!record.ParseFromString(kv.value) || kv.key != keys_.Record(record.seq())) {
      return absl::DataLossError(absl::StrCat("unparseable meta journal record at ", kv.key));
    }
    records.push_back(std::move(record));
  }
  return records;
}

absl::Status EtcdMetaJournal::Trim(uint64_t through) {
  if (epoch_ == 0) return absl::FailedPreconditionError("a journal reader cannot trim");
  etcd::Op remove;
  remove.type = etcd::Op::Type::kDeleteRange;
  remove.key = keys_.journal_prefix;
  remove.range_end = keys_.Record(through + 1);
  etcd::Op mark;
  mark.type = etcd::Op::Type::kPut;
  mark.key = keys_.trimmed;
  mark.value = absl::StrCat(through);
  ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Txn({StillActive()}, {remove, mark}, {}));
  if (!result.succeeded) {
    return absl::FailedPreconditionError(absl::StrCat("journal not trimmed: this meta (epoch ",
                                                      epoch_, ") is no longer the active"));
  }
  return absl::OkStatus();
}

absl::Status EtcdMetaJournal::SetBase(uint64_t through) {
  if (epoch_ == 0) return absl::FailedPreconditionError("a journal reader cannot write");
  etcd::Op mark;
  mark.type = etcd::Op::Type::kPut;
  mark.key = keys_.trimmed;
  mark.value = absl::StrCat(through);
  ASSIGN_OR_RETURN(etcd::TxnResult result, etcd_->Txn({StillActive()}, {mark}, {}));
  if (!result.succeeded) return absl::FailedPreconditionError("no longer the active");
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> EtcdMetaJournal::TrimmedThrough() {
  ASSIGN_OR_RETURN(std::vector<etcd::KeyValue> kvs, etcd_->Range(keys_.trimmed));
  if (kvs.empty()) return 0;
  uint64_t through = 0;
  if (!absl::SimpleAtoi(kvs[0].value, &through)) {
    return absl::DataLossError(absl::StrCat("unparseable ", keys_.trimmed, ": ", kvs[0].value));
  }
  return through;
}

}  // namespace logfs::meta
