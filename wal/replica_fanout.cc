// FileWriter: the fan-out of appends and sync rounds to the replicas of the
// open segment, and their answers, which move the acked length.
#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/status/posix_error.h"
#include "src/util/crc32c.h"
#include "src/util/log_rate_limit.h"
#include "store/format/limits.h"
#include "wal/file_writer.h"
#include "wal/internal/busy_writers.h"
#include "wal/writer_counters.h"

namespace logfs::wal {

void FileWriter::SendBufferLocked(rpc::CallBatch* sends) {
  // While a recovery rolls away from open_, new bytes wait in the buffer
  // and go to the next segment with the re-sent tail.
  if (tail_.buffered() == 0 || !open_.has_value() || phase_ == WriterPhase::kRecovering) return;
  // One buffer per append, shared by the calls to every replica: the bytes
  // are copied once more, into the re-send tail, and nowhere else.
  std::string pending = tail_.TakeBuffered();
  absl::string_view rest = pending;
  const std::shared_ptr<ReplicaReplyHandler> self = shared_from_this();
  AppendCall call;
  call.segment = {open_->id(), open_->epoch()};
  while (!rest.empty()) {
    const size_t n = std::min<size_t>(rest.size(), format::kAppendBytesMax);
    auto chunk = n == pending.size() ? std::make_shared<const std::string>(std::move(pending))
                                     : std::make_shared<const std::string>(rest.substr(0, n));
    rest = n == rest.size() ? absl::string_view() : rest.substr(n);
    call.offset = tail_.MarkSent(*chunk);
    call.crc32c = util::Crc32c(chunk->data(), chunk->size());
    // WAL appends are made durable by the segment servers at once, so
    // their answers carry the acked length and fsync needs no Sync round.
    const bool eager = EagerSync();
    ++appends_since_sync_;
    GlobalWriterCounters().appends.fetch_add(1, std::memory_order_relaxed);
    GlobalWriterCounters().append_bytes.fetch_add(n, std::memory_order_relaxed);
    // Alone in the mount: only the first ack quorum of live replicas syncs
    // at once, the others within --sync_interval_ms (EagerSync).
    const bool alone = eager && internal::busy_writers.load(std::memory_order_relaxed) == 0;
    if (alone) {
      GlobalWriterCounters().quorum_synced_appends.fetch_add(1, std::memory_order_relaxed);
    }
    uint32_t eager_left = alone ? replicas_.ack_quorum() : static_cast<uint32_t>(replicas_.size());
    for (size_t r = 0; r < replicas_.size(); ++r) {
      if (replicas_[r].failed) continue;
      call.replica = r;
      call.sync = eager && eager_left > 0;
      if (eager_left > 0) --eager_left;
      deps_->Append(replicas_[r].address, call, chunk, self, sends);
    }
  }
  UpdateBusyLocked();
}

void FileWriter::RequestSyncRoundLocked(rpc::CallBatch* sends) {
  if (EagerSync() || sync_round_replies_ != 0) return;
  StartSyncRoundLocked(sends);
}

void FileWriter::StartSyncRoundLocked(rpc::CallBatch* sends) {
  // Recover() starts one after the roll.
  if (!open_.has_value() || phase_ == WriterPhase::kRecovering) return;
  GlobalWriterCounters().sync_rounds.fetch_add(1, std::memory_order_relaxed);
  const std::shared_ptr<ReplicaReplyHandler> self = shared_from_this();
  const SegmentRef segment{open_->id(), open_->epoch()};
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (replicas_[r].failed) continue;
    ++sync_round_replies_;
    deps_->SyncReplica(replicas_[r].address, segment, r, self, sends);
  }
}

