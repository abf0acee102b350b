// Namespace: metadata-only copies (Clone) and the sealed segments several
// files share. Sealed segments never change (DESIGN §2), so a clone lists
// the source's segments instead of copying their bytes, as JuiceFS's
// clone and a reflink on a copy-on-write file system do. Meta keeps, per
// shared segment, the files that list it (key 'g', proto::SharedSegment,
// written in the batch of the change that adds or drops a listing); a
// replica is queued for deletion only when no file lists its segment any
// more, and every change of a shared segment's replica list (a
// re-replication copy, a dropped bad or missing replica) is made in every
// file that lists it, so they never disagree.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include <glog/logging.h>
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {

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
  ASSIGN_OR_RETURN(proto::SharedSegment * shared, txn.Sharers(segment.id()));
  for (uint64_t other : shared->inos()) {
    if (other == ino) continue;
    absl::StatusOr<proto::Inode*> inode = txn.Get(other);
    if (!inode.ok()) continue;  // deleted in this change
    for (proto::Segment& listed : *(*inode)->mutable_segments()) {
      if (listed.id() != segment.id()) continue;
      *listed.mutable_replicas() = segment.replicas();
      // A snapshot's prefix of a segment sealed since at a greater length:
      // its replicas are copied and checked at that length.
      if (segment.sealed() && listed.length() < segment.length()) {
        listed.set_replica_length(segment.length());
      }
      txn.Put(*inode);
    }
  }
  return absl::OkStatus();
}

bool Namespace::IsShared(Txn& txn, uint64_t segment_id) {
  absl::StatusOr<proto::SharedSegment*> shared = txn.Sharers(segment_id);
  return !shared.ok() || (*shared)->inos_size() >= 2;
}

}  // namespace logfs::meta
