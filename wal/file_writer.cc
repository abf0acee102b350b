#include "wal/file_writer.h"

#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/crc32c.h"
#include "src/util/log_rate_limit.h"
#include "store/rpc/parallel_call.h"
#include "wal/writer_counters.h"

namespace logfs::wal {
namespace {

std::vector<std::string> Addresses(const proto::Segment& segment) {
  std::vector<std::string> out;
  for (const auto& r : segment.replicas()) out.push_back(r.address());
  return out;
}

// Writers of this process with bytes sent to replicas and not yet acked
// (FileWriter::busy_): zero means an append about to be sent is alone.
std::atomic<int> busy_writers{0};

}  // namespace

std::shared_ptr<FileWriter> FileWriter::Create(FileWriterOptions options, proto::Inode inode,
                                               std::shared_ptr<rpc::RpcClient> meta,
                                               rpc::ClientPool* pool) {
  return std::shared_ptr<FileWriter>(
      new FileWriter(std::move(options), std::move(inode), std::move(meta), pool));
}

FileWriter::FileWriter(FileWriterOptions options, proto::Inode inode,
                       std::shared_ptr<rpc::RpcClient> meta, rpc::ClientPool* pool)
    : options_(std::move(options)),
      ino_(inode.attr().ino()),
      kind_(inode.attr().kind()),
      meta_(std::move(meta)),
      pool_(pool) {
  uint64_t length = 0;
  for (const auto& s : inode.segments()) {
    sealed_.push_back(s);
    length += s.length();
  }
  length_ = acked_ = length;
  mtime_ns_ = inode.attr().mtime_ns();
}

FileWriter::~FileWriter() {
  absl::MutexLock lock(&mu_);
  if (busy_) busy_writers.fetch_sub(1, std::memory_order_relaxed);
}

void FileWriter::UpdateBusyLocked() {
  const bool busy = error_.ok() && !closed_ && open_.has_value() &&
                    acked_ < open_->file_offset() + sent_;
  if (busy == busy_) return;
  busy_ = busy;
  busy_writers.fetch_add(busy ? 1 : -1, std::memory_order_relaxed);
}

void FileWriter::SetMtime(int64_t mtime_ns) {
  absl::MutexLock lock(&mu_);
  mtime_ns_ = mtime_ns;
}

uint64_t FileWriter::length() const {
  absl::MutexLock lock(&mu_);
  return length_;
}

uint64_t FileWriter::acked_length() const {
  absl::MutexLock lock(&mu_);
  return acked_;
}

std::vector<proto::Segment> FileWriter::ReadableSegments() const {
  absl::MutexLock lock(&mu_);
  std::vector<proto::Segment> out = sealed_;
  if (open_.has_value()) {
    proto::Segment s = *open_;
    // Right after a roll the new segment may have nothing acked yet.
    s.set_length(acked_ > s.file_offset() ? acked_ - s.file_offset() : 0);
    out.push_back(std::move(s));
  }
  return out;
}

bool FileWriter::CanAcceptLocked() const {
  if (!error_.ok() || closed_) return true;
  return IdleLocked() && length_ - acked_ < options_.max_unacked_bytes &&
         tail_.size() < 2 * options_.max_unacked_bytes;
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
  if (!error_.ok()) return error_;
  if (closed_) return absl::FailedPreconditionError("writer is closed");
  uint64_t at = offset.value_or(length_);
  if (at != length_) {
    return PosixError(EPERM, absl::StrCat("write at offset ", at, " but the file ends at ",
                                          length_, " (logfs files are append-only)"));
  }
  if (!data.empty()) mtime_ns_ = absl::ToUnixNanos(absl::Now());
  while (!data.empty()) {
    if (!open_.has_value() || sent_ + buffer_.size() >= options_.segment_bytes) {
      sends->Flush();  // the roll waits for their answers
      RETURN_IF_ERROR(RollLocked());
    }
    uint64_t used = sent_ + buffer_.size();
    size_t room = static_cast<size_t>(options_.segment_bytes - used);
    size_t chunk = std::min(room, data.size());
    buffer_.append(data.data(), chunk);
    length_ += chunk;
    data.remove_prefix(chunk);
    if (buffer_.size() >= options_.append_bytes) SendBufferLocked(sends);
  }
  return absl::OkStatus();
}

void FileWriter::SendBufferLocked(rpc::CallBatch* sends) {
  // While a recovery rolls away from open_, new bytes wait in buffer_ and
  // go to the next segment with the re-sent tail.
  if (buffer_.empty() || !open_.has_value() || recovering_) return;
  // Bound one append to what a frame can carry.
  constexpr size_t kMaxAppendBytes = 8u << 20;
  // One buffer per append, shared by the calls to every replica: the bytes
  // are copied once more, into the re-send tail, and nowhere else.
  std::string pending;
  pending.swap(buffer_);
  absl::string_view rest = pending;
  auto self = shared_from_this();
  while (!rest.empty()) {
    size_t n = std::min(rest.size(), kMaxAppendBytes);
    auto chunk = n == pending.size() ? std::make_shared<const std::string>(std::move(pending))
                                     : std::make_shared<const std::string>(rest.substr(0, n));
    rest = n == rest.size() ? absl::string_view() : rest.substr(n);
    proto::AppendRequest request;
    request.set_segment_id(open_->id());
    request.set_epoch(open_->epoch());
    request.set_offset(sent_);
    request.set_crc32c(util::Crc32c(chunk->data(), chunk->size()));
    // WAL appends are made durable by the segment servers at once, so
    // their answers carry the acked length and fsync needs no Sync round.
    request.set_sync(EagerSync());
    ++appends_since_sync_;
    GlobalWriterCounters().appends.fetch_add(1, std::memory_order_relaxed);
    GlobalWriterCounters().append_bytes.fetch_add(n, std::memory_order_relaxed);
    sent_ += n;
    tail_ += *chunk;
    // Alone in the mount: only the first ack quorum of live replicas syncs
    // at once, the others within --sync_interval_ms (EagerSync).
    const bool eager = request.sync();
    const bool alone = eager && busy_writers.load(std::memory_order_relaxed) == 0;
    if (alone) {
      GlobalWriterCounters().quorum_synced_appends.fetch_add(1, std::memory_order_relaxed);
    }
    uint32_t eager_left = alone ? ack_quorum_ : static_cast<uint32_t>(replicas_.size());
    for (size_t r = 0; r < replicas_.size(); ++r) {
      if (replicas_[r].failed) continue;
      request.set_sync(eager && eager_left > 0);
      if (eager_left > 0) --eager_left;
      uint64_t segment_id = open_->id();
      pool_->Get(replicas_[r].address)
          ->AsyncCallShared(
              format::MessageType::kAppend, request, chunk, options_.replica_timeout,
              [self, segment_id, r](absl::Status s, format::Frame f) {
                self->OnReplicaResponse(segment_id, r, std::move(s), f.message, false);
              },
              sends);
    }
  }
  UpdateBusyLocked();
}

void FileWriter::Sync(SyncCallback done) {
  GlobalWriterCounters().syncs.fetch_add(1, std::memory_order_relaxed);
  std::vector<SyncCallback> ready;
  absl::Status error;
  rpc::CallBatch sends;  // written after mu_ is released
  {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) {
      error = error_;
    } else {
      SendBufferLocked(&sends);
      uint64_t target = length_;
      if (acked_ >= target) {
        ready.push_back(std::move(done));
      } else {
        waiters_.emplace(target, SyncWaiter{std::move(done), absl::Now()});
        ArmFsyncDeadlineLocked();
        RequestSyncRoundLocked(&sends);  // none if the appends asked for sync
      }
      appends_since_sync_ = 0;  // the application syncs: appends go eager
    }
  }
  sends.Flush();
  if (!error.ok()) {
    done(error);
    return;
  }
  for (auto& cb : ready) cb(absl::OkStatus());
}

