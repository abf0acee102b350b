// FileWriter: sealing the open segment. One replica seal fan-out
// (SealReplicas) and one meta seal (WriterDeps::SealAtMeta, with the one
// retry policy of every meta call) serve the three callers: a roll and
// Close, which block, and SealAsync (close(2), FUSE flush), which does not.
#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "wal/file_writer.h"

namespace logfs::wal {

void FileWriter::SealReplicas(SegmentRef segment, uint64_t length, ReplicaAddresses replicas,
                              std::function<void(ReplicaSealResult)> done) {
  if (replicas.empty()) {
    done(ReplicaSealResult{});
    return;
  }
  struct Round {
    absl::Mutex mu;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    ReplicaSealResult result ABSL_GUARDED_BY(mu);
    std::function<void(ReplicaSealResult)> done;
  };
  auto round = std::make_shared<Round>();
  {
    absl::MutexLock lock(&round->mu);  // (no one else has it yet; for the analysis)
    round->pending = replicas.size();
  }
  round->done = std::move(done);
  for (const auto& [index, address] : replicas) {
    deps_->SealReplica(address, segment, length,
                       [round, segment, index = index, address = address](absl::Status s) {
                         ReplicaSealResult result;
                         {
                           absl::MutexLock lock(&round->mu);
                           if (s.ok()) {
                             round->result.sealed.push_back(index);
                           } else {
                             LOGFS_LOG_EVERY_MS(WARNING, 1000)
                                 << "could not seal segment " << segment.id << " on " << address
                                 << ": " << s;
                             round->result.failed.push_back(index);
                             round->result.no_space |=
                                 absl::IsResourceExhausted(s) || AttachedErrno(s) == ENOSPC;
                             round->result.last_error = std::move(s);
                           }
                           if (--round->pending != 0) return;
                           result = std::move(round->result);
                         }
                         round->done(std::move(result));
                       });
  }
}

FileWriter::ReplicaSealResult FileWriter::SealReplicasAndWait(SegmentRef segment, uint64_t length,
                                                              ReplicaAddresses replicas) {
  absl::Notification sealed;
  ReplicaSealResult out;
  SealReplicas(segment, length, std::move(replicas), [&](ReplicaSealResult result) {
    out = std::move(result);
    sealed.Notify();
  });
  sealed.WaitForNotification();
  return out;
}

FileWriter::ReplicaAddresses FileWriter::LiveReplicasLocked() const {
  ReplicaAddresses live;
  for (size_t r : replicas_.LiveIndexes()) live.emplace_back(r, replicas_[r].address);
  return live;
}

absl::Status FileWriter::ApplyReplicaSealLocked(uint64_t segment_id,
                                                const ReplicaSealResult& result) {
  // A replica that did not seal is dropped: meta removes it from the
  // sealed segment (failed_servers).
  for (size_t r : result.failed) replicas_.MarkFailed(r);
  if (result.sealed.size() < replicas_.ack_quorum()) {
    return PosixError(EIO,
                      absl::StrCat("sealed segment ", segment_id, " on only ", result.sealed.size(),
                                   " replicas: ", result.last_error.message()));
  }
  return absl::OkStatus();
}

absl::Status FileWriter::SealOpenSegmentUnlocking(uint64_t length) {
  const SegmentRef segment{open_->id(), open_->epoch()};
  ReplicaAddresses live = LiveReplicasLocked();
  seal_in_flight_ = true;
  mu_.Unlock();
  ReplicaSealResult result = SealReplicasAndWait(segment, length, std::move(live));
  mu_.Lock();
  return ApplyReplicaSealLocked(segment.id, result);
}

MetaSealCall FileWriter::MetaSealCallLocked(uint64_t segment_id, uint64_t length,
                                            const std::vector<uint64_t>& failed_servers) const {
  MetaSealCall call;
  call.ino = ino_;
  call.lease_epoch = lease_epoch_;
  call.mount_id = options_.mount_id;
  call.segment_id = segment_id;
  call.sealed_length = length;
  call.failed_servers = failed_servers;
  call.avoid_servers = slow_servers_->Current(deps_->Now());
  // Our view of the file, for meta's compare-and-swap after a restart.
  for (const auto& segment : sealed_) call.sealed_file_length += segment.length();
  // The call id makes a seal that meta applied before it died answered,
  // not refused, on the retry.
  if (options_.next_call_id) call.call = options_.next_call_id();
  return call;
}

absl::StatusOr<proto::Inode> FileWriter::MetaSealAndWait(const MetaSealCall& call) {
  absl::Notification answered;
  absl::StatusOr<proto::Inode> out;
  deps_->SealAtMeta(call, [&](absl::StatusOr<proto::Inode> inode) {
    out = std::move(inode);
    answered.Notify();
  });
  answered.WaitForNotification();
  return out;
}

void FileWriter::SealAsync(SyncCallback done) {
  bool sealing = false;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &FileWriter::QuiescentLocked));
    if (error_.ok() && open_.has_value() && !ClosedLocked()) {
      SetPhaseLocked(WriterPhase::kSealing);
      sealing = true;
    }
  }
  // Sync first; the seal step runs from the sync's completion.
  Sync([self = shared_from_this(), sealing, done = std::move(done)](absl::Status s) mutable {
    if (!sealing) {
      done(s);
    } else if (!s.ok()) {
      self->FailAsyncSeal(s, std::move(done));
    } else {
      self->SealReplicasAsync(std::move(done));
    }
  });
}

