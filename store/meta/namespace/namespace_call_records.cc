// Namespace: the table of applied changes that makes a mount's retried
// change exactly-once (docs/rpc.md "Retries"), as NFS servers keep a
// duplicate request cache and HDFS's NameNode a RetryCache. Unlike those,
// the records are in RocksDB, written in the change's own synced batch, so
// that a change meta applied just before it died is answered, not applied
// again, when the mount retries it against the restarted meta.
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/meta/namespace/namespace.h"
#include "store/meta/namespace/internal/namespace_txn.h"

namespace logfs::meta {
namespace {

// ExpireCallRecords scans the table at most this often.
constexpr int64_t kCallRecordSweepIntervalMs = 60 * 1000;

}  // namespace

absl::StatusOr<std::optional<std::string>> Namespace::RecordedReply(const proto::CallId& call,
                                                                    format::MessageType type) {
  // A call id names a mount's change; without a mount (a tool's session,
  // which never asked for one) there is nothing that makes it unique.
  if (call.seq() == 0 || call.mount_id() == 0) return std::nullopt;
  auto record = db_->GetCallRecord(call);
  if (absl::IsNotFound(record.status())) return std::nullopt;
  if (!record.ok()) return record.status();
  if (record->type() != static_cast<uint32_t>(type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("call ", call.mount_id(), "/", call.seq(), " was a change of type ",
                     record->type(), ", not ", static_cast<int>(type)));
  }
  LOG(INFO) << "call " << call.mount_id() << "/" << call.seq() << " (type "
            << static_cast<int>(type) << ") was applied already: answering with its reply";
  return std::move(*record->mutable_reply());
}

void Namespace::RecordCall(Txn& txn, const proto::CallId& call, format::MessageType type,
                           std::function<std::string()> reply) {
  if (call.seq() == 0 || call.mount_id() == 0) return;
  txn.RecordCall(call, type, NowNs(), options_.call_records_per_mount, std::move(reply));
}

absl::Status Namespace::ExpireCallRecords() {
  const int64_t now = NowNs();
  {
    absl::MutexLock lock(&mu_);
    if (call_records_swept_ns_ != 0 &&
        now - call_records_swept_ns_ < kCallRecordSweepIntervalMs * kNanosPerMilli) {
      return absl::OkStatus();
    }
    call_records_swept_ns_ = now;
  }
  // Without the mutex: records written meanwhile are newer than the cutoff,
  // and a lookup racing with the deletion of an expired record is one no
  // mount still retries.
  ASSIGN_OR_RETURN(uint64_t deleted,
                   db_->DeleteCallRecordsBefore(
                       now - options_.call_record_retention_ms * kNanosPerMilli));
  if (deleted > 0) LOG(INFO) << "expired " << deleted << " records of applied changes";
  return absl::OkStatus();
}

}  // namespace logfs::meta
