// What meta knows of mounts, in memory only: when each was last heard
// from (liveness), the writer lease of each file open for write (ino ->
// mount, as HDFS's LeaseManager), the pins of open files (ino -> mount ->
// count: a file unlinked while pinned stays as an orphan), the leases that
// lapsed with their mount and wait for recovery, and the unlink grace of
// files whose last name just went. A meta restart loses all of it: leases
// come back by heartbeat (MountHeartbeat) or by recovery, orphans are
// deleted at Open (docs/meta_ha.md).
//
// A value type: no I/O, no clock of its own (every time is the caller's
// `now_ns`, ns since the Unix epoch), no locking. Namespace holds one under
// its mutex, as wal/replica_set.h is held under the writer's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace logfs::meta {

class MountTable {
 public:
  struct Options {
    // A mount not heard from this long is dead: its leases lapse and its
    // pins go (Expire).
    int64_t lease_timeout_ns = 0;
    // A lapsed lease is handed to recovery this long after it lapsed
    // (TakeDueLapsedLeases), so that a mount whose connection merely broke
    // can come back and take it again.
    int64_t lease_recovery_delay_ns = 0;
    // A file unlinked while nobody pins it is kept this long (MarkUnlinked).
    int64_t unlinked_grace_ns = 0;
  };
  explicit MountTable(Options options) : options_(options) {}

  // ---- liveness
  void Touch(uint64_t mount_id, int64_t now_ns) { seen_ns_[mount_id] = now_ns; }
  // Heard from within lease_timeout_ns of `now_ns`, and not disconnected.
  bool Live(uint64_t mount_id, int64_t now_ns) const;
  // The mount's session broke: not live from now on (its leases lapse at
  // the next Expire) until it is heard from again.
  void Disconnect(uint64_t mount_id) { seen_ns_.erase(mount_id); }

  // ---- writer leases
  // The holder of `ino`'s lease whether live or not, or 0 (also when the
  // holder's id is 0: a bogus request's; Leased and HeldBy tell them apart).
  uint64_t Holder(uint64_t ino) const;
  bool Leased(uint64_t ino) const { return leases_.count(ino) != 0; }
  bool HeldBy(uint64_t ino, uint64_t mount_id) const;
  // The holder of `ino`'s lease if it is live, else 0.
  uint64_t LiveHolder(uint64_t ino, int64_t now_ns) const;
  // `mount_id` holds the lease of `ino` from now on (replaces any holder).
  void Grant(uint64_t ino, uint64_t mount_id) { leases_[ino] = mount_id; }
  // Nobody holds the lease of `ino` (revoked, closed, given up).
  void Revoke(uint64_t ino) { leases_.erase(ino); }
  // Revokes the lease of `ino` if `mount_id` holds it; true if it did.
  bool RevokeIfHeldBy(uint64_t ino, uint64_t mount_id);

  // ---- pins (Open/OpenWrite without Release, per mount)
  void Pin(uint64_t ino, uint64_t mount_id) { ++pins_[ino][mount_id]; }
  // Drops one pin of `mount_id` on `ino`; true if one was held.
  bool Unpin(uint64_t ino, uint64_t mount_id);
  bool Pinned(uint64_t ino) const { return pins_.count(ino) != 0; }
  bool PinnedBy(uint64_t ino, uint64_t mount_id) const;

  // ---- lapsed leases: files whose writer went away with its lease
  // `ino`'s lease lapsed at `since_ns` from `mount_id` (0: from a writer
  // meta does not know, as after a restart: any mount that heartbeats the
  // file as its own takes it). Keeps an entry already there.
  void AddLapsed(uint64_t ino, uint64_t mount_id, int64_t since_ns);
  bool Lapsed(uint64_t ino) const { return lapsed_.count(ino) != 0; }
  // The lease passed to a new holder: the mount it lapsed from may not
  // take it back.
  void ForgetLapsed(uint64_t ino) { lapsed_.erase(ino); }
  // MountHeartbeat's `writing_inos`: each file whose lease lapsed from
  // `mount_id` (or from an unknown writer) and that nobody holds goes back
  // to it. Returns how many it took back.
  size_t Reclaim(uint64_t mount_id, const std::vector<uint64_t>& writing_inos, int64_t now_ns);
  // Settles every lapsed lease: one somebody holds again is forgotten; one
  // whose mount is live again (it reconnected) goes back to that mount;
  // one that lapsed lease_recovery_delay_ns or more before `now_ns` is
  // returned (once) for the caller to recover. The rest wait.
  std::vector<uint64_t> TakeDueLapsedLeases(int64_t now_ns);

  // ---- unlink grace
  // `ino` lost its last name at `now_ns` and stays openable by inode
  // number for unlinked_grace_ns (no-op when that is 0).
  void MarkUnlinked(uint64_t ino, int64_t now_ns);
  bool InUnlinkGrace(uint64_t ino) const { return unlinked_ns_.count(ino) != 0; }

  // ---- expiry (meta's periodic pass)
  // Leases of dead mounts lapse (AddLapsed at `now_ns`), their pins go,
  // and dead mounts are forgotten. Returns the files that lost their last
  // pin, then at most `graceless_max` (counted with them) whose unlink
  // grace is over: the orphans the caller may now delete.
  std::vector<uint64_t> Expire(int64_t now_ns, size_t graceless_max);

  // Sizes, for /metrics.
  size_t mounts() const { return seen_ns_.size(); }
  size_t leases() const { return leases_.size(); }
  size_t lapsed_leases() const { return lapsed_.size(); }

 private:
  struct LapsedLease {
    uint64_t mount_id = 0;  // 0: any mount that heartbeats it as its own
    int64_t since_ns = 0;
  };

  const Options options_;
  std::map<uint64_t, int64_t> seen_ns_;                    // mount -> last heard
  std::map<uint64_t, uint64_t> leases_;                    // ino -> mount
  std::map<uint64_t, std::map<uint64_t, uint32_t>> pins_;  // ino -> mount -> count
  std::map<uint64_t, LapsedLease> lapsed_;                 // ino -> lapsed lease
  std::map<uint64_t, int64_t> unlinked_ns_;                // ino -> when unlinked
};

}  // namespace logfs::meta