void FileWriter::SealReplicasAsync(SyncCallback done) {
  SegmentRef segment;
  uint64_t length = 0;
  ReplicaAddresses live;
  absl::Status error;
  bool nothing_open = false;
  {
    absl::MutexLock lock(&mu_);
    if (phase_ == WriterPhase::kRecovering) {
      // A replica failed after the sync: once the roll is done the bytes
      // are durable on the next segment; seal that one. (Waiting with a
      // Sync would not do: the bytes may be acked already, and the sync
      // would call back at once, again and again.)
      after_recovery_.push_back([self = shared_from_this(), done = std::move(done)]() mutable {
        self->SealReplicasAsync(std::move(done));
      });
      return;
    }
    error = error_;
    if (error.ok() && !open_.has_value()) {
      nothing_open = true;
      EndPhaseLocked(WriterPhase::kSealing, WriterPhase::kIdle);
    } else if (error.ok()) {
      segment = {open_->id(), open_->epoch()};
      length = tail_.sent();
      live = LiveReplicasLocked();
      seal_in_flight_ = true;  // cleared when the seal ends
    }
  }
  if (!error.ok()) return FailAsyncSeal(error, std::move(done));
  if (nothing_open) return done(absl::OkStatus());
  SealReplicas(segment, length, std::move(live),
               [self = shared_from_this(), segment, length,
                done = std::move(done)](ReplicaSealResult result) mutable {
                 self->OnAsyncReplicaSeal(segment, length, std::move(result), std::move(done));
               });
}

void FileWriter::OnAsyncReplicaSeal(SegmentRef segment, uint64_t length, ReplicaSealResult result,
                                    SyncCallback done) {
  MetaSealCall call;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = ApplyReplicaSealLocked(segment.id, result);
    if (status.ok()) {
      call = MetaSealCallLocked(segment.id, length, replicas_.FailedServerIds());
      call.keep_lease = true;
    }
  }
  if (!status.ok()) return FailAsyncSeal(status, std::move(done));
  deps_->SealAtMeta(call, [self = shared_from_this(), segment_id = segment.id, length,
                           done = std::move(done)](absl::StatusOr<proto::Inode> inode) mutable {
    self->OnAsyncMetaSeal(segment_id, length, inode.status(), std::move(done));
  });
}

void FileWriter::OnAsyncMetaSeal(uint64_t segment_id, uint64_t length, absl::Status status,
                                 SyncCallback done) {
  {
    absl::MutexLock lock(&mu_);
    if (!status.ok()) {
      status = PosixError(EIO, absl::StrCat("meta did not record the seal: ", status.message()));
      SetErrorLocked(status);
    } else if (open_.has_value() && open_->id() == segment_id) {
      proto::Segment sealed = *open_;
      sealed.set_length(length);
      sealed.set_sealed(true);
      sealed_.push_back(std::move(sealed));
      CHECK_EQ(length, tail_.sent()) << "bytes were sent to a segment being sealed";
      tail_.EndSegment();
      open_.reset();
      replicas_ = ReplicaSet();
      sync_round_replies_ = 0;
    }
    seal_in_flight_ = false;
    EndPhaseLocked(WriterPhase::kSealing, WriterPhase::kIdle);
    UpdateBusyLocked();
  }
  done(status);
  RunFailedWaiters();
}

void FileWriter::FailAsyncSeal(absl::Status status, SyncCallback done) {
  {
    absl::MutexLock lock(&mu_);
    SetErrorLocked(status);
    seal_in_flight_ = false;
    EndPhaseLocked(WriterPhase::kSealing, WriterPhase::kIdle);
  }
  done(status);
  RunFailedWaiters();
}

absl::Status FileWriter::Close() {
  absl::Status status = CloseInternal();
  RunFailedWaiters();
  return status;
}

absl::Status FileWriter::CloseInternal() {
  CloseSeal seal;
  MetaSealCall call;
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &FileWriter::QuiescentLocked));
    if (ClosedLocked()) return absl::OkStatus();
    SetPhaseLocked(WriterPhase::kClosing);
    UpdateBusyLocked();
    seal = SealForCloseUnlocking();
    call = MetaSealCallLocked(seal.segment_id, seal.length, replicas_.FailedServerIds());
    call.close = true;
    call.mtime_ns = mtime_ns_;
    call.unchanged = seal.segment_id == 0 && seal.status.ok() && tail_.length() == opened_length_ &&
                     sealed_.size() == opened_segments_ && mtime_ns_ == opened_mtime_ns_;
  }
  absl::StatusOr<proto::Inode> inode = MetaSealAndWait(call);
  absl::MutexLock lock(&mu_);
  if (open_.has_value()) {
    proto::Segment done = *open_;
    done.set_length(seal.length);
    // Sealed only if it is: after a failed seal, lease recovery decides the
    // final length, and readers (the block cache) must not take this one
    // as final.
    done.set_sealed(seal.replicas.ok() && inode.ok());
    sealed_.push_back(std::move(done));
    open_.reset();
  }
  seal_in_flight_ = false;
  EndPhaseLocked(WriterPhase::kClosing, WriterPhase::kClosed);
  if (seal.status.ok() && !inode.ok()) return PosixError(EIO, inode.status().message());
  return seal.status;
}

FileWriter::CloseSeal FileWriter::SealForCloseUnlocking() {
  CloseSeal seal;
  seal.status = error_;
  if (!open_.has_value()) return seal;
  if (seal.status.ok()) seal.status = WaitAckedUnlocking(tail_.length());
  if (!open_.has_value()) return seal;
  // After a failure the file ends at its acked length: never more than
  // what a quorum holds; or where a failed recovery sealed the survivors
  // (on a quorum, or at the acked length then).
  seal.length = replicas_sealed_length_.value_or(std::min(tail_.sent(), tail_.acked_in_segment()));
  seal.replicas = SealOpenSegmentUnlocking(seal.length);
  if (seal.status.ok()) seal.status = seal.replicas;
  seal.segment_id = open_->id();
  return seal;
}

}  // namespace logfs::wal
