// FileWriter: appending sealed segments that another file lists, without
// their bytes (copy_file_range of whole sealed segments: meta's
// CopyRange, docs/rpc.md).
#include <glog/logging.h>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "wal/file_writer.h"

namespace logfs::wal {
namespace {

// Meta's answer never came (or came too late): it may or may not have
// applied the change.
bool OutcomeUnknown(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace

absl::StatusOr<uint64_t> FileWriter::AppendSegments(uint64_t offset,
                                                    const AppendAtMeta& at_meta) {
  absl::StatusOr<uint64_t> appended;
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    if (ClosedLocked()) return absl::FailedPreconditionError("writer is closed");
    RETURN_IF_ERROR(CanAppendSegmentsLocked(offset));
    SetPhaseLocked(WriterPhase::kRolling);  // writes wait for meta's answer
  }
  absl::StatusOr<proto::Inode> inode = at_meta(lease_epoch_);
  {
    absl::MutexLock lock(&mu_);
    appended = TakeAppendedLocked(std::move(inode));
    SetPhaseLocked(WriterPhase::kIdle);
    UpdateBusyLocked();
  }
  RunFailedWaiters();
  return appended;
}

absl::Status FileWriter::CanAppendSegmentsLocked(uint64_t offset) const {
  // A FUSE worker calls: anything that would wait for a segment server
  // (a roll, seal or recovery to end, bytes to be acked) sends the caller
  // to copy bytes instead.
  if (phase_ != WriterPhase::kIdle || open_.has_value() || tail_.buffered() > 0 ||
      tail_.acked() != tail_.length() || draining_ || !queued_writes_.empty()) {
    return PosixError(EOPNOTSUPP, absl::StrCat("inode ", ino_,
                                               " has an open segment or bytes in flight"));
  }
  if (offset != tail_.length()) {
    return PosixError(EOPNOTSUPP, absl::StrCat("copy to offset ", offset, " of inode ", ino_,
                                               ", whose length is ", tail_.length()));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FileWriter::TakeAppendedLocked(absl::StatusOr<proto::Inode> inode) {
  CHECK(phase_ == WriterPhase::kRolling) << "writer of inode " << ino_;
  if (!inode.ok() && !OutcomeUnknown(inode.status())) return inode.status();  // refused
  absl::Status failed;
  if (!inode.ok()) {
    failed = PosixError(EIO, absl::StrCat("meta's answer to a copy into inode ", ino_,
                                          " was lost: ", inode.status().message()));
  } else if (static_cast<size_t>(inode->segments_size()) < sealed_.size()) {
    failed = PosixError(EIO, absl::StrCat("meta answered a copy into inode ", ino_, " with ",
                                          inode->segments_size(), " segments, fewer than ",
                                          sealed_.size()));
  }
  uint64_t length = 0;
  for (int i = 0; failed.ok() && i < inode->segments_size(); ++i) {
    const proto::Segment& segment = inode->segments(i);
    const bool kept = static_cast<size_t>(i) >= sealed_.size() || sealed_[i].id() == segment.id();
    if (!segment.sealed() || !kept) {
      failed = PosixError(EIO, absl::StrCat("meta answered a copy into inode ", ino_,
                                            " with segments that do not continue the writer's"));
    }
    length += segment.length();
  }
  if (failed.ok() && length < tail_.length()) {
    failed = PosixError(EIO, absl::StrCat("meta answered a copy into inode ", ino_, " with ",
                                          length, " bytes, fewer than ", tail_.length()));
  }
  if (!failed.ok()) {
    SetErrorLocked(failed);
    return failed;
  }
  const uint64_t appended = length - tail_.length();
  sealed_.assign(inode->segments().begin(), inode->segments().end());
  tail_ = AppendTail(length);
  // Close records this as the file's mtime, unless a write comes after.
  mtime_ns_ = inode->attr().mtime_ns();
  return appended;
}

}  // namespace logfs::wal
