#include "store/meta/namespace/mount_table.h"

#include <iterator>

namespace logfs::meta {

bool MountTable::Live(uint64_t mount_id, int64_t now_ns) const {
  auto it = seen_ns_.find(mount_id);
  return it != seen_ns_.end() && now_ns - it->second <= options_.lease_timeout_ns;
}

uint64_t MountTable::Holder(uint64_t ino) const {
  auto it = leases_.find(ino);
  return it == leases_.end() ? 0 : it->second;
}

uint64_t MountTable::LiveHolder(uint64_t ino, int64_t now_ns) const {
  const uint64_t holder = Holder(ino);
  return holder != 0 && Live(holder, now_ns) ? holder : 0;
}

bool MountTable::HeldBy(uint64_t ino, uint64_t mount_id) const {
  auto it = leases_.find(ino);
  return it != leases_.end() && it->second == mount_id;
}

bool MountTable::RevokeIfHeldBy(uint64_t ino, uint64_t mount_id) {
  auto it = leases_.find(ino);
  if (it == leases_.end() || it->second != mount_id) return false;
  leases_.erase(it);
  return true;
}

bool MountTable::Unpin(uint64_t ino, uint64_t mount_id) {
  auto it = pins_.find(ino);
  if (it == pins_.end()) return false;
  auto pin = it->second.find(mount_id);
  if (pin == it->second.end()) return false;
  if (--pin->second == 0) it->second.erase(pin);
  if (it->second.empty()) pins_.erase(it);
  return true;
}

bool MountTable::PinnedBy(uint64_t ino, uint64_t mount_id) const {
  auto it = pins_.find(ino);
  return it != pins_.end() && it->second.count(mount_id) != 0;
}

void MountTable::AddLapsed(uint64_t ino, uint64_t mount_id, int64_t since_ns) {
  lapsed_.emplace(ino, LapsedLease{mount_id, since_ns});
}

size_t MountTable::Reclaim(uint64_t mount_id, const std::vector<uint64_t>& writing_inos,
                           int64_t now_ns) {
  size_t reclaimed = 0;
  for (uint64_t ino : writing_inos) {
    auto lapsed = lapsed_.find(ino);
    if (lapsed == lapsed_.end() || LiveHolder(ino, now_ns) != 0) continue;
    if (lapsed->second.mount_id != 0 && lapsed->second.mount_id != mount_id) continue;
    leases_[ino] = mount_id;
    lapsed_.erase(lapsed);
    ++reclaimed;
  }
  return reclaimed;
}

std::vector<uint64_t> MountTable::TakeDueLapsedLeases(int64_t now_ns) {
  const int64_t due = now_ns - options_.lease_recovery_delay_ns;
  std::vector<uint64_t> inos;
  for (auto it = lapsed_.begin(); it != lapsed_.end();) {
    const uint64_t ino = it->first;
    const LapsedLease lapsed = it->second;
    if (LiveHolder(ino, now_ns) != 0) {  // opened for write again, or reclaimed
      it = lapsed_.erase(it);
      continue;
    }
    if (lapsed.mount_id != 0 && Live(lapsed.mount_id, now_ns)) {
      // Its connection broke and it came back (heartbeats again): it still
      // writes the file, and its appends must not be fenced.
      leases_[ino] = lapsed.mount_id;
      it = lapsed_.erase(it);
      continue;
    }
    if (lapsed.since_ns > due) {
      ++it;
      continue;
    }
    inos.push_back(ino);
    it = lapsed_.erase(it);
  }
  return inos;
}

void MountTable::MarkUnlinked(uint64_t ino, int64_t now_ns) {
  if (options_.unlinked_grace_ns > 0) unlinked_ns_[ino] = now_ns;
}

std::vector<uint64_t> MountTable::Expire(int64_t now_ns, size_t graceless_max) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (Live(it->second, now_ns)) {
      ++it;
      continue;
    }
    lapsed_.emplace(it->first, LapsedLease{it->second, now_ns});
    it = leases_.erase(it);
  }
  std::vector<uint64_t> orphans;
  for (auto it = pins_.begin(); it != pins_.end();) {
    auto& by_mount = it->second;
    for (auto pin = by_mount.begin(); pin != by_mount.end();) {
      pin = Live(pin->first, now_ns) ? std::next(pin) : by_mount.erase(pin);
    }
    if (by_mount.empty()) {
      orphans.push_back(it->first);
      it = pins_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = seen_ns_.begin(); it != seen_ns_.end();) {
    it = Live(it->first, now_ns) ? std::next(it) : seen_ns_.erase(it);
  }
  const int64_t grace_end = now_ns - options_.unlinked_grace_ns;
  for (auto it = unlinked_ns_.begin();
       it != unlinked_ns_.end() && orphans.size() < graceless_max;) {
    if (it->second > grace_end) {
      ++it;
      continue;
    }
    orphans.push_back(it->first);
    it = unlinked_ns_.erase(it);
  }
  return orphans;
}

}  // namespace logfs::meta
