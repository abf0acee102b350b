// The mount's side of coherent caches (docs/coherence.md): how long the
// kernel may keep a name or attributes meta gave, and the poll that brings
// meta's invalidations to the kernel.
//
// While the mount trusts its cache, the kernel keeps names (and names that
// do not exist) and the attributes of sealed files and directories for
// `timeout` (60 s), and meta invalidates them before any change that makes
// them wrong is acknowledged (store/meta/coherence/mount_caches.h). The
// trust is a lease: it lasts `lease` (meta's) minus a tenth from when the
// mount sent its last poll that meta answered; a mount that cannot poll
// (meta down, a partition) drops everything it gave the kernel when it
// runs out, as an NFSv4 client stops using a delegation whose lease it
// could not renew. Without trust the kernel keeps nothing (timeout 0);
// with a meta that sends no invalidations (before 0.2), 1 s as before.
//
// An answer may be cached long only if no invalidation arrived between
// the request (Begin) and the reply to the kernel: Reply* check that and
// reply under a shared lock that the poll thread takes exclusively before
// it applies invalidations, so an answer is either in the kernel before
// an invalidation of it is applied, or not cached at all.
//
// Thread-safe. The poll thread is the only caller of KernelCache.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/format/logfs.pb.h"

namespace logfs::fsclient {

class ClientDeps;

// The kernel's caches of names and attributes (fuse/: the FUSE notify
// calls). Each may block while the kernel holds the directory's lock;
// errors (nothing cached) are the implementation's to ignore.
class KernelCache {
 public:
  virtual ~KernelCache() = default;
  virtual void InvalidateEntry(uint64_t parent, const std::string& name) = 0;
  virtual void InvalidateInode(uint64_t ino) = 0;  // attributes (and, by them, cached data)
};

struct CacheCoherenceOptions {
  double timeout_seconds = 60;  // what the kernel may keep while coherent
  double fallback_seconds = 1;  // with a meta that sends no invalidations
  size_t tracked_max = 1 << 16;  // names and inodes given `timeout`; older ones are dropped
};

class CacheCoherence {
 public:
  // `deps` must outlive this; meta's lease is deps.cache_lease_ms() (read
  // at Start: after NewMount).
  CacheCoherence(ClientDeps& deps, CacheCoherenceOptions options);
  ~CacheCoherence();  // Stop
  CacheCoherence(const CacheCoherence&) = delete;
  CacheCoherence& operator=(const CacheCoherence&) = delete;

  // Starts polling meta for `kernel` (not owned; outlives Stop). Without a
  // lease from meta, nothing starts and the fallback timeout applies.
  void Start(KernelCache* kernel) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the poll and the lease watchdog, which first drops everything
  // given to the kernel (nothing is given long from the call on);
  // idempotent. StopWithin gives up after `wait` (false) when that drop
  // is stuck in the kernel behind a directory lock that a request no FUSE
  // worker will answer holds (the session loop ended): the caller
  // unmounts, which releases it, then calls Stop.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  bool StopWithin(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);
  // StopWithin's first half: the drop of everything given to the kernel,
  // without waiting for the poll in flight (up to a quarter of meta's
  // lease) to end; Stop joins it later. What a mount handing itself over
  // waits for before its workers stop.
  bool DropWithin(absl::Duration wait) ABSL_LOCKS_EXCLUDED(mu_);

  // Taken before a request whose answer the kernel may cache.
  struct Ticket {
    uint64_t generation = 0;
  };
  Ticket Begin() const ABSL_LOCKS_EXCLUDED(mu_);
  // To send with lookups and getattrs (empty while not polling).
  proto::CacheSession session() const ABSL_LOCKS_EXCLUDED(mu_);