void FileWriter::RequestSyncRoundLocked(rpc::CallBatch* sends) {
  if (EagerSync() || sync_round_replies_ != 0) return;
  StartSyncRoundLocked(sends);
}

void FileWriter::StartSyncRoundLocked(rpc::CallBatch* sends) {
  if (!open_.has_value() || recovering_) return;  // Recover() starts one after
  GlobalWriterCounters().sync_rounds.fetch_add(1, std::memory_order_relaxed);
  proto::SyncRequest request;
  request.set_segment_id(open_->id());
  request.set_epoch(open_->epoch());
  auto self = shared_from_this();
  uint64_t segment_id = open_->id();
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (replicas_[r].failed) continue;
    ++sync_round_replies_;
    pool_->Get(replicas_[r].address)
        ->AsyncCall(
            format::MessageType::kSync, request, {}, options_.replica_timeout,
            [self, segment_id, r](absl::Status s, format::Frame f) {
              self->OnReplicaResponse(segment_id, r, std::move(s), f.message, true);
            },
            sends);
  }
}

void FileWriter::OnReplicaResponse(uint64_t segment_id, size_t replica, absl::Status status,
                                   const std::string& message, bool sync_round) {
  std::vector<SyncCallback> ready;
  absl::Status error;
  rpc::CallBatch sends;  // a next sync round, written after mu_ is released
  {
    absl::MutexLock lock(&mu_);
    bool current = open_.has_value() && open_->id() == segment_id;
    if (sync_round && current) --sync_round_replies_;
    if (!current) return;  // a reply for a segment already sealed
    ReplicaState& rs = replicas_[replica];
    proto::SegmentInfoResponse info;
    if (status.ok() && !info.ParseFromString(message)) {
      status = absl::InternalError("unparseable segment info");
    }
    if (!status.ok()) {
      if (!rs.failed) {
        rs.failed = true;
        last_replica_error_ = status;
        LOGFS_LOG_EVERY_MS(WARNING, 1000)
            << "replica " << rs.address << " of segment " << segment_id
            << " failed, rolling to a new segment: " << status;
        StartRecoveryLocked();
      }
    } else {
      rs.durable_length = std::max(rs.durable_length, info.durable_length());
      std::vector<uint64_t> durable;
      for (const auto& x : replicas_) {
        if (!x.failed) durable.push_back(x.durable_length);
      }
      if (durable.size() >= ack_quorum_) {
        std::nth_element(durable.begin(), durable.begin() + (ack_quorum_ - 1), durable.end(),
                         std::greater<uint64_t>());
        acked_ = std::max(acked_, open_->file_offset() + durable[ack_quorum_ - 1]);
      }
      TrimTailLocked();
    }
    UpdateBusyLocked();
    if (error_.ok()) {
      ready = TakeReadyWaitersLocked();
      // Waiters that the last round did not cover need another round.
      if (!waiters_.empty()) RequestSyncRoundLocked(&sends);
    }
    if (!error_.ok()) {
      error = error_;
      for (auto& [target, waiter] : waiters_) ready.push_back(std::move(waiter.done));
      waiters_.clear();
    }
  }
  sends.Flush();
  for (auto& cb : ready) cb(error);
  RunFailedWaiters();
}

