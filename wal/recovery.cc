// FileWriter: recovery from a failed replica. The survivors of the open
// segment are sealed at a length no reader can have seen past, and the
// writer rolls to a new segment (roll, not repair), re-sending there every
// byte past the seal. Runs on the recovery pool (options.run_blocking),
// never on a network thread: it makes blocking calls.
#include <glog/logging.h>

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "wal/file_writer.h"
#include "wal/writer_counters.h"

namespace logfs::wal {

void FileWriter::StartRecoveryLocked() {
  // Recovery also runs while a roll, flush or close waits for acks (they
  // re-read the open segment afterwards); only a seal already on the wire
  // handles the failure itself.
  if (phase_ == WriterPhase::kRecovering || seal_in_flight_ || !error_.ok()) return;
  resume_phase_ = phase_;
  SetPhaseLocked(WriterPhase::kRecovering);
  auto job = [self = shared_from_this()] { self->Recover(); };
  if (options_.run_blocking) {
    options_.run_blocking(std::move(job));
  } else {
    std::thread(std::move(job)).detach();
  }
}

void FileWriter::Recover() {
  GlobalWriterCounters().recoveries.fetch_add(1, std::memory_order_relaxed);
  Callbacks ready;
  std::vector<std::function<void()>> continuations;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = RollAwayUnlocking();
    recovery_seal_length_.reset();
    SetPhaseLocked(resume_phase_);
    if (!status.ok()) SetErrorLocked(status);
    // Everything before the new segment is in sealed segments, and a seal
    // past the acked length needed the ack quorum (it fdatasyncs): acked.
    // WAL appends carry no Sync round that would tell us so otherwise.
    if (status.ok() && open_.has_value()) tail_.Ack(open_->file_offset());
    UpdateBusyLocked();
    if (error_.ok()) SendBufferLocked();  // the re-sent tail, now to the new segment
    if (error_.ok()) {
      ready = TakeReadyWaitersLocked();
      if (!waiters_.empty()) RequestSyncRoundLocked();
    } else {
      error = error_;
      waiters_.TakeAll(&ready);
    }
    continuations.swap(after_recovery_);
  }
  for (auto& cb : ready) cb(error);
  RunFailedWaiters();
  for (auto& next : continuations) next();
}

absl::Status FileWriter::RollAwayUnlocking() {
  if (!open_.has_value()) return absl::OkStatus();
  const uint64_t segment_id = open_->id();
  uint64_t length = 0;
  ASSIGN_OR_RETURN(std::vector<size_t> sealed, SealSurvivorsUnlocking(&length));
  LOGFS_LOG_EVERY_MS(WARNING, 1000)
      << "sealed segment " << segment_id << " at " << length << " on " << sealed.size()
      << " replicas; re-sending " << tail_.sent() - length << " bytes";
  // Everything past the sealed length goes to the next segment, in order
  // (InstallSegmentLocked); the replicas that did not seal are dropped.
  return OpenNextSegmentUnlocking(segment_id, length, replicas_.ServerIdsNotIn(sealed));
}

absl::StatusOr<std::vector<size_t>> FileWriter::SealSurvivorsUnlocking(uint64_t* sealed_length) {
  const uint64_t segment_id = open_->id();
  const std::vector<size_t> survivors = replicas_.LiveIndexes();
  std::vector<std::string> addresses;
  for (size_t r : survivors) addresses.push_back(replicas_[r].address);
  mu_.Unlock();
  std::vector<absl::StatusOr<uint64_t>> lengths = deps_->ReplicaLengths(addresses, segment_id);
  mu_.Lock();
  const uint64_t acked_in_segment = tail_.acked_in_segment();
  uint64_t longest = acked_in_segment;
  std::vector<std::pair<size_t, uint64_t>> answered;  // replica, its length
  for (size_t i = 0; i < survivors.size(); ++i) {
    if (lengths[i].ok()) {
      answered.emplace_back(survivors[i], *lengths[i]);
      longest = std::max(longest, std::min(*lengths[i], tail_.sent()));
    } else {
      replicas_.MarkFailed(survivors[i]);
    }
  }
  // Never below the acked length (a reader may have seen those bytes).
  // Past it only when a quorum of survivors will hold the longer copy:
  // otherwise those bytes go to the next segment, whose acks would else
  // count them durable while one replica has them.
  uint64_t length = answered.size() >= replicas_.ack_quorum() ? longest : acked_in_segment;
  recovery_seal_length_ = length;
  if (answered.empty()) {
    if (acked_in_segment > 0) {
      return PosixError(EIO, absl::StrCat("no replica of segment ", segment_id,
                                          " survived with its acked bytes"));
    }
    // Nothing of the segment is acked: seal it empty, re-send the tail.
    *sealed_length = 0;
    return std::vector<size_t>{};
  }
  ReplicaSealResult result = CompleteAndSealUnlocking(answered, length);
  // Sealed replicas never take another length: whatever fails from here
  // on, a Close seals there too, never at the (shorter) acked length,
  // which they would all refuse, dropping them from the segment.
  if (!result.sealed.empty()) replicas_sealed_length_ = length;
  // Answers that came in meanwhile may have acked more (up to `length`).
  const uint64_t acked_now = tail_.acked_in_segment();
  if (result.sealed.empty()) {
    if (acked_now > 0) {
      // Every replica full at once (a seal persists a little state): the
      // acked bytes are durable, but the file cannot go on; as on a local
      // disk, that is ENOSPC.
      return PosixError(result.no_space ? ENOSPC : EIO,
                        absl::StrCat("could not seal segment ", segment_id, " on any replica"));
    }
    length = 0;
    recovery_seal_length_ = 0;  // no ack of this segment counts from now on
  } else if (result.sealed.size() < replicas_.ack_quorum() && length > acked_now) {
    return PosixError(EIO, absl::StrCat("segment ", segment_id, " sealed on ", result.sealed.size(),
                                        " replicas, fewer than its ack quorum"));
  }
  *sealed_length = length;
  return std::move(result.sealed);
}

FileWriter::ReplicaSealResult FileWriter::CompleteAndSealUnlocking(
    const std::vector<std::pair<size_t, uint64_t>>& answered, uint64_t length) {
  const SegmentRef segment{open_->id(), open_->epoch()};
  struct Fill {
    size_t replica;
    std::string address;
    uint64_t have;
    std::string missing;  // the tail's bytes [have, length)
  };
  std::vector<Fill> fills;
  ReplicaAddresses complete;
  for (auto [r, have] : answered) {
    if (have >= length) {
      complete.emplace_back(r, replicas_[r].address);
    } else if (have >= tail_.tail_start()) {
      fills.push_back({r, replicas_[r].address, have, tail_.TailBytes(have, length)});
    }
    // else: the tail no longer has what it lacks; it cannot be completed.
  }
  mu_.Unlock();
  bool fill_no_space = false;
  for (Fill& fill : fills) {
    absl::Status s = deps_->FillReplica(fill.address, segment, fill.have, std::move(fill.missing));
    if (s.ok()) {
      complete.emplace_back(fill.replica, fill.address);
      continue;
    }
    LOGFS_LOG_EVERY_MS(WARNING, 1000)
        << "could not seal segment " << segment.id << " on " << fill.address << ": " << s;
    fill_no_space |= absl::IsResourceExhausted(s) || AttachedErrno(s) == ENOSPC;
  }
  ReplicaSealResult result = SealReplicasAndWait(segment, length, std::move(complete));
  mu_.Lock();
  result.no_space |= fill_no_space;
  return result;
}

}  // namespace logfs::wal