  // How long the kernel may keep the answer of `ticket`'s request, in
  // seconds, and the reply that gives it: `reply(seconds)` runs under the
  // shared lock. ReplyEntry records (parent, name) and ReplyAttr `ino` as
  // given, when long. `attr_cacheable` false (a file being written): the
  // attributes get 0 whatever the trust. Returns reply's result.
  int ReplyEntry(Ticket ticket, uint64_t parent, const std::string& name, uint64_t ino,
                 bool attr_cacheable, const std::function<int(double entry_s, double attr_s)>& reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  int ReplyAttr(Ticket ticket, uint64_t ino, bool attr_cacheable,
                const std::function<int(double attr_s)>& reply) ABSL_LOCKS_EXCLUDED(mu_);

  // Meta's answers to getxattr (the kernel keeps none): kept, like
  // attributes, while the mount holds its lease, and dropped with the
  // inode's attributes (`ls -l` asks for security.selinux of every name).
  // CachedXattr: the value or ENODATA kept for (ino, name), if any;
  // StoreXattr keeps `answer` (a value or ENODATA) if no invalidation
  // arrived since `ticket`; ForgetXattrs drops those of `ino` after this
  // mount changed them (meta sends no invalidation to the changing mount).
  std::optional<absl::StatusOr<std::string>> CachedXattr(uint64_t ino, const std::string& name)
      ABSL_LOCKS_EXCLUDED(mu_);
  void StoreXattr(Ticket ticket, uint64_t ino, const std::string& name,
                  const absl::StatusOr<std::string>& answer) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetXattrs(uint64_t ino) ABSL_LOCKS_EXCLUDED(mu_);

  // A rename by this mount succeeded: the kernel moved its entry, with the
  // timeout it had, to `new_name`.
  void Renamed(uint64_t new_parent, const std::string& new_name) ABSL_LOCKS_EXCLUDED(mu_);

  struct Stats {
    uint64_t polls = 0;
    uint64_t invalidations = 0;  // applied from meta
    uint64_t drops = 0;          // everything dropped: a reset or a lapsed lease
    bool trusted = false;
  };
  Stats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Entry = std::pair<uint64_t, std::string>;
  // The timeout for an answer begun at `ticket`, now.
  double TimeoutLocked(Ticket ticket) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Track(const Entry* entry, uint64_t ino) ABSL_LOCKS_EXCLUDED(tracked_mu_);
  void PollLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops everything when the lease runs out unrenewed, whatever the poll
  // thread is doing.
  void WatchdogLoop() ABSL_LOCKS_EXCLUDED(mu_);
  // Tells the kernel: attributes first (no lock), then entries; stops
  // early once Stop began.
  void Drop(KernelCache& kernel, const std::vector<Entry>& entries,
            const std::vector<uint64_t>& inodes);
  // Applies one answer of meta's: drops and invalidations in the kernel,
  // then the lease from `sent`.
  void Apply(const proto::WatchCacheResponse& response, absl::Time sent) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops everything given to the kernel (reset, lease run out).
  void DropAll() ABSL_LOCKS_EXCLUDED(mu_);
  // Invalidations for entries and inodes evicted from the bounded record.
  void FlushEvicted() ABSL_LOCKS_EXCLUDED(tracked_mu_);
  void DropXattrsLocked(uint64_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tracked_mu_);

  // Immutable after construction.
  ClientDeps& deps_;
  const CacheCoherenceOptions options_;

  mutable absl::Mutex mu_;
  KernelCache* kernel_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::Duration lease_ ABSL_GUARDED_BY(mu_);  // zero: no invalidations from meta
  uint64_t token_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time trusted_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  bool watchdog_running_ ABSL_GUARDED_BY(mu_) = false;  // until its last drop
  std::atomic<bool> stop_notifying_{false};
  std::thread poller_;
  std::thread watchdog_;

  // What the kernel was given with the long timeout (bounded; eviction in
  // insertion order).
  absl::Mutex tracked_mu_ ABSL_ACQUIRED_AFTER(mu_);
  absl::flat_hash_set<Entry> entries_ ABSL_GUARDED_BY(tracked_mu_);
  absl::flat_hash_set<uint64_t> inodes_ ABSL_GUARDED_BY(tracked_mu_);
  std::vector<std::pair<Entry, uint64_t>> order_ ABSL_GUARDED_BY(tracked_mu_);  // ring
  size_t next_ ABSL_GUARDED_BY(tracked_mu_) = 0;
  std::vector<std::pair<Entry, uint64_t>> evicted_ ABSL_GUARDED_BY(tracked_mu_);
  // CachedXattr's answers by inode, then name (all dropped when over
  // tracked_max).
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<std::string, absl::StatusOr<std::string>>>
      xattrs_ ABSL_GUARDED_BY(tracked_mu_);
  size_t xattr_count_ ABSL_GUARDED_BY(tracked_mu_) = 0;
};

}  // namespace logfs::fsclient