std::vector<FileWriter::SyncCallback> FileWriter::TakeReadyWaitersLocked() {
  std::vector<SyncCallback> ready;
  auto end = waiters_.upper_bound(acked_);
  for (auto it = waiters_.begin(); it != end; ++it) ready.push_back(std::move(it->second.done));
  waiters_.erase(waiters_.begin(), end);
  if (!ready.empty()) {
    GlobalWriterCounters().sync_groups.fetch_add(1, std::memory_order_relaxed);
    GlobalWriterCounters().synced_waiters.fetch_add(ready.size(), std::memory_order_relaxed);
  }
  return ready;
}

void FileWriter::SetErrorLocked(absl::Status status) {
  if (error_.ok()) {
    LOGFS_LOG_EVERY_MS(ERROR, 1000) << "writer of inode " << ino_ << " failed: " << status;
    error_ = std::move(status);
  }
  UpdateBusyLocked();
  for (auto& [target, waiter] : waiters_) failed_waiters_.push_back(std::move(waiter.done));
  waiters_.clear();
}

void FileWriter::RunFailedWaiters() {
  std::vector<SyncCallback> failed;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    failed.swap(failed_waiters_);
    error = error_;
  }
  for (auto& cb : failed) cb(error);
}

absl::Status FileWriter::WaitAckedLocked(uint64_t target) {
  // Also waits out a recovery, so that the caller's next step (sealing
  // open_) sees the segment that holds the bytes, not one being replaced.
  auto done = [this, target]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return (acked_ >= target && !recovering_) || !error_.ok();
  };
  SendBufferLocked();
  if (acked_ < target) {
    // A waiter of its own keeps sync rounds coming until `target` is acked.
    waiters_.emplace(target, SyncWaiter{[](absl::Status) {}, absl::Now()});
    ArmFsyncDeadlineLocked();
    RequestSyncRoundLocked();
  }
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), options_.fsync_timeout)) {
    SetErrorLocked(PosixError(EIO, absl::StrCat("no ack quorum for inode ", ino_, " within ",
                                                absl::FormatDuration(options_.fsync_timeout))));
  }
  return error_;
}

