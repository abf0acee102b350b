// FileWriter: construction, the phase, admission and Write, Sync, the
// sticky error. The other jobs are in the files named in file_writer.h.
#include "wal/file_writer.h"

#include <glog/logging.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "wal/internal/busy_writers.h"
#include "wal/rpc_writer_deps.h"
#include "wal/writer_counters.h"

namespace logfs::wal {

std::shared_ptr<FileWriter> FileWriter::Create(FileWriterOptions options, proto::Inode inode,
                                               client::MetaClient* meta, client::SegdClient* segd) {
  RpcWriterDepsOptions deps;
  deps.replica_timeout = options.replica_timeout;
  return Create(std::move(options), std::move(inode), NewRpcWriterDeps(deps, meta, segd));
}

std::shared_ptr<FileWriter> FileWriter::Create(FileWriterOptions options, proto::Inode inode,
                                               std::shared_ptr<WriterDeps> deps) {
  return std::shared_ptr<FileWriter>(
      new FileWriter(std::move(options), std::move(inode), std::move(deps)));
}

namespace {

uint64_t SegmentsLength(const proto::Inode& inode) {
  uint64_t length = 0;
  for (const auto& s : inode.segments()) length += s.length();
  return length;
}

}  // namespace

FileWriter::FileWriter(FileWriterOptions options, proto::Inode inode,
                       std::shared_ptr<WriterDeps> deps)
    : options_(std::move(options)),
      ino_(inode.attr().ino()),
      lease_epoch_(inode.lease_epoch()),
      kind_(inode.attr().kind()),
      deps_(std::move(deps)),
      slow_servers_(options_.slow_servers != nullptr ? options_.slow_servers
                                                     : std::make_shared<SlowServers>()),
      sealed_(inode.segments().begin(), inode.segments().end()),
      tail_(SegmentsLength(inode)),
      mtime_ns_(inode.attr().mtime_ns()),
      opened_length_(SegmentsLength(inode)),
      opened_segments_(inode.segments_size()),
      opened_mtime_ns_(inode.attr().mtime_ns()) {}

FileWriter::~FileWriter() {
  absl::MutexLock lock(&mu_);
  if (busy_) internal::busy_writers.fetch_sub(1, std::memory_order_relaxed);
}

void FileWriter::SetPhaseLocked(WriterPhase next) {
  CHECK(IsAllowedTransition(phase_, next))
      << "writer of inode " << ino_ << ": phase " << WriterPhaseName(phase_) << " -> "
      << WriterPhaseName(next);
  phase_ = next;
}

void FileWriter::EndPhaseLocked(WriterPhase from, WriterPhase to) {
  if (phase_ == WriterPhase::kRecovering) {
    // The operation gave up (its wait failed) while the recovery runs:
    // the recovery ends in `to` instead of going back to `from`.
    CHECK(resume_phase_ == from) << "writer of inode " << ino_ << ": recovery resumes "
                                 << WriterPhaseName(resume_phase_) << ", not "
                                 << WriterPhaseName(from);
    CHECK(IsAllowedTransition(from, to));
    resume_phase_ = to;
    return;
  }
  CHECK(phase_ == from) << "writer of inode " << ino_ << ": phase " << WriterPhaseName(phase_)
                        << ", not " << WriterPhaseName(from);
  SetPhaseLocked(to);
}

bool FileWriter::QuiescentLocked() const {
  return phase_ == WriterPhase::kIdle || phase_ == WriterPhase::kClosing ||
         phase_ == WriterPhase::kClosed;
}

bool FileWriter::ClosedLocked() const {
  const WriterPhase p = phase_ == WriterPhase::kRecovering ? resume_phase_ : phase_;
  return p == WriterPhase::kClosing || p == WriterPhase::kClosed;
}

void FileWriter::UpdateBusyLocked() {
  const bool busy = error_.ok() && !ClosedLocked() && open_.has_value() && tail_.awaiting_acks();
  if (busy == busy_) return;
  busy_ = busy;
  internal::busy_writers.fetch_add(busy ? 1 : -1, std::memory_order_relaxed);
}

void FileWriter::SetMtime(int64_t mtime_ns) {
  absl::MutexLock lock(&mu_);
  mtime_ns_ = mtime_ns;
}

uint64_t FileWriter::length() const {
  absl::MutexLock lock(&mu_);
  return tail_.length();
}

uint64_t FileWriter::acked_length() const {
  absl::MutexLock lock(&mu_);
  return tail_.acked();
}

std::vector<proto::Segment> FileWriter::ReadableSegments() const {
  absl::MutexLock lock(&mu_);
  std::vector<proto::Segment> out = sealed_;
  if (open_.has_value()) {
    proto::Segment s = *open_;
    // Right after a roll the new segment may have nothing acked yet.
    s.set_length(tail_.acked() > s.file_offset() ? tail_.acked() - s.file_offset() : 0);
    out.push_back(std::move(s));
  }
  return out;
}

bool FileWriter::CanAcceptLocked() const {
  if (!error_.ok() || ClosedLocked()) return true;
  return phase_ == WriterPhase::kIdle && tail_.unacked() < options_.max_unacked_bytes &&
         tail_.tail_bytes() < 2 * options_.max_unacked_bytes;
}

absl::Status FileWriter::Write(std::optional<uint64_t> offset, absl::string_view data) {
  rpc::CallBatch sends;
  absl::Status status = WriteInternal(offset, data, &sends);
  sends.Flush();  // the appends, now that mu_ is free
  RunFailedWaiters();
  return status;
}

absl::Status FileWriter::WriteInternal(std::optional<uint64_t> offset, absl::string_view data,
                                       rpc::CallBatch* sends) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(this, &FileWriter::CanAcceptLocked),
                            options_.fsync_timeout)) {
    SetErrorLocked(PosixError(EIO, "replicas did not take queued bytes in time"));
  }
  return AcceptLocked(offset, data, sends);
}

