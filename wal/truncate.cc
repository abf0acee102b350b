// FileWriter: truncate(0) of a WAL file the writer holds (O_TRUNC, log
// rotation by copy-truncate), and a shrinking truncate of a block file
// before it is closed (CutTo).
#include <glog/logging.h>

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
    replicas_sealed_length_.reset();
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

absl::Status FileWriter::CutTo(uint64_t length) {
  absl::Status status = CutToInternal(length);
  RunFailedWaiters();
  return status;
}

absl::Status FileWriter::CutToInternal(uint64_t length) {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &FileWriter::QuiescentLocked));
  if (!error_.ok()) return error_;
  if (ClosedLocked()) return absl::FailedPreconditionError("writer is closed");
  if (kind_ != proto::KIND_BLOCK) {
    return PosixError(EPERM, "logfs files only grow, or a WAL file empties");
  }
  if (length > tail_.length()) return PosixError(EPERM, "logfs files only grow by writes");
  if (length == tail_.length()) return absl::OkStatus();
  if (length < tail_.segment_start()) {
    return PosixError(EPERM, absl::StrCat("cannot cut inode ", ino_, " to ", length,
                                          " bytes: its first ", tail_.segment_start(),
                                          " are sealed"));
  }
  if (length >= tail_.segment_start() + tail_.sent()) {
    tail_.DropBufferedPast(length);  // never sent: nobody has them
    return absl::OkStatus();
  }
  // The cut lies in sent bytes: those past it go nowhere (dropped from the
  // buffer first, so that the wait below sends nothing past the cut), and
  // writes wait (kSealing) until the open segment is sealed at the cut.
  tail_.DropBufferedPast(tail_.segment_start() + tail_.sent());
  SetPhaseLocked(WriterPhase::kSealing);
  const absl::Status acked = WaitAckedUnlocking(tail_.segment_start() + tail_.sent());
  // A recovery meanwhile (WaitAcked waits it out) sealed the segment the
  // cut was in somewhere at or past the acked length and moved the rest to
  // a new one: the cut is taken from where the open segment starts now.
  if (acked.ok() && length < tail_.segment_start()) {
    SetErrorLocked(PosixError(EIO, absl::StrCat("a recovery sealed inode ", ino_, " past ",
                                                length, " bytes before it could be cut there")));
  }
  if (!error_.ok() || !open_.has_value() || length >= tail_.segment_start() + tail_.sent()) {
    EndPhaseLocked(WriterPhase::kSealing, WriterPhase::kIdle);
    return error_;
  }
  return SealAtCutUnlocking(length - tail_.segment_start());
}

absl::Status FileWriter::SealAtCutUnlocking(uint64_t cut) {
  // Replies of the segment's replicas count up to the cut only.
  recovery_seal_length_ = cut;
  const uint64_t segment_id = open_->id();
  absl::Status status = SealOpenSegmentUnlocking(cut);
  replicas_sealed_length_ = cut;  // kept only if the writer fails below
  if (status.ok()) {
    MetaSealCall call = MetaSealCallLocked(segment_id, cut, replicas_.FailedServerIds());
    call.keep_lease = true;
    mu_.Unlock();
    absl::StatusOr<proto::Inode> inode = MetaSealAndWait(call);
    mu_.Lock();
    if (!inode.ok()) {
      status = PosixError(EIO, absl::StrCat("meta did not record the cut: ",
                                            inode.status().message()));
    }
  }
  recovery_seal_length_.reset();
  seal_in_flight_ = false;
  if (status.ok() && open_.has_value() && open_->id() == segment_id) {
    proto::Segment sealed = *open_;
    sealed.set_length(cut);
    sealed.set_sealed(true);
    sealed_.push_back(std::move(sealed));
    tail_.CutSentTo(cut);
    tail_.EndSegment();
    open_.reset();
    replicas_sealed_length_.reset();
    replicas_ = ReplicaSet();
    sync_round_replies_ = 0;
  }
  if (!status.ok()) SetErrorLocked(status);
  EndPhaseLocked(WriterPhase::kSealing, WriterPhase::kIdle);
  UpdateBusyLocked();
  return status;
}

}  // namespace logfs::wal