absl::Status FileWriter::SealOpenSegmentLocked(uint64_t length) {
  proto::SealRequest request;
  request.set_segment_id(open_->id());
  request.set_epoch(open_->epoch());
  request.set_length(length);
  std::vector<std::string> live;
  std::vector<size_t> index;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (!replicas_[r].failed) {
      live.push_back(replicas_[r].address);
      index.push_back(r);
    }
  }
  uint32_t quorum = ack_quorum_;
  uint64_t segment_id = open_->id();
  seal_in_flight_ = true;
  mu_.Unlock();
  auto results =
      rpc::CallEach(*pool_, live, format::MessageType::kSeal, request, options_.replica_timeout);
  mu_.Lock();
  seal_in_flight_ = false;
  uint32_t sealed = 0;
  absl::Status last;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].status.ok()) {
      ++sealed;
    } else {
      last = results[i].status;
      replicas_[index[i]].failed = true;  // meta drops it from the sealed segment
    }
  }
  if (sealed < quorum) {
    return PosixError(EIO, absl::StrCat("sealed segment ", segment_id, " on only ", sealed,
                                        " replicas: ", last.message()));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> FileWriter::FailedServerIdsLocked() const {
  std::vector<uint64_t> failed;
  for (const auto& r : replicas_) {
    if (r.failed) failed.push_back(r.server_id);
  }
  return failed;
}

void FileWriter::FillSealRequest(const std::vector<uint64_t>& failed_servers,
                                 proto::SealSegmentRequest* request) {
  for (uint64_t id : failed_servers) request->add_failed_servers(id);
  // Our view of the file, for meta's compare-and-swap after a restart.
  absl::MutexLock lock(&mu_);
  uint64_t sealed_file_length = 0;
  for (const auto& segment : sealed_) sealed_file_length += segment.length();
  request->set_sealed_file_length(sealed_file_length);
}

absl::StatusOr<proto::Inode> FileWriter::MetaSeal(uint64_t segment_id, uint64_t length,
                                                  bool close, int64_t mtime_ns,
                                                  const std::vector<uint64_t>& failed_servers) {
  proto::SealSegmentRequest request;
  request.set_ino(ino_);
  request.set_mount_id(options_.mount_id);
  request.set_segment_id(segment_id);
  request.set_sealed_length(length);
  request.set_close(close);
  request.set_mtime_ns(mtime_ns);
  FillSealRequest(failed_servers, &request);
  if (options_.next_call_id) *request.mutable_call() = options_.next_call_id();
  proto::InodeResponse response;
  // A meta that restarts is waited for (store/client/meta_retry.h): a roll or a
  // close in that window would otherwise fail the writer with EIO. The
  // call id makes a seal that meta applied before it died answered, not
  // refused, on the retry.
  RETURN_IF_ERROR(
      client::CallMeta(*meta_, format::MessageType::kSealSegment, request, &response, MetaRetry()));
  return std::move(*response.mutable_inode());
}

client::MetaRetryOptions FileWriter::MetaRetry() const {
  client::MetaRetryOptions retry;
  retry.attempt_timeout = options_.meta_timeout;
  retry.retry_window = options_.meta_retry;
  return retry;
}

std::vector<uint64_t> FileWriter::CreateReplicas(const proto::Segment& segment) {
  proto::CreateSegmentRequest request;
  request.set_segment_id(segment.id());
  request.set_epoch(segment.epoch());
  auto results = rpc::CallEach(*pool_, Addresses(segment), format::MessageType::kCreateSegment,
                               request, options_.replica_timeout);
  std::vector<uint64_t> failed;
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].status.ok()) {
      LOGFS_LOG_EVERY_MS(WARNING, 1000)
          << "cannot create segment " << segment.id() << " on "
          << segment.replicas(static_cast<int>(i)).address() << ": " << results[i].status;
      failed.push_back(segment.replicas(static_cast<int>(i)).server_id());
      absl::MutexLock lock(&mu_);
      last_replica_error_ = results[i].status;  // ENOSPC here is the writer's ENOSPC
    }
  }
  return failed;
}

absl::Status FileWriter::RollLocked() {
  rolling_ = true;
  absl::Status status = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    uint64_t sealed_id = 0;
    uint64_t sealed_length = 0;
    if (open_.has_value()) {
      // Roll only once everything in the segment is durable, so the file's
      // acked length never depends on two segments at once.
      RETURN_IF_ERROR(WaitAckedLocked(open_->file_offset() + sent_ + buffer_.size()));
      RETURN_IF_ERROR(SealOpenSegmentLocked(sent_));
      sealed_id = open_->id();
      sealed_length = sent_;
    }
    return OpenNextSegmentLocked(sealed_id, sealed_length, FailedServerIdsLocked());
  }();
  rolling_ = false;
  if (!status.ok()) SetErrorLocked(status);
  return status;
}

absl::Status FileWriter::OpenNextSegmentLocked(uint64_t sealed_id, uint64_t sealed_length,
                                               const std::vector<uint64_t>& failed_servers) {
  // A server that cannot create its replica is dropped like a failed one:
  // the empty segment is sealed and another placed elsewhere (bounded).
  constexpr int kPlacementAttempts = 3;
  std::vector<uint64_t> excluded = failed_servers;
  uint64_t seal_id = sealed_id;
  uint64_t seal_length = sealed_length;
  absl::StatusOr<proto::Inode> inode;
  mu_.Unlock();
  for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
    inode = MetaSeal(seal_id, seal_length, /*close=*/false, 0, excluded);
    if (!inode.ok() || inode->segments_size() == 0 || inode->segments().rbegin()[0].sealed()) {
      break;
    }
    std::vector<uint64_t> failed = CreateReplicas(inode->segments().rbegin()[0]);
    if (failed.empty()) break;
    excluded.insert(excluded.end(), failed.begin(), failed.end());
    seal_id = inode->segments().rbegin()[0].id();
    seal_length = 0;
    if (attempt + 1 == kPlacementAttempts) {
      inode = PosixError(EIO, absl::StrCat("could not create a replica set for inode ", ino_));
    }
  }
  mu_.Lock();
  if (!inode.ok()) {
    // Out of space (meta has no server with room, or the replicas we roll
    // away from were full) is ENOSPC, as on a local disk; the rest is EIO.
    bool no_space = ErrnoFromStatus(inode.status()) == ENOSPC ||
                    absl::IsResourceExhausted(last_replica_error_);
    // A file at its segment limit (store/format/limits.h) is too large, as on a
    // local disk past the file size limit.
    if (ErrnoFromStatus(inode.status()) == EFBIG) return inode.status();
    return PosixError(no_space ? ENOSPC : EIO, inode.status().message());
  }
  if (inode->segments_size() == 0 || inode->segments().rbegin()[0].sealed()) {
    return absl::InternalError("meta returned no open segment");
  }
  // Meta's list is the truth for every sealed segment (failed replicas
  // dropped, empty segments of failed placements included).
  sealed_.assign(inode->segments().begin(), inode->segments().end() - 1);
  uint64_t file_offset = 0;
  for (const auto& segment : sealed_) file_offset += segment.length();
  open_ = inode->segments().rbegin()[0];
  open_->set_file_offset(file_offset);
  replicas_.clear();
  for (const auto& r : open_->replicas()) {
    replicas_.push_back({r.server_id(), r.address(), 0, false});
  }
  ack_quorum_ = std::max<uint32_t>(1, open_->ack_quorum() != 0 ? open_->ack_quorum()
                                                              : inode->ack_quorum());
  sent_ = 0;
  sync_round_replies_ = 0;  // replies of the old segment's round are ignored
  tail_.clear();
  tail_start_ = 0;
  return absl::OkStatus();
}

