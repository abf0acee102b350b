// FileWriter: opening the next segment (a roll when the open one is full,
// the first segment of a write, and the end of a recovery).
#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"
#include "wal/file_writer.h"
#include "wal/writer_counters.h"

namespace logfs::wal {

absl::Status FileWriter::RollUnlocking() {
  GlobalWriterCounters().rolls.fetch_add(1, std::memory_order_relaxed);
  SetPhaseLocked(WriterPhase::kRolling);
  absl::Status status = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    uint64_t sealed_id = 0;
    uint64_t sealed_length = 0;
    if (open_.has_value()) {
      if (SlowRollDueLocked()) CountSlowRollLocked();
      // Roll only once everything in the segment is durable, so the file's
      // acked length never depends on two segments at once.
      RETURN_IF_ERROR(WaitAckedUnlocking(tail_.length()));
      RETURN_IF_ERROR(SealOpenSegmentUnlocking(tail_.sent()));
      sealed_id = open_->id();
      sealed_length = tail_.sent();
    }
    return OpenNextSegmentUnlocking(sealed_id, sealed_length, replicas_.FailedServerIds());
  }();
  seal_in_flight_ = false;
  EndPhaseLocked(WriterPhase::kRolling, WriterPhase::kIdle);
  if (!status.ok()) SetErrorLocked(status);
  return status;
}

void FileWriter::CountSlowRollLocked() {
  GlobalWriterCounters().slow_replica_rolls.fetch_add(1, std::memory_order_relaxed);
  const ReplicaSet::Replica& slow = replicas_[slow_replica_];
  LOGFS_LOG_EVERY_MS(WARNING, 1000)
      << "replica of segment " << open_->id() << " on server " << slow.server_id << " ("
      << slow.address << ") trails the ack quorum (worst lag "
      << absl::FormatDuration(lag_.worst_lag(slow_replica_)) << ", "
      << options_.slow_replica.slow_samples << " over "
      << absl::FormatDuration(options_.slow_replica.slow_lag) << " within "
      << absl::FormatDuration(options_.slow_replica.window)
      << "): rolling to a new segment away from it";
}

absl::Status FileWriter::OpenNextSegmentUnlocking(uint64_t sealed_id, uint64_t sealed_length,
                                                  const std::vector<uint64_t>& failed_servers) {
  MetaSealCall call = MetaSealCallLocked(sealed_id, sealed_length, failed_servers);
  // Nothing open, all acked: the file's last segment may go on (a WAL file
  // reopened for append).
  if (sealed_id == 0 && kind_ == proto::KIND_WAL && tail_.sent() == 0 &&
      tail_.acked() == tail_.segment_start()) {
    call.continue_below_bytes = options_.continue_below_bytes;
  }
  mu_.Unlock();
  absl::StatusOr<proto::Inode> inode = PlaceNextSegment(std::move(call));
  mu_.Lock();
  if (!inode.ok()) {
    // Out of space (meta has no server with room, or the replicas we roll
    // away from were full) is ENOSPC, as on a local disk; the rest is EIO.
    const bool no_space = AttachedErrno(inode.status()) == ENOSPC ||
                          absl::IsResourceExhausted(inode.status()) ||
                          absl::IsResourceExhausted(last_replica_error_);
    // A file at its segment limit (store/format/limits.h) is too large, as
    // on a local disk past the file size limit.
    if (AttachedErrno(inode.status()) == EFBIG) return inode.status();
    return PosixError(no_space ? ENOSPC : EIO, inode.status().message());
  }
  return InstallSegmentLocked(*inode, sealed_length);
}

absl::StatusOr<proto::Inode> FileWriter::PlaceNextSegment(MetaSealCall call) {
  // A server that cannot create its replica is dropped like a failed one:
  // the empty segment is sealed and another placed elsewhere (bounded).
  constexpr int kPlacementAttempts = 3;
  absl::StatusOr<proto::Inode> inode;
  for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
    inode = MetaSealAndWait(call);
    if (!inode.ok() || inode->segments_size() == 0 || inode->segments().rbegin()[0].sealed()) {
      break;
    }
    const proto::Segment& placed = inode->segments().rbegin()[0];
    if (placed.length() > 0) {
      // Meta continued the last segment: every replica must reopen, or it
      // is sealed back where it was and a new segment placed (its servers
      // avoided by it, their replicas of the old one kept).
      const ReopenResult reopen = ReopenReplicas(placed);
      if (reopen.refused.empty()) break;
      {
        absl::MutexLock lock(&mu_);
        call = MetaSealCallLocked(placed.id(), placed.length(), reopen.not_sealed_back);
      }
      call.sealed_file_length = placed.file_offset();  // meta's view: that one is open now
      call.avoid_servers.insert(call.avoid_servers.end(), reopen.refused.begin(),
                                reopen.refused.end());
      continue;
    }
    std::vector<uint64_t> failed = CreateReplicas(placed);
    if (failed.empty()) break;
    call.failed_servers.insert(call.failed_servers.end(), failed.begin(), failed.end());
    call.segment_id = inode->segments().rbegin()[0].id();
    call.sealed_length = 0;
    if (options_.next_call_id) call.call = options_.next_call_id();
    if (attempt + 1 == kPlacementAttempts) {
      inode = PosixError(EIO, absl::StrCat("could not create a replica set for inode ", ino_));
    }
  }
  return inode;
}

