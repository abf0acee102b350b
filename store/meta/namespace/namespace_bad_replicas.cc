// Namespace: replicas that readers found failing their checksum
// (docs/rpc.md "ReportBadReplica"; DESIGN §4 "Checksums").
#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/format/segment_lengths.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {
namespace {

// Whether the server's answer about its replica confirms it must not be
// served: corrupt, failed (kDataLoss) or not there at all.
bool ConfirmsBad(const absl::StatusOr<proto::SegmentInfoResponse>& info) {
  if (info.ok()) return info->corrupt();
  return absl::IsDataLoss(info.status()) || absl::IsNotFound(info.status());
}

bool Lists(const proto::Segment& segment, uint64_t server_id) {
  return std::any_of(segment.replicas().begin(), segment.replicas().end(),
                     [&](const proto::Replica& r) { return r.server_id() == server_id; });
}

}  // namespace

absl::Status Namespace::ReportBadReplica(const proto::ReportBadReplicaRequest& request) {
  std::string address;
  // Whether the replica is still listed (as far as every staged change
  // says: the answer waits for them to be durable).
  auto listed = Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<bool> {
    Txn txn(db_);
    ASSIGN_OR_RETURN(proto::Segment * segment, FindReportedSegment(txn, request));
    if (segment == nullptr) return false;
    address = servers_.Address(request.server_id());
    return true;
  });
  if (!listed.ok() || !*listed) return listed.status();
  // Ask the server itself without the mutex: a report is a claim by a
  // client, and a replica is only dropped on its server's word.
  if (address.empty()) {
    return absl::UnavailableError(absl::StrCat("server ", request.server_id(), " is unknown"));
  }
  absl::StatusOr<proto::SegmentInfoResponse> info =
      segment_servers_->SegmentInfo(address, request.segment_id());
  if (!ConfirmsBad(info)) {
    if (!info.ok()) return info.status();
    return absl::FailedPreconditionError(absl::StrCat(
        "server ", request.server_id(), " reports segment ", request.segment_id(), " healthy"));
  }
  return Change(
      [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status { return DropBadReplica(request); });
}

absl::StatusOr<proto::Segment*> Namespace::FindReportedSegment(
    Txn& txn, const proto::ReportBadReplicaRequest& request) {
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(request.ino()));
  for (auto& segment : *inode->mutable_segments()) {
    if (segment.id() != request.segment_id()) continue;
    if (!Lists(segment, request.server_id())) return nullptr;
    if (!format::ReplicasSealed(segment)) {
      // The writer's next append to that replica fails and it rolls, which
      // drops the replica (SealSegment failed_servers).
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment.id(), " is open; its writer drops bad replicas"));
    }
    if (segment.replicas_size() <= 1) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment.id(), " has no other replica; keeping it"));
    }
    return &segment;
  }
  return PosixError(
      ENOENT, absl::StrCat("inode ", request.ino(), " has no segment ", request.segment_id()));
}

absl::Status Namespace::DropBadReplica(const proto::ReportBadReplicaRequest& request) {
  // Re-read: the file may have changed while the server was asked.
  Txn txn(db_);
  ASSIGN_OR_RETURN(proto::Segment * segment, FindReportedSegment(txn, request));
  if (segment == nullptr) return absl::OkStatus();
  auto* replicas = segment->mutable_replicas();
  replicas->erase(
      std::remove_if(replicas->begin(), replicas->end(),
                     [&](const proto::Replica& r) { return r.server_id() == request.server_id(); }),
      replicas->end());
  // No deletion is queued: re-replication may copy the segment back to
  // this very server (in a small cluster it is the only choice), and a
  // deletion delivered after that copy would remove the good new replica.
  // The copy replaces the corrupt file (CopySegment starts over); if
  // another server is chosen, the corrupt file stays as a stray.
  ASSIGN_OR_RETURN(proto::Inode * inode, txn.Get(request.ino()));
  txn.Put(inode);
  RETURN_IF_ERROR(SyncSharedReplicas(txn, request.ino(), *segment));
  RETURN_IF_ERROR(txn.Commit());
  LOG(WARNING) << "dropped replica of segment " << request.segment_id() << " (inode "
               << request.ino() << ") on server " << request.server_id() << ": "
               << request.reason();
  return absl::OkStatus();
}

}  // namespace logfs::meta