void FileWriter::TrimTailLocked() {
  // Keep every byte that is not yet both acked and durable on every live
  // replica: a roll may seal at the acked length and re-send the rest.
  uint64_t acked_in_segment = acked_ > open_->file_offset() ? acked_ - open_->file_offset() : 0;
  uint64_t everywhere = std::min(sent_, acked_in_segment);
  for (const auto& r : replicas_) {
    if (!r.failed) everywhere = std::min(everywhere, r.durable_length);
  }
  if (everywhere > tail_start_) {
    tail_.erase(0, static_cast<size_t>(everywhere - tail_start_));
    tail_start_ = everywhere;
  }
}

void FileWriter::StartRecoveryLocked() {
  // Recovery also runs while a roll, flush or close waits for acks (they
  // re-read the open segment afterwards); only a seal already on the wire
  // handles the failure itself.
  if (recovering_ || seal_in_flight_ || !error_.ok()) return;
  recovering_ = true;
  // Recovery makes blocking calls; it must not run on a network thread.
  auto job = [self = shared_from_this()] { self->Recover(); };
  if (options_.run_blocking) {
    options_.run_blocking(std::move(job));
  } else {
    std::thread(std::move(job)).detach();
  }
}

void FileWriter::Recover() {
  std::vector<SyncCallback> ready;
  std::vector<std::function<void()>> continuations;
  absl::Status error;
  {
    absl::MutexLock lock(&mu_);
    absl::Status status = RollAwayFromFailedReplicasLocked();
    recovering_ = false;
    if (!status.ok()) SetErrorLocked(status);
    // Everything before the new segment is in sealed segments, and a seal
    // past the acked length needed the ack quorum (it fdatasyncs): acked.
    // WAL appends carry no Sync round that would tell us so otherwise.
    if (status.ok() && open_.has_value()) acked_ = std::max(acked_, open_->file_offset());
    UpdateBusyLocked();
    if (error_.ok()) SendBufferLocked();  // the re-sent tail, now to the new segment
    if (error_.ok()) {
      ready = TakeReadyWaitersLocked();
      if (!waiters_.empty()) RequestSyncRoundLocked();
    } else {
      error = error_;
      for (auto& [target, waiter] : waiters_) ready.push_back(std::move(waiter.done));
      waiters_.clear();
    }
    continuations.swap(after_recovery_);
  }
  for (auto& cb : ready) cb(error);
  RunFailedWaiters();
  for (auto& next : continuations) next();
}