FileWriter::ReopenResult FileWriter::ReopenReplicas(const proto::Segment& segment) {
  std::vector<std::string> addresses;
  for (const auto& r : segment.replicas()) addresses.push_back(r.address());
  const SegmentRef ref{segment.id(), segment.epoch()};
  std::vector<absl::Status> results = deps_->ReopenReplicas(addresses, ref, segment.length());
  ReopenResult out;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    LOGFS_LOG_EVERY_MS(WARNING, 1000) << "cannot continue segment " << segment.id() << " on "
                                      << addresses[i] << ": " << results[i];
    out.refused.push_back(segment.replicas(static_cast<int>(i)).server_id());
  }
  if (out.refused.empty()) return out;
  // Sealed back at its length everywhere (a no-op where it did not reopen:
  // sealed there at that length already; a reopen that timed out may yet
  // have happened), so every replica agrees again; one that does not
  // take the seal is dropped from the segment.
  ReplicaAddresses all;
  for (size_t i = 0; i < addresses.size(); ++i) all.emplace_back(i, addresses[i]);
  const ReplicaSealResult sealed = SealReplicasAndWait(ref, segment.length(), std::move(all));
  for (size_t i : sealed.failed) {
    out.not_sealed_back.push_back(segment.replicas(static_cast<int>(i)).server_id());
  }
  return out;
}

std::vector<uint64_t> FileWriter::CreateReplicas(const proto::Segment& segment) {
  std::vector<std::string> addresses;
  for (const auto& r : segment.replicas()) addresses.push_back(r.address());
  std::vector<absl::Status> results =
      deps_->CreateReplicas(addresses, {segment.id(), segment.epoch()});
  std::vector<uint64_t> failed;
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].ok()) continue;
    const proto::Replica& replica = segment.replicas(static_cast<int>(i));
    LOGFS_LOG_EVERY_MS(WARNING, 1000) << "cannot create segment " << segment.id() << " on "
                                      << replica.address() << ": " << results[i];
    failed.push_back(replica.server_id());
    absl::MutexLock lock(&mu_);
    last_replica_error_ = results[i];  // ENOSPC here is the writer's ENOSPC
  }
  return failed;
}

absl::Status FileWriter::InstallSegmentLocked(const proto::Inode& inode, uint64_t sealed_length) {
  if (inode.segments_size() == 0 || inode.segments().rbegin()[0].sealed()) {
    return absl::InternalError("meta returned no open segment");
  }
  // Meta's list is the truth for every sealed segment (failed replicas
  // dropped, empty segments of failed placements included); it must end
  // where the writer's bytes say.
  uint64_t file_offset = 0;
  for (auto it = inode.segments().begin(); it != inode.segments().end() - 1; ++it) {
    file_offset += it->length();
  }
  // A continued segment (PlaceNextSegment) holds the file's last bytes.
  const uint64_t continued = open_.has_value() ? 0 : inode.segments().rbegin()[0].length();
  const uint64_t expected =
      tail_.segment_start() + (open_.has_value() ? sealed_length : 0) - continued;
  if (file_offset != expected) {
    return PosixError(EIO, absl::StrCat("meta's sealed segments of inode ", ino_, " end at ",
                                        file_offset, ", the writer's at ", expected));
  }
  if (open_.has_value()) {
    // Everything of the old segment past `sealed_length` goes to the new
    // one, in order, ahead of the bytes not sent yet.
    tail_.ResendFrom(sealed_length);
    tail_.EndSegment();
  }
  if (continued > 0) tail_.ContinueSegment(continued);
  sealed_.assign(inode.segments().begin(), inode.segments().end() - 1);
  open_ = inode.segments().rbegin()[0];
  replicas_sealed_length_.reset();
  open_->set_file_offset(file_offset);
  const uint32_t quorum = open_->ack_quorum() != 0 ? open_->ack_quorum() : inode.ack_quorum();
  replicas_ = ReplicaSet(*open_, std::max<uint32_t>(1, quorum));
  // Every replica of a continued segment holds its bytes, durably.
  for (size_t r = 0; continued > 0 && r < replicas_.size(); ++r) replicas_.SetDurable(r, continued);
  lag_ = ReplicaLagMonitor(replicas_.size(), options_.slow_replica);
  sync_round_replies_ = 0;  // replies of the old segment's round are ignored
  return absl::OkStatus();
}

}  // namespace logfs::wal
