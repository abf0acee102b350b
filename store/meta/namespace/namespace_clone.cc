// Namespace: metadata-only copies (Clone) and the sealed segments several
// files share. Sealed segments never change (DESIGN §2), so a clone lists
// the source's segments instead of copying their bytes, as JuiceFS's
// clone and a reflink on a copy-on-write file system do. Meta keeps, per
// shared segment, the files that list it (key 'g', proto::SharedSegment,
// written in the batch of the change that adds or drops a listing); a
// replica is queued for deletion only when no file lists its segment any
// more, and every change of a shared segment's replica list (a
// re-replication copy, a dropped bad or missing replica) is made in every
// file that lists it, so they never disagree. CopyRange appends a source's
// whole sealed segments to the end of a file being written the same way
// (copy_file_range(2) of a sealed file into a new one: `cp`).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "store/format/message_type.h"
#include <glog/logging.h>
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/segment_lengths.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// Disagreements a CheckShares answer lists (it counts them all).
constexpr int kShareDisagreementsMax = 1000;
// Inodes per database read of the scan, and records per repair batch.
constexpr size_t kCheckSharesInodesPerRead = 1024;
constexpr int kShareRepairsPerBatch = 1000;

}  // namespace

bool Namespace::StillShared(Txn& txn, uint64_t ino, uint64_t segment_id) {
  absl::StatusOr<proto::SharedSegment*> shared = txn.Sharers(segment_id);
  if (!shared.ok()) {
    // Keep the replicas: a leaked one is found as a stray by the replica
    // reports (no file lists it), a deleted one that a file still
    // needed would be lost.
    LOG(ERROR) << "cannot read the files sharing segment " << segment_id
               << ", keeping its replicas: " << shared.status();
    return true;
  }
  auto* inos = (*shared)->mutable_inos();
  if (inos->empty()) return false;  // this file alone lists it
  auto listed = std::find(inos->begin(), inos->end(), ino);
  if (listed != inos->end()) inos->erase(listed);
  txn.PutSharers(segment_id);
  return !inos->empty();
}

absl::Status Namespace::SyncSharedReplicas(Txn& txn, uint64_t ino, const proto::Segment& segment) {
  // A snapshot's prefix of a segment its writer has not sealed lists a
  // subset of the replicas the writer still writes to: it never speaks
  // for the others.
  if (!format::ReplicasSealed(segment)) return absl::OkStatus();
  ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn.Sharers(segment.id()));
  for (uint64_t other : shared->inos()) {
    if (other == ino) continue;
    absl::StatusOr<proto::Inode*> inode = txn.Get(other);
    if (!inode.ok()) continue;  // deleted in this change
    for (proto::Segment& listed : *(*inode)->mutable_segments()) {
      if (listed.id() != segment.id()) continue;
      if (!listed.sealed()) continue;  // the writer's open segment is its own
      *listed.mutable_replicas() = segment.replicas();
      // A snapshot's prefix of a segment sealed since: its replicas are
      // copied and checked at the sealed length, with the sealed epoch.
      listed.set_epoch(segment.epoch());
      if (listed.prefix()) listed.set_replica_length(format::ReplicaLength(segment));
      txn.Put(*inode);
    }
  }
  return absl::OkStatus();
}

bool Namespace::IsShared(Txn& txn, uint64_t segment_id) {
  absl::StatusOr<proto::SharedSegment*> shared = txn.Sharers(segment_id);
  return !shared.ok() || (*shared)->inos_size() >= 2;
}