absl::StatusOr<std::vector<size_t>> FileWriter::SealSurvivorsLocked(uint64_t* sealed_length) {
  const proto::Segment segment = *open_;
  std::vector<size_t> survivors;
  std::vector<std::string> addresses;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (!replicas_[r].failed) {
      survivors.push_back(r);
      addresses.push_back(replicas_[r].address);
    }
  }
  proto::SegmentInfoRequest info_request;
  info_request.set_segment_id(segment.id());
  mu_.Unlock();
  auto infos = rpc::CallEach(*pool_, addresses, format::MessageType::kSegmentInfo, info_request,
                             options_.replica_timeout);
  mu_.Lock();
  const uint64_t acked_in_segment =
      acked_ > segment.file_offset() ? acked_ - segment.file_offset() : 0;
  uint64_t longest = acked_in_segment;
  std::vector<std::pair<size_t, uint64_t>> answered;
  for (size_t i = 0; i < survivors.size(); ++i) {
    proto::SegmentInfoResponse info;
    if (infos[i].status.ok() && info.ParseFromString(infos[i].response.message)) {
      answered.emplace_back(survivors[i], info.length());
      longest = std::max(longest, std::min(info.length(), sent_));
    } else {
      replicas_[survivors[i]].failed = true;
    }
  }
  // Never below the acked length (a reader may have seen those bytes).
  // Past it only when a quorum of survivors will hold the longer copy:
  // otherwise those bytes go to the next segment, whose acks would else
  // count them durable while one replica has them.
  uint64_t length = answered.size() >= ack_quorum_ ? longest : acked_in_segment;
  if (answered.empty()) {
    if (acked_in_segment > 0) {
      return PosixError(EIO, absl::StrCat("no replica of segment ", segment.id(),
                                          " survived with its acked bytes"));
    }
    // Nothing of the segment is acked: seal it empty, re-send the tail.
    *sealed_length = 0;
    return std::vector<size_t>{};
  }
  // Bring shorter survivors up to `length` from the tail, then seal all.
  std::vector<size_t> sealed;
  bool seal_no_space = false;
  for (auto [r, have] : answered) {
    std::string address = replicas_[r].address;
    std::string missing;
    if (have < length) {
      if (have < tail_start_) continue;  // cannot be completed: drop it
      missing = tail_.substr(static_cast<size_t>(have - tail_start_),
                             static_cast<size_t>(length - have));
    }
    mu_.Unlock();
    absl::Status s;
    if (!missing.empty()) {
      proto::AppendRequest append;
      append.set_segment_id(segment.id());
      append.set_epoch(segment.epoch());
      append.set_offset(have);
      append.set_sync(true);
      append.set_crc32c(util::Crc32c(missing.data(), missing.size()));
      proto::SegmentInfoResponse ignored;
      s = pool_->Get(address)->Call(format::MessageType::kAppend, append, &ignored,
                                    options_.replica_timeout, std::move(missing));
    }
    if (s.ok()) {
      proto::SealRequest seal;
      seal.set_segment_id(segment.id());
      seal.set_epoch(segment.epoch());
      seal.set_length(length);
      proto::SegmentInfoResponse ignored;
      s = pool_->Get(address)->Call(format::MessageType::kSeal, seal, &ignored,
                                    options_.replica_timeout);
    }
    mu_.Lock();
    if (s.ok()) {
      sealed.push_back(r);
    } else {
      LOGFS_LOG_EVERY_MS(WARNING, 1000)
          << "could not seal segment " << segment.id() << " on " << address << ": " << s;
      if (absl::IsResourceExhausted(s) || ErrnoFromStatus(s) == ENOSPC) seal_no_space = true;
    }
  }
  if (sealed.empty()) {
    if (acked_in_segment > 0) {
      // Every replica full at once (a seal persists a little state): the
      // acked bytes are durable, but the file cannot go on; as on a local
      // disk, that is ENOSPC.
      return PosixError(seal_no_space ? ENOSPC : EIO,
                        absl::StrCat("could not seal segment ", segment.id(), " on any replica"));
    }
    length = 0;
  } else if (sealed.size() < ack_quorum_ && length > acked_in_segment) {
    return PosixError(EIO, absl::StrCat("segment ", segment.id(), " sealed on ", sealed.size(),
                                        " replicas, fewer than its ack quorum"));
  }
  *sealed_length = length;
  return sealed;
}

absl::Status FileWriter::RollAwayFromFailedReplicasLocked() {
  if (!open_.has_value()) return absl::OkStatus();
  const uint64_t segment_id = open_->id();
  uint64_t length = 0;
  ASSIGN_OR_RETURN(std::vector<size_t> sealed, SealSurvivorsLocked(&length));
  std::vector<uint64_t> failed_servers;
  for (size_t r = 0; r < replicas_.size(); ++r) {
    if (std::find(sealed.begin(), sealed.end(), r) == sealed.end()) {
      failed_servers.push_back(replicas_[r].server_id);
    }
  }
  // Everything past the sealed length goes to the next segment, in order.
  CHECK_GE(length, tail_start_) << "the tail lost bytes the roll must re-send";
  std::string resend = tail_.substr(static_cast<size_t>(length - tail_start_));
  std::string unsent = std::move(buffer_);
  buffer_.clear();
  LOGFS_LOG_EVERY_MS(WARNING, 1000)
      << "sealed segment " << segment_id << " at " << length << " on " << sealed.size()
      << " replicas; re-sending " << resend.size() << " bytes";
  RETURN_IF_ERROR(OpenNextSegmentLocked(segment_id, length, failed_servers));
  // Sent by Recover() once recovering_ is clear.
  buffer_ = std::move(resend);
  buffer_ += unsent;
  return absl::OkStatus();
}

absl::Status FileWriter::Close() {
  absl::Status status = CloseInternal();
  RunFailedWaiters();
  return status;
}