bool FileWriter::WriteWouldWaitLocked(size_t bytes) const {
  // A failed or closed writer answers at once.
  if (!error_.ok() || ClosedLocked()) return false;
  if (!CanAcceptLocked()) return true;
  if (bytes == 0 || options_.segment_bytes == 0) return false;
  return !open_.has_value() || SlowRollDueLocked() ||
         tail_.segment_used() + bytes > options_.segment_bytes;
}

void FileWriter::WriteAsync(std::optional<uint64_t> offset, absl::string_view data,
                            SyncCallback done) {
  rpc::CallBatch sends;
  absl::Status status;
  bool start_drain = false;
  {
    absl::MutexLock lock(&mu_);
    if (draining_ || WriteWouldWaitLocked(data.size())) {
      queued_writes_.push_back({offset, std::string(data), std::move(done)});
      if (draining_) return;  // the running drain takes it
      draining_ = start_drain = true;
    } else {
      status = AcceptLocked(offset, data, &sends);
    }
  }
  if (start_drain) {
    RunWaiting([self = shared_from_this()] { self->DrainQueuedWrites(); });
    return;
  }
  sends.Flush();
  RunFailedWaiters();
  done(status);
}

void FileWriter::DrainQueuedWrites() {
  for (;;) {
    QueuedWrite write;
    {
      absl::MutexLock lock(&mu_);
      if (queued_writes_.empty()) {
        draining_ = false;
        return;
      }
      write = std::move(queued_writes_.front());
      queued_writes_.pop_front();
    }
    // draining_ stays set meanwhile: a WriteAsync that comes now queues
    // behind, so nothing overtakes this write.
    absl::Status status = Write(write.offset, write.data);
    bool last;
    {
      absl::MutexLock lock(&mu_);
      last = queued_writes_.empty();
      // Taken (or failed) with nothing behind it: the drain ends before
      // its answer goes out, so a write sent after that answer is taken
      // inline (and a wrong offset refused inline), not queued behind a
      // drain with nothing left to do.
      if (last) draining_ = false;
    }
    write.done(std::move(status));
    if (last) return;
  }
}

void FileWriter::RunWaiting(std::function<void()> job) {
  if (options_.run_waiting) {
    options_.run_waiting(std::move(job));
  } else {
    std::thread(std::move(job)).detach();
  }
}

void FileWriter::CloseAsync(SyncCallback done) {
  RunWaiting([self = shared_from_this(), done = std::move(done)] { done(self->Close()); });
}