absl::StatusOr<proto::CheckSharesResponse> Namespace::CheckShares(
    const proto::CheckSharesRequest& request) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::CheckSharesResponse> {
    proto::CheckSharesResponse response;
    std::map<uint64_t, std::vector<uint64_t>> listing;  // segment id -> inos, ascending
    for (uint64_t start = 0;;) {
      ASSIGN_OR_RETURN(std::vector<proto::Inode> inodes,
                       db_->ListInodes(start, kCheckSharesInodesPerRead));
      for (const proto::Inode& inode : inodes) {
        response.set_inodes(response.inodes() + 1);
        if (!S_ISREG(inode.attr().mode())) continue;
        for (const proto::Segment& segment : inode.segments()) {
          std::vector<uint64_t>& inos = listing[segment.id()];
          if (inos.empty() || inos.back() != inode.attr().ino()) inos.push_back(inode.attr().ino());
        }
      }
      if (inodes.size() < kCheckSharesInodesPerRead) break;
      start = inodes.back().attr().ino() + 1;
    }
    ASSIGN_OR_RETURN(auto records, db_->ListSharedSegments());
    std::map<uint64_t, std::vector<uint64_t>> recorded;
    for (auto& [segment_id, shared] : records) {
      std::vector<uint64_t>& inos = recorded[segment_id];
      inos.assign(shared.inos().begin(), shared.inos().end());
      // Sorted, duplicates kept: a record naming a file twice disagrees
      // (StillShared drops one name per file, and the other would keep
      // the replicas forever).
      std::sort(inos.begin(), inos.end());
    }
    static const std::vector<uint64_t> kNone;
    std::vector<std::pair<uint64_t, const std::vector<uint64_t>*>> wrong;  // id, what it should be
    auto check = [&](uint64_t segment_id, const std::vector<uint64_t>& listed,
                     const std::vector<uint64_t>& record) {
      const std::vector<uint64_t>& want = listed.size() >= 2 ? listed : kNone;
      if (record == want) return;
      wrong.emplace_back(segment_id, &want);
      response.set_disagreeing(response.disagreeing() + 1);
      if (response.disagreements_size() >= kShareDisagreementsMax) return;
      proto::ShareDisagreement* d = response.add_disagreements();
      d->set_segment_id(segment_id);
      for (uint64_t ino : record) d->add_recorded(ino);
      for (uint64_t ino : listed) d->add_listing(ino);
    };
    for (const auto& [segment_id, inos] : listing) {
      if (inos.size() >= 2) response.set_shared_segments(response.shared_segments() + 1);
      auto it = recorded.find(segment_id);
      check(segment_id, inos, it == recorded.end() ? kNone : it->second);
    }
    for (const auto& [segment_id, inos] : recorded) {
      if (listing.count(segment_id) == 0) check(segment_id, kNone, inos);
    }
    if (!request.repair() || wrong.empty()) return response;
    auto txn = std::make_unique<Txn>(db_);
    int in_batch = 0;
    for (const auto& [segment_id, want] : wrong) {
      LOG(WARNING) << "share record of segment " << segment_id << " disagreed with the inodes: "
                   << "rewritten to name " << want->size() << " files";
      if (want->empty()) {
        txn->batch().DeleteSharedSegment(segment_id);
      } else {
        proto::SharedSegment shared;
        for (uint64_t ino : *want) shared.add_inos(ino);
        txn->batch().PutSharedSegment(segment_id, shared);
      }
      if (++in_batch == kShareRepairsPerBatch) {
        RETURN_IF_ERROR(txn->Commit());
        txn = std::make_unique<Txn>(db_);
        in_batch = 0;
      }
    }
    RETURN_IF_ERROR(txn->Commit());
    response.set_repaired(true);
    return response;
  });
}

absl::StatusOr<proto::Inode> Namespace::CopyRange(const proto::CopyRangeRequest& request) {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<proto::Inode> {
    TouchMount(request.mount_id());
    ASSIGN_OR_RETURN(auto recorded,
                     RecordedReply(request.call(), format::MessageType::kCopyRange));
    Txn txn(db_);
    if (recorded.has_value()) {
      // Applied before: the caller holds the lease, so the destination
      // is as that change left it (the record keeps no reply, as a seal's).
      ASSIGN_OR_RETURN(proto::Inode * dst, txn.Get(request.dst_ino()));
      return ReplyInode(*dst);
    }
    if (request.ino() == request.dst_ino()) {
      return PosixError(EINVAL, "copy of a file's segments into itself");
    }
    ASSIGN_OR_RETURN(proto::Inode * source, txn.Get(request.ino()));
    ASSIGN_OR_RETURN(proto::Inode * dst, txn.Get(request.dst_ino()));
    RETURN_IF_ERROR(CheckCopyDestination(request, *dst));
    ASSIGN_OR_RETURN(std::vector<proto::Segment> segments,
                     SegmentsToCopy(request, *source, *dst));
    uint64_t offset = dst->attr().size();
    for (proto::Segment& segment : segments) {
      segment.set_file_offset(offset);
      offset += segment.length();
      ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn.Sharers(segment.id()));
      if (shared->inos_size() == 0) shared->add_inos(request.ino());
      shared->add_inos(request.dst_ino());
      txn.PutSharers(segment.id());
      *dst->add_segments() = std::move(segment);
    }
    if (ReplyInode(*dst).ByteSizeLong() > options_.inode_reply_bytes_max) {
      return PosixError(EFBIG, absl::StrCat("inode ", request.dst_ino(),
                                            " would have more segments than a reply holds"));
    }
    const int64_t now = NowNs();
    proto::Attr* attr = dst->mutable_attr();
    attr->set_size(offset);
    attr->set_mtime_ns(now);
    attr->set_ctime_ns(now);
    txn.Put(dst);
    RecordCall(txn, request.call(), format::MessageType::kCopyRange, [] { return std::string(); });
    RETURN_IF_ERROR(txn.Commit());
    return ReplyInode(*dst);
  });
}

