// FaultFileSystem: a FileSystemWrapper (src/env/file_system.h) that breaks
// the disk on command, for unit tests of the journal, the replica store and
// the segment server (LevelDB's FaultInjectionTestEnv, RocksDB's
// FaultInjectionTestFS; our own code).
//
// Faults, each for files whose path contains a given part ("" = every
// file), until ClearFaults():
//   - FailSyncs: Sync and WriteAtDurably fail with EIO and make nothing
//     durable (the bytes of a WriteAtDurably land, unsynced), as a disk
//     that loses a write-back does; SyncDir of a matching directory too.
//   - FailWrites: WriteAt, WriteAtDurably and Allocate fail with the given
//     errno (EIO, ENOSPC) and write nothing.
//   - FailCloses: Close fails with EIO (the file is closed all the same).
//   - TearNextWrite: the next write to a matching file puts only a prefix
//     of its bytes on disk, durably (a power cut in the middle of the
//     write), and fails with EIO. Once. Call SimulateCrash() next.
//
// Crash model (the strict reading of POSIX that LevelDB and RocksDB test
// with). It tracks each file's content as of its last Sync (a synced size
// and the old bytes of every unsynced overwrite, so files written in place,
// such as the circular journal, roll back exactly) and every name created,
// renamed or removed since its directory's last SyncDir. SimulateCrash()
// drops every byte not synced and undoes every name change not synced: a
// file whose name was never synced is gone, a replaced or removed name
// comes back with its old file. A WriteAtDurably makes its own range
// durable (as RWF_DSYNC). A file it has not seen since construction or the
// last crash counts as synced. Renames must stay within one directory.
//
// O_DIRECT is refused (kInvalidArgument, errno EINVAL, as tmpfs does), so
// the journal takes its page-cache path: every sync round is a WriteAt and
// a Sync this fake sees. ReopenReadOnlyFd passes the real descriptor
// through, so short-circuit reads work.
//
// Replaced and removed files wait under hidden names (".fault-fs-backup-N"
// in the same directory, left out of ListDir) until their directory is
// synced. Thread-safe: one mutex serializes every call, I/O included (a
// test fake; the order of calls is the point).
//
// Ownership: does not own `target`, which must outlive it; files it opens
// must not outlive it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"

namespace logfs::testing {

class FaultFileSystem : public env::FileSystemWrapper {
 public:
  explicit FaultFileSystem(env::FileSystem* target = env::FileSystem::Default());
  ~FaultFileSystem() override;

  FaultFileSystem(const FaultFileSystem&) = delete;
  FaultFileSystem& operator=(const FaultFileSystem&) = delete;

  // The switches (see the top of this file). Each call replaces the
  // earlier setting of the same switch.
  void FailSyncs(absl::string_view path_part) ABSL_LOCKS_EXCLUDED(mu_);
  void FailWrites(int errno_value, absl::string_view path_part) ABSL_LOCKS_EXCLUDED(mu_);
  void FailCloses(absl::string_view path_part) ABSL_LOCKS_EXCLUDED(mu_);
  void TearNextWrite(absl::string_view path_part, size_t prefix_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void ClearFaults() ABSL_LOCKS_EXCLUDED(mu_);

  // A power cut and reboot: every file opened before it fails from now on
  // (kFailedPrecondition; closing it is fine), unsynced bytes and names
  // are dropped as described above, and then everything on disk counts as
  // synced. Errors of the target file system while rolling back.
  absl::Status SimulateCrash() ABSL_LOCKS_EXCLUDED(mu_);

  // Syncs of paths containing `path_part` that reached the target and
  // succeeded: file Syncs and WriteAtDurably, and SyncDirs. An injected
  // failure is not counted.
  uint64_t file_syncs(absl::string_view path_part) const ABSL_LOCKS_EXCLUDED(mu_);
  // Faults injected so far, of every kind.
  uint64_t faults_injected() const ABSL_LOCKS_EXCLUDED(mu_);

  // FileSystem.
  absl::StatusOr<std::unique_ptr<env::WritableFile>> NewWritableFile(
      const std::string& path, const env::WritableFileOptions& options) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::unique_ptr<env::RandomAccessFile>> NewRandomAccessFile(
      const std::string& path) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Rename(const std::string& from, const std::string& to) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Remove(const std::string& path) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status CreateDir(const std::string& path) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status SyncDir(const std::string& dir) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  class File;
  // What a crash rolls one file back to.
  struct FileState {
    std::string path;  // now (follows renames)
    uint64_t synced_size = 0;
    struct Undo {
      uint64_t offset = 0;
      std::string old_bytes;
    };
    std::vector<Undo> undo;  // unsynced changes below synced_size, oldest first
  };
  // A name change not yet made durable by a SyncDir of `dir`.
  struct NameOp {
    enum Kind { kCreated, kRenamed, kRemoved } kind;
    std::string dir;
    std::string path;    // created, renamed to, or removed
    std::string from;    // kRenamed: the old name
    std::string backup;  // the file `path` named before (kRenamed, may be ""), or kRemoved's file
  };
  struct Fault {
    bool on = false;
    std::string path_part;
    bool Matches(const std::string& path) const;
  };

  // The state of the file at `path`, made (as synced at `size`) if new.
  std::shared_ptr<FileState> StateLocked(const std::string& path, uint64_t size)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the old bytes of [offset, offset + n) below the synced size
  // before `file` overwrites them.
  absl::Status SaveOldBytesLocked(FileState& state, env::WritableFile& file, uint64_t offset,
                                  size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes [offset, offset + n) of `state` durable.
  static void MarkDurable(FileState& state, uint64_t offset, size_t n);
  // Moves the state tracked at `from` (if any) to `to`.
  void MoveStateLocked(const std::string& from, const std::string& to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string BackupNameLocked(const std::string& path) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RollBackContentsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RollBackNamesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `path` and, if it is a directory, everything below it.
  absl::Status RemoveTree(const std::string& path);
  absl::Status InjectedLocked(int errno_value, absl::string_view call, const std::string& path)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // crashes so far
  absl::flat_hash_map<std::string, std::shared_ptr<FileState>> files_ ABSL_GUARDED_BY(mu_);
  std::vector<NameOp> name_ops_ ABSL_GUARDED_BY(mu_);  // oldest first
  uint64_t next_backup_ ABSL_GUARDED_BY(mu_) = 0;
  Fault sync_fault_ ABSL_GUARDED_BY(mu_);
  Fault write_fault_ ABSL_GUARDED_BY(mu_);
  int write_errno_ ABSL_GUARDED_BY(mu_) = 0;
  Fault close_fault_ ABSL_GUARDED_BY(mu_);
  Fault tear_fault_ ABSL_GUARDED_BY(mu_);
  size_t tear_prefix_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t faults_injected_ ABSL_GUARDED_BY(mu_) = 0;
  // Syncs that reached the target, by path (files and directories).
  absl::flat_hash_map<std::string, uint64_t> syncs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::testing
