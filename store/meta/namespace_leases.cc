// Namespace: mounts and their liveness, pins (open descriptors), write
// leases, lapsed leases handed to recovery, and orphans deleted once their
// last pin goes.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "src/status/macros.h"
#include "store/meta/internal/namespace_txn.h"
#include "store/meta/namespace.h"

namespace logfs::meta {
namespace {
constexpr int64_t kNanosPerMilli = 1000 * 1000;
}  // namespace

void Namespace::TouchMount(uint64_t mount_id) { mount_seen_ns_[mount_id] = NowNs(); }

bool Namespace::MountLive(uint64_t mount_id) const {
  auto it = mount_seen_ns_.find(mount_id);
  return it != mount_seen_ns_.end() &&
         NowNs() - it->second <= options_.lease_timeout_ms * kNanosPerMilli;
}

uint64_t Namespace::LiveLeaseHolder(uint64_t ino) const {
  auto it = leases_.find(ino);
  if (it == leases_.end() || !MountLive(it->second)) return 0;
  return it->second;
}

bool Namespace::Pinned(uint64_t ino) const { return pins_.count(ino) != 0; }

bool Namespace::Unpin(uint64_t ino, uint64_t mount_id) {
  auto it = pins_.find(ino);
  if (it == pins_.end()) return false;
  auto pin = it->second.find(mount_id);
  if (pin == it->second.end()) return false;
  if (--pin->second == 0) it->second.erase(pin);
  if (it->second.empty()) pins_.erase(it);
  return true;
}

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
  mount_seen_ns_.erase(mount_id);  // MountLive() is false from now on
}

absl::Status Namespace::MountHeartbeat(uint64_t mount_id,
                                       const std::vector<uint64_t>& writing_inos) {
  absl::MutexLock lock(&mu_);
  TouchMount(mount_id);
  for (uint64_t ino : writing_inos) {
    auto lapsed = lapsed_leases_.find(ino);
    if (lapsed == lapsed_leases_.end() || LiveLeaseHolder(ino) != 0) continue;
    if (lapsed->second.mount_id != 0 && lapsed->second.mount_id != mount_id) continue;
    leases_[ino] = mount_id;
    lapsed_leases_.erase(lapsed);
  }
  return absl::OkStatus();
}

absl::Status Namespace::ExpireMounts() {
  return ChangeIfStaged([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::Status {
    const int64_t now = NowNs();
    for (auto it = leases_.begin(); it != leases_.end();) {
      if (MountLive(it->second)) {
        ++it;
        continue;
      }
      lapsed_leases_.emplace(it->first, LapsedLease{it->second, now});
      it = leases_.erase(it);
    }
    std::vector<uint64_t> unpinned;
    for (auto it = pins_.begin(); it != pins_.end();) {
      auto& by_mount = it->second;
      for (auto pin = by_mount.begin(); pin != by_mount.end();) {
        pin = MountLive(pin->first) ? std::next(pin) : by_mount.erase(pin);
      }
      if (by_mount.empty()) {
        unpinned.push_back(it->first);
        it = pins_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = mount_seen_ns_.begin(); it != mount_seen_ns_.end();) {
      it = MountLive(it->first) ? std::next(it) : mount_seen_ns_.erase(it);
    }
    const int64_t grace_end = now - options_.unlinked_grace_ms * kNanosPerMilli;
    for (auto it = unlinked_ns_.begin();
         it != unlinked_ns_.end() && unpinned.size() < kOrphansPerExpiryMax;) {
      if (it->second > grace_end) {
        ++it;
        continue;
      }
      unpinned.push_back(it->first);
      it = unlinked_ns_.erase(it);
    }
    return DeleteOrphans(unpinned);
  });
}

absl::Status Namespace::DeleteOrphans(const std::vector<uint64_t>& inos) {
  // One synced batch for all of them: an `rm -rf` of a big tree leaves a
  // pass thousands of orphans, and a commit each would hold mu_ for as many
  // fsyncs.
  Txn txn(db_);
  for (uint64_t ino : inos) {
    if (Pinned(ino) || unlinked_ns_.count(ino) != 0) continue;
    auto inode = txn.Get(ino);
    if (!inode.ok() || (*inode)->attr().nlink() != 0) continue;  // gone, or not an orphan
    DeleteFile(txn, **inode);
    txn.batch().DeleteOrphan(ino);
  }
  return txn.Commit();
}

std::vector<uint64_t> Namespace::TakeLapsedOpenFiles() {
  absl::MutexLock lock(&mu_);
  const int64_t due = NowNs() - options_.lease_recovery_delay_ms * kNanosPerMilli;
  std::vector<uint64_t> files;
  for (auto it = lapsed_leases_.begin(); it != lapsed_leases_.end();) {
    const uint64_t ino = it->first;
    const LapsedLease lapsed = it->second;
    if (LiveLeaseHolder(ino) != 0) {  // opened for write again, or readopted
      it = lapsed_leases_.erase(it);
      continue;
    }
    if (lapsed.mount_id != 0 && MountLive(lapsed.mount_id)) {
      // Its connection broke and it came back (heartbeats again): it still
      // writes the file, and its appends must not be fenced.
      leases_[ino] = lapsed.mount_id;
      it = lapsed_leases_.erase(it);
      continue;
    }
    if (lapsed.since_ns > due) {
      ++it;
      continue;
    }
    auto inode = db_->GetInode(ino);
    if (inode.ok() && OpenLastSegment(*inode) != nullptr) files.push_back(ino);
    it = lapsed_leases_.erase(it);
  }
  return files;
}

void Namespace::RetryLeaseRecovery(uint64_t ino) {
  absl::MutexLock lock(&mu_);
  lapsed_leases_.emplace(ino, LapsedLease{0, NowNs()});
}

}  // namespace logfs::meta