absl::Status Namespace::CheckCopyDestination(const proto::CopyRangeRequest& request,
                                             const proto::Inode& dst) {
  if (S_ISDIR(dst.attr().mode())) return PosixError(EISDIR, "copy into a directory");
  if (!S_ISREG(dst.attr().mode())) return PosixError(EINVAL, "copy into a non-regular file");
  if (LiveLeaseHolder(request.dst_ino()) != request.mount_id() ||
      request.lease_epoch() != dst.lease_epoch()) {
    return PosixError(EBUSY, absl::StrCat("mount ", request.mount_id(), " holds no lease on ",
                                          request.dst_ino()));
  }
  if (OpenLastSegment(dst) != nullptr) {
    return PosixError(EINVAL, absl::StrCat("inode ", request.dst_ino(),
                                           " ends in an open segment: copy bytes"));
  }
  if (request.dst_offset() != dst.attr().size()) {
    return PosixError(EINVAL, absl::StrCat("copy to offset ", request.dst_offset(), " of inode ",
                                           request.dst_ino(), ", whose size is ",
                                           dst.attr().size(), ": only appends take segments"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::Segment>> Namespace::SegmentsToCopy(
    const proto::CopyRangeRequest& request, const proto::Inode& source,
    const proto::Inode& dst) const {
  if (S_ISDIR(source.attr().mode())) return PosixError(EISDIR, "copy from a directory");
  if (!S_ISREG(source.attr().mode())) return PosixError(EINVAL, "copy from a non-regular file");
  // Files that share a segment want as many replicas of it as each other
  // (as a clone takes the source's settings).
  if (Replication(source) != Replication(dst)) {
    return PosixError(EINVAL, "source and destination differ in replication: copy bytes");
  }
  const uint64_t end = request.offset() + request.length();
  if (request.length() == 0 || end < request.offset()) {
    return PosixError(EINVAL, "an empty or overflowing range");
  }
  std::vector<proto::Segment> segments;
  for (const proto::Segment& segment : source.segments()) {
    const uint64_t segment_end = segment.file_offset() + segment.length();
    if (segment_end <= request.offset()) continue;
    if (segment.file_offset() >= end) break;
    if (!segment.sealed() || segment.file_offset() < request.offset() || segment_end > end) {
      return PosixError(EINVAL, absl::StrCat("bytes [", request.offset(), ", ", end, ") of inode ",
                                             request.ino(),
                                             " are not whole sealed segments: copy bytes"));
    }
    for (const proto::Segment& listed : dst.segments()) {
      if (listed.id() == segment.id()) {
        return PosixError(EINVAL, absl::StrCat("inode ", request.dst_ino(), " lists segment ",
                                               segment.id(), " already: copy bytes"));
      }
    }
    segments.push_back(segment);
  }
  uint64_t covered = 0;
  for (const proto::Segment& segment : segments) covered += segment.length();
  if (covered != request.length()) {
    return PosixError(EINVAL, absl::StrCat("bytes [", request.offset(), ", ", end, ") of inode ",
                                           request.ino(), " reach past its sealed segments"));
  }
  return segments;
}

}  // namespace logfs::meta