absl::Status FileWriter::AcceptLocked(std::optional<uint64_t> offset, absl::string_view data,
                                      rpc::CallBatch* sends) {
  if (!error_.ok()) return error_;
  if (ClosedLocked()) return absl::FailedPreconditionError("writer is closed");
  const uint64_t length = tail_.length();
  const uint64_t at = offset.value_or(length);
  if (at != length) {
    return PosixError(EPERM, absl::StrCat("write at offset ", at, " but the file ends at ", length,
                                          " (logfs files are append-only)"));
  }
  if (options_.segment_bytes == 0 && !data.empty()) {
    // Every segment would be full at once: roll after roll, forever.
    return absl::InvalidArgumentError("segment_bytes is 0: no segment can hold a byte");
  }
  if (!data.empty()) mtime_ns_ = absl::ToUnixNanos(absl::Now());
  while (!data.empty()) {
    if (!open_.has_value() || tail_.segment_used() >= options_.segment_bytes ||
        SlowRollDueLocked()) {
      sends->Flush();  // the roll waits for their answers
      RETURN_IF_ERROR(RollUnlocking());
    }
    const size_t room = static_cast<size_t>(options_.segment_bytes - tail_.segment_used());
    const size_t chunk = std::min(room, data.size());
    tail_.Buffer(data.substr(0, chunk));
    data.remove_prefix(chunk);
    if (CoalescingLocked()) {
      ArmCoalesceTimerLocked();
    } else if (tail_.buffered() >= options_.append_bytes) {
      SendBufferLocked(sends);
    }
  }
  return absl::OkStatus();
}

void FileWriter::ArmCoalesceTimerLocked() {
  if (coalesce_timer_armed_) return;
  coalesce_timer_armed_ = true;
  deps_->RunAfter(options_.coalesce_delay,
                  [self = shared_from_this()] { self->OnCoalesceTimer(); });
}

void FileWriter::OnCoalesceTimer() {
  rpc::CallBatch sends;
  {
    absl::MutexLock lock(&mu_);
    coalesce_timer_armed_ = false;
    // A roll, seal, close or recovery in progress sends the buffer itself
    // (each waits for every byte written, or re-sends the buffer with the
    // tail); after an error nothing goes out.
    if (phase_ == WriterPhase::kIdle && error_.ok()) SendBufferLocked(&sends);
  }
  sends.Flush();
  RunFailedWaiters();
}

void FileWriter::Sync(SyncCallback done) {
  GlobalWriterCounters().syncs.fetch_add(1, std::memory_order_relaxed);
  absl::Status status;
  bool wait = false;
  rpc::CallBatch sends;  // written after mu_ is released
  {
    absl::MutexLock lock(&mu_);
    status = error_;
    if (status.ok()) {
      SendBufferLocked(&sends);
      const uint64_t target = tail_.length();
      if (tail_.acked() < target) {
        wait = true;
        waiters_.Add(target, deps_->Now(), std::move(done));
        ArmFsyncDeadlineLocked();
        RequestSyncRoundLocked(&sends);  // none if the appends asked for sync
      }
      appends_since_sync_ = 0;  // the application syncs: appends go eager
    }
  }
  sends.Flush();
  if (!wait) done(status);
}

FileWriter::Callbacks FileWriter::TakeReadyWaitersLocked() {
  Callbacks ready = waiters_.TakeReady(tail_.acked());
  if (!ready.empty()) {
    GlobalWriterCounters().sync_groups.fetch_add(1, std::memory_order_relaxed);
    GlobalWriterCounters().synced_waiters.fetch_add(ready.size(), std::memory_order_relaxed);
    GlobalWriterCounters().sync_group_waiters.Observe(ready.size());
  }
  return ready;
}

void FileWriter::SetErrorLocked(absl::Status status) {
  if (error_.ok()) {
    LOGFS_LOG_EVERY_MS(ERROR, 1000) << "writer of inode " << ino_ << " failed: " << status;
    error_ = std::move(status);
  }
  UpdateBusyLocked();
  waiters_.TakeAll(&failed_waiters_);
}

void FileWriter::RunFailedWaiters() {
  Callbacks failed;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    failed.swap(failed_waiters_);
    error = error_;
  }
  for (auto& cb : failed) cb(error);
}

}  // namespace logfs::wal
