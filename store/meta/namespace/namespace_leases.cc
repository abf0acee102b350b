// Namespace: mounts, their expiry and lapsed leases handed to recovery
// (the state is MountTable's), and orphans deleted once their last pin and
// their unlink grace are gone.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "src/status/macros.h"
#include "store/meta/namespace/internal/namespace_txn.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {

absl::StatusOr<uint64_t> Namespace::NewMount() {
  return Change([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<uint64_t> {
    Txn txn(db_);
    uint64_t mount_id = AllocateId(txn, MetaCounter::kNextMountId);
    RETURN_IF_ERROR(txn.Commit());
    TouchMount(mount_id);
    return mount_id;
  });
}

void Namespace::MountDisconnected(uint64_t mount_id) {
  absl::MutexLock lock(&mu_);
  mounts_.Disconnect(mount_id);
}

absl::Status Namespace::MountHeartbeat(uint64_t mount_id,
                                       const std::vector<uint64_t>& writing_inos) {
  absl::MutexLock lock(&mu_);
  TouchMount(mount_id);
  mounts_.Reclaim(mount_id, writing_inos, NowNs());
  return absl::OkStatus();
}

absl::Status Namespace::ExpireMounts() {
  return ChangeIfStaged([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    return DeleteOrphans(mounts_.Expire(NowNs(), kOrphansPerExpiryMax));
  });
}

absl::Status Namespace::DeleteOrphans(const std::vector<uint64_t>& inos) {
  // One synced batch for all of them: an `rm -rf` of a big tree leaves a
  // pass thousands of orphans, and a commit each would hold mu_ for as many
  // fsyncs.
  Txn txn(db_);
  for (uint64_t ino : inos) {
    if (mounts_.Pinned(ino) || mounts_.InUnlinkGrace(ino)) continue;
    auto inode = txn.Get(ino);
    if (!inode.ok() || (*inode)->attr().nlink() != 0) continue;  // gone, or not an orphan
    DeleteFile(txn, **inode);
    txn.batch().DeleteOrphan(ino);
  }
  return txn.Commit();
}

std::vector<uint64_t> Namespace::TakeLapsedOpenFiles() {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> files;
  for (uint64_t ino : mounts_.TakeDueLapsedLeases(NowNs())) {
    auto inode = db_->GetInode(ino);
    if (inode.ok() && OpenLastSegment(*inode) != nullptr) files.push_back(ino);
  }
  return files;
}

void Namespace::RetryLeaseRecovery(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  mounts_.AddLapsed(ino, 0, NowNs());
}

}  // namespace logfs::meta