void FileWriter::OnReplicaReply(uint64_t segment_id, size_t replica, bool sync_round,
                                absl::StatusOr<uint64_t> durable_length) {
  Callbacks ready;
  absl::Status error;
  rpc::CallBatch sends;  // a next sync round, written after mu_ is released
  {
    absl::MutexLock lock(&mu_);
    const bool current = open_.has_value() && open_->id() == segment_id;
    if (sync_round && current) --sync_round_replies_;
    if (!current) return;  // a reply for a segment already sealed
    if (durable_length.ok() && *durable_length > tail_.sent()) {
      durable_length = absl::InternalError(absl::StrCat(
          "replica reports ", *durable_length, " bytes durable, of ", tail_.sent(), " sent"));
    }
    if (!durable_length.ok()) {
      if (replicas_.MarkFailed(replica)) {
        last_replica_error_ = durable_length.status();
        LOGFS_LOG_EVERY_MS(WARNING, 1000)
            << "replica " << replicas_[replica].address << " of segment " << segment_id
            << " failed, rolling to a new segment: " << durable_length.status();
        StartRecoveryLocked();
      }
    } else {
      // Once a recovery has picked the length it seals this segment at,
      // bytes past it are cut and re-sent to the next segment: an ack of
      // them here would count bytes that are not going to stay.
      const uint64_t cap = recovery_seal_length_.value_or(*durable_length);
      OnDurableLocked(replica, std::min(*durable_length, cap));
    }
    UpdateBusyLocked();
    if (error_.ok()) {
      ready = TakeReadyWaitersLocked();
      // Waiters that the last round did not cover need another round.
      if (!waiters_.empty()) RequestSyncRoundLocked(&sends);
    } else {
      error = error_;
      waiters_.TakeAll(&ready);
    }
  }
  sends.Flush();
  for (auto& cb : ready) cb(error);
  RunFailedWaiters();
}

void FileWriter::OnDurableLocked(size_t replica, uint64_t durable_length) {
  replicas_.SetDurable(replica, durable_length);
  const bool watch = options_.slow_replica.slow_lag > absl::ZeroDuration();
  const absl::Time now = watch ? deps_->Now() : absl::Time();
  if (watch) lag_.OnDurable(replica, durable_length, now);
  if (std::optional<uint64_t> acked = replicas_.AckedLength(); acked.has_value()) {
    if (watch && *acked > tail_.acked_in_segment()) lag_.OnQuorumAcked(*acked, now, replicas_);
    tail_.Ack(tail_.segment_start() + *acked);
  }
  // Keep every byte that is not yet both acked and durable on every live
  // replica: a roll may seal at the acked length and re-send the rest.
  tail_.Trim(replicas_.DurableOnAllLive(tail_.sent()));
  if (watch) NoteSlowReplicaLocked();
}

void FileWriter::NoteSlowReplicaLocked() {
  const std::optional<size_t> slow = lag_.slow();
  if (!slow.has_value() || slow_roll_segment_ == open_->id() || replicas_[*slow].failed) return;
  const uint64_t server = replicas_[*slow].server_id;
  const absl::Time now = deps_->Now();
  for (auto it = slow_rolled_at_.begin(); it != slow_rolled_at_.end();) {
    it = now - it->second >= options_.slow_roll_backoff ? slow_rolled_at_.erase(it) : ++it;
  }
  if (!slow_rolled_at_.emplace(server, now).second) return;  // rolled away from it just now
  slow_roll_segment_ = open_->id();
  slow_replica_ = *slow;
  // Every later placement avoids it, a roll for another reason included.
  slow_servers_->Add(replicas_[*slow].server_id, deps_->Now() + options_.avoid_slow_server_for);
}

absl::Status FileWriter::WaitAckedUnlocking(uint64_t target) {
  // Also waits out a recovery, so that the caller's next step (sealing
  // open_) sees the segment that holds the bytes, not one being replaced.
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (tail_.acked() >= target && phase_ != WriterPhase::kRecovering) || !error_.ok();
  };
  SendBufferLocked();
  if (tail_.acked() < target) {
    // A waiter of its own keeps sync rounds coming until `target` is acked.
    waiters_.Add(target, deps_->Now(), [](absl::Status) {});
    ArmFsyncDeadlineLocked();
    RequestSyncRoundLocked();
  }
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), options_.fsync_timeout)) {
    SetErrorLocked(NoQuorumInTimeError());
  }
  return error_;
}

}  // namespace logfs::wal