absl::Status FileWriter::CloseInternal() {
  absl::MutexLock lock(&mu_);
  auto not_rolling = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return IdleLocked(); };
  mu_.Await(absl::Condition(&not_rolling));
  if (closed_) return absl::OkStatus();
  closed_ = true;
  UpdateBusyLocked();
  absl::Status status = error_;
  uint64_t segment_id = 0;
  uint64_t length = 0;
  absl::Status sealed;
  if (open_.has_value()) {
    if (status.ok()) status = WaitAckedLocked(length_);
    // After a failure the file ends at its acked length: never more than
    // what a quorum holds.
    length = std::min(sent_, acked_ > open_->file_offset() ? acked_ - open_->file_offset() : 0);
    sealed = SealOpenSegmentLocked(length);
    if (status.ok()) status = sealed;
    segment_id = open_->id();
  }
  int64_t mtime_ns = mtime_ns_;
  std::vector<uint64_t> failed = FailedServerIdsLocked();
  mu_.Unlock();
  auto inode = MetaSeal(segment_id, length, /*close=*/true, mtime_ns, failed);
  mu_.Lock();
  if (open_.has_value()) {
    proto::Segment done = *open_;
    done.set_length(length);
    // Sealed only if it is: after a failed seal, lease recovery decides the
    // final length, and readers (the block cache) must not take this one
    // as final.
    done.set_sealed(sealed.ok() && inode.ok());
    sealed_.push_back(std::move(done));
    open_.reset();
  }
  if (status.ok() && !inode.ok()) status = PosixError(EIO, inode.status().message());
  return status;
}

}  // namespace logfs::wal

namespace logfs::wal {

void FileWriter::SealAsync(SyncCallback done) {
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return IdleLocked(); };
    mu_.Await(absl::Condition(&idle));
    if (error_.ok() && open_.has_value() && !closed_) {
      sealing_ = true;
    }
  }
  // Sync first; the seal step runs from the sync's completion.
  auto self = shared_from_this();
  Sync([self, done = std::move(done)](absl::Status s) mutable {
    bool sealing;
    {
      absl::MutexLock lock(&self->mu_);
      sealing = self->sealing_;
    }
    if (!sealing) {
      done(s);
      return;
    }
    if (!s.ok()) {
      self->FinishSealAsync(0, 0, s, {}, std::move(done));
      return;
    }
    self->SealReplicasAsync(std::move(done));
  });
}

void FileWriter::SealReplicasAsync(SyncCallback done) {
  proto::SealRequest request;
  std::vector<std::pair<std::string, uint64_t>> live;  // address, server id
  std::vector<uint64_t> failed;
  uint32_t quorum = 0;
  enum class Next { kSeal, kFailed, kNothingOpen } next = Next::kSeal;
  {
    absl::MutexLock lock(&mu_);
    if (recovering_) {
      // A replica failed after the sync: once the roll is done the bytes
      // are durable on the next segment; seal that one. (Waiting with a
      // Sync would not do: the bytes may be acked already, and the sync
      // would call back at once, again and again.)
      after_recovery_.push_back([self = shared_from_this(), done = std::move(done)]() mutable {
        self->SealReplicasAsync(std::move(done));
      });
      return;
    }
    if (!error_.ok()) {
      next = Next::kFailed;
    } else if (!open_.has_value()) {
      next = Next::kNothingOpen;
      sealing_ = false;
    } else {
      request.set_segment_id(open_->id());
      request.set_epoch(open_->epoch());
      request.set_length(sent_);
      for (const auto& r : replicas_) {
        if (r.failed) {
          failed.push_back(r.server_id);
        } else {
          live.emplace_back(r.address, r.server_id);
        }
      }
      quorum = ack_quorum_;
      seal_in_flight_ = true;  // cleared in FinishSealAsync
    }
  }
  if (next == Next::kNothingOpen) {
    done(absl::OkStatus());
    return;
  }
  if (next == Next::kFailed) {
    absl::Status error;
    {
      absl::MutexLock lock(&mu_);
      error = error_;
    }
    FinishSealAsync(0, 0, error, {}, std::move(done));
    return;
  }
  if (live.size() < quorum) {
    FinishSealAsync(0, 0, PosixError(EIO, "too few live replicas to seal"), {},
                    std::move(done));
    return;
  }
  struct Round {
    absl::Mutex mu;
    size_t pending = 0;
    uint32_t sealed = 0;
    absl::Status last;
    std::vector<uint64_t> failed;  // replicas meta must drop
  };
  auto round = std::make_shared<Round>();
  round->pending = live.size();
  round->failed = std::move(failed);
  auto self = shared_from_this();
  auto shared_done = std::make_shared<SyncCallback>(std::move(done));
  for (const auto& [address, server_id] : live) {
    pool_->Get(address)->AsyncCall(
        format::MessageType::kSeal, request, {}, options_.replica_timeout,
        [self, round, request, quorum, shared_done, server_id = server_id](absl::Status s,
                                                                           format::Frame) {
          bool last;
          {
            absl::MutexLock lock(&round->mu);
            if (s.ok()) {
              ++round->sealed;
            } else {
              round->last = s;
              round->failed.push_back(server_id);
            }
            last = --round->pending == 0;
          }
          if (!last) return;
          absl::Status status;
          if (round->sealed < quorum) {
            status = PosixError(EIO, absl::StrCat("sealed segment ", request.segment_id(),
                                                  " on only ", round->sealed,
                                                  " replicas: ", round->last.message()));
          }
          self->FinishSealAsync(request.segment_id(), request.length(), status, round->failed,
                                std::move(*shared_done));
        });
  }
}

