// FileWriter: truncate(0) of a WAL file the writer holds (O_TRUNC, log
// rotation by copy-truncate).
#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "wal/file_writer.h"

namespace logfs::wal {

absl::Status FileWriter::TruncateToZero() {
  Callbacks discarded;
  std::optional<proto::CallId> call;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &FileWriter::QuiescentLocked));
    if (!error_.ok()) return error_;
    if (ClosedLocked()) return absl::FailedPreconditionError("writer is closed");
    SetPhaseLocked(WriterPhase::kRolling);  // writes wait until the file is empty
    // Replies for the dropped segment are ignored from here on (no open_),
    // so no recovery can start before the phase is idle again.
    open_.reset();
    survivors_sealed_length_.reset();
    replicas_ = ReplicaSet();
    sealed_.clear();
    tail_.Clear();
    sync_round_replies_ = 0;
    UpdateBusyLocked();
    waiters_.TakeAll(&discarded);
    if (options_.next_call_id) call = options_.next_call_id();
  }
  absl::Status status = deps_->TruncateAtMeta(ino_, options_.mount_id, std::move(call));
  {
    absl::MutexLock lock(&mu_);
    SetPhaseLocked(WriterPhase::kIdle);
    if (!status.ok()) {
      status = PosixError(EIO, absl::StrCat("meta did not truncate: ", status.message()));
      SetErrorLocked(status);
    }
  }
  for (auto& cb : discarded) cb(absl::OkStatus());
  RunFailedWaiters();
  return status;
}

}  // namespace logfs::wal
