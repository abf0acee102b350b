// PowerCutFs: a FUSE file system for crash tests that forgets, on command,
// everything that was not synced, as a power cut may under POSIX.
//
// It serves a directory tree whose file bytes live in flat files under a
// backing directory, and keeps its namespace in memory. For every file it
// remembers the content as of the file's last fsync/fdatasync, and for
// every directory its entries as of the directory's last fsync. PowerCut()
// unmounts it (so the kernel's page, dentry and inode caches go too), makes
// the synced state the current one and mounts it again:
//   - a name survives only if its directory's last fsync saw it (creates,
//     renames, links and unlinks made after that fsync are undone), and a
//     directory whose own name did not survive is gone with all below it;
//   - a file's content is what it was at its last fsync: later writes and
//     truncations are undone, a never-synced file comes back empty.
// This is the strict reading of POSIX that LevelDB's and RocksDB's fault
// injection tests use (fsync of a file does not make its name durable).
// Attributes (mode, owner, times) are kept as they are.
//
// Processes see it as an ordinary file system with POSIX locks, sockets and
// FIFOs; no symlinks, xattrs or hole punching (ENOSYS/EOPNOTSUPP). It
// serves requests on one thread of its own, started by Mount(); the public
// methods may be called from any one thread at a time, but never from a
// process that the mount is serving (a deadlock). Needs root and /dev/fuse.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace logfs::testing {

class PowerCutFs {
 public:
  struct Stats {
    uint64_t file_syncs = 0;  // fsync/fdatasync calls on files
    uint64_t dir_syncs = 0;   // fsync calls on directories
    // Counted by the last PowerCut():
    uint64_t names_dropped = 0;      // names that were not synced
    uint64_t names_restored = 0;     // synced names that had been removed or replaced
    uint64_t files_rolled_back = 0;  // files whose content changed since their last sync
  };

  // Mounts an empty file system at `mountpoint` (an existing directory),
  // keeping file bytes under `backing_dir` (an existing, empty directory,
  // which the caller removes after destruction). Errors: kFailedPrecondition
  // if the mount fails.
  static absl::StatusOr<std::unique_ptr<PowerCutFs>> Mount(const std::string& mountpoint,
                                                           const std::string& backing_dir);

  // Unmounts (lazily if something still uses the mount).
  ~PowerCutFs();

  // A power cut and reboot: unmounts, drops whatever was not synced, mounts
  // again at the same place. Whoever used the mount must be gone (killed);
  // kFailedPrecondition (and nothing dropped) if the mount is still busy.
  absl::Status PowerCut();

  Stats stats() const;
  const std::string& mountpoint() const;

 private:
  class Impl;
  explicit PowerCutFs(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace logfs::testing