void FileWriter::FinishSealAsync(uint64_t segment_id, uint64_t length, absl::Status status,
                                 std::vector<uint64_t> failed_servers, SyncCallback done) {
  if (!status.ok()) {
    {
      absl::MutexLock lock(&mu_);
      SetErrorLocked(status);
      sealing_ = false;
      seal_in_flight_ = false;
    }
    done(status);
    RunFailedWaiters();
    return;
  }
  proto::SealSegmentRequest request;
  request.set_ino(ino_);
  request.set_mount_id(options_.mount_id);
  request.set_segment_id(segment_id);
  request.set_sealed_length(length);
  request.set_keep_lease(true);
  FillSealRequest(failed_servers, &request);
  if (options_.next_call_id) *request.mutable_call() = options_.next_call_id();
  auto self = shared_from_this();
  client::AsyncCallMeta(
      pool_->io(), meta_, format::MessageType::kSealSegment, request, MetaRetry(),
      [self, segment_id, length, done = std::move(done)](absl::Status s, format::Frame) {
        {
          absl::MutexLock lock(&self->mu_);
          if (s.ok() && self->open_.has_value() && self->open_->id() == segment_id) {
            proto::Segment sealed = *self->open_;
            sealed.set_length(length);
            sealed.set_sealed(true);
            self->sealed_.push_back(std::move(sealed));
            self->open_.reset();
            self->replicas_.clear();
            self->sent_ = 0;
            self->sync_round_replies_ = 0;
            self->tail_.clear();
            self->tail_start_ = 0;
          } else if (!s.ok()) {
            s = PosixError(EIO, absl::StrCat("meta did not record the seal: ", s.message()));
            self->SetErrorLocked(s);
          }
          self->sealing_ = false;
          self->seal_in_flight_ = false;
        }
        done(s);
        self->RunFailedWaiters();
      });
}

}  // namespace logfs::wal

namespace logfs::wal {

absl::Status FileWriter::TruncateToZero() {
  std::vector<SyncCallback> discarded;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return IdleLocked(); };
    mu_.Await(absl::Condition(&idle));
    if (!error_.ok()) return error_;
    if (closed_) return absl::FailedPreconditionError("writer is closed");
    rolling_ = true;  // writes wait until the file is empty
    // Replies for the dropped segment are ignored from here on.
    open_.reset();
    replicas_.clear();
    sealed_.clear();
    buffer_.clear();
    tail_.clear();
    tail_start_ = 0;
    sent_ = 0;
    sync_round_replies_ = 0;
    length_ = 0;
    acked_ = 0;
    UpdateBusyLocked();
    for (auto& [target, waiter] : waiters_) discarded.push_back(std::move(waiter.done));
    waiters_.clear();
    mu_.Unlock();
    proto::SetAttrRequest request;
    request.set_ino(ino_);
    request.set_mount_id(options_.mount_id);
    request.set_to_set(1 << 3);  // FUSE_SET_ATTR_SIZE
    request.set_size(0);
    if (options_.next_call_id) *request.mutable_call() = options_.next_call_id();
    proto::AttrResponse response;
    status =
        client::CallMeta(*meta_, format::MessageType::kSetAttr, request, &response, MetaRetry());
    mu_.Lock();
    rolling_ = false;
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

namespace logfs::wal {

void FileWriter::ArmFsyncDeadlineLocked() {
  if (fsync_timer_armed_) return;
  if (fsync_timer_ == nullptr) fsync_timer_ = std::make_unique<asio::steady_timer>(pool_->io());
  fsync_timer_armed_ = true;
  // Checked at a tenth of the timeout: a sync fails at most 10% late.
  auto period = std::chrono::milliseconds(
      std::max<int64_t>(10, absl::ToInt64Milliseconds(options_.fsync_timeout) / 10));
  fsync_timer_->expires_after(period);
  fsync_timer_->async_wait([self = shared_from_this()](asio::error_code) {
    self->OnFsyncDeadline();
  });
}

void FileWriter::OnFsyncDeadline() {
  {
    absl::MutexLock lock(&mu_);
    fsync_timer_armed_ = false;
    if (waiters_.empty()) return;
    absl::Time oldest = absl::InfiniteFuture();
    for (const auto& [target, waiter] : waiters_) oldest = std::min(oldest, waiter.since);
    if (absl::Now() - oldest > options_.fsync_timeout) {
      // Never return 0 on hope (DESIGN §4): the descriptor is poisoned.
      SetErrorLocked(PosixError(EIO, absl::StrCat("no ack quorum for inode ", ino_, " within ",
                                                  absl::FormatDuration(options_.fsync_timeout))));
    } else {
      ArmFsyncDeadlineLocked();
    }
  }
  RunFailedWaiters();
}

}  // namespace logfs::wal
