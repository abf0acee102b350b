// A file system whose every fdatasync (WritableFile::Sync, and the
// RWF_DSYNC write WriteAtDurably) first waits a random time within a range:
// a slow disk. It exists for the fault suite's slow replica (`logfs segd
// --TEST_sync_delay_ms=20-50`, tests/slow_replica_fault_test.cc) and is
// never used otherwise; it lives in src/env, not tests/fakes, because the
// segd binary may not include tests/.
//
// Thread-safe if the target is. Does not own the target, which must
// outlive it and the files it opens.
#pragma once

#include <memory>
#include <mutex>
#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "src/env/file_system.h"

namespace logfs::env {

struct SyncDelay {
  absl::Duration min;
  absl::Duration max;  // >= min
  // Delay only while a file exists at this path (a test turns the slow
  // disk on and off; checked at every sync); "": always.
  std::string only_while;
};

// "20-50" (a range of ms) or "30" (exactly): EINVAL (PosixError) otherwise.
// only_while is left empty.
absl::StatusOr<SyncDelay> ParseSyncDelay(absl::string_view text);

class SyncDelayFileSystem : public FileSystemWrapper {
 public:
  SyncDelayFileSystem(FileSystem* target, SyncDelay delay);

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path, const WritableFileOptions& options) override;

  // Sleeps for a random time within the range (unless switched off).
  void Delay();

 private:
  const SyncDelay delay_;
  std::mutex mu_;
  std::minstd_rand random_;  // guarded by mu_
};

}  // namespace logfs::env
