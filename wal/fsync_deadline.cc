// FileWriter: the fsync deadline. A sync that waits past fsync_timeout
// fails the writer with EIO, sticky: never return 0 on hope (DESIGN §4).
#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "wal/file_writer.h"
#include "wal/writer_counters.h"

namespace logfs::wal {

absl::Status FileWriter::NoQuorumInTimeError() const {
  return PosixError(EIO, absl::StrCat("no ack quorum for inode ", ino_, " within ",
                                      absl::FormatDuration(options_.fsync_timeout)));
}

void FileWriter::ArmFsyncDeadlineLocked() {
  if (fsync_deadline_armed_) return;
  fsync_deadline_armed_ = true;
  // Checked at a tenth of the timeout, and at the oldest waiter's deadline
  // itself (just past it), so that a sync fails on time, not up to a
  // period late.
  absl::Duration delay = std::max(absl::Milliseconds(10), options_.fsync_timeout / 10);
  if (std::optional<absl::Time> oldest = waiters_.OldestSince(); oldest.has_value()) {
    const absl::Duration left = *oldest + options_.fsync_timeout - deps_->Now();
    delay = std::clamp(left + absl::Milliseconds(1), absl::Milliseconds(1), delay);
  }
  deps_->RunAfter(delay, [self = shared_from_this()] { self->OnFsyncDeadline(); });
}

void FileWriter::OnFsyncDeadline() {
  {
    absl::MutexLock lock(&mu_);
    fsync_deadline_armed_ = false;
    std::optional<absl::Time> oldest = waiters_.OldestSince();
    if (!oldest.has_value()) return;
    if (deps_->Now() - *oldest > options_.fsync_timeout) {
      if (error_.ok())
        GlobalWriterCounters().fsync_timeouts.fetch_add(1, std::memory_order_relaxed);
      SetErrorLocked(NoQuorumInTimeError());
    } else {
      ArmFsyncDeadlineLocked();
    }
  }
  RunFailedWaiters();
}

}  // namespace logfs::wal
