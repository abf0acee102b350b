// Runs a FUSE low-level session for a Mount: mounts `mountpoint`, serves
// requests on a multithreaded loop until unmounted or signalled, then
// unmounts. Blocks.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "fuse/mount.h"

namespace logfs::fuse {

struct SessionOptions {
  std::string mountpoint;
  int max_threads = 16;  // FUSE worker threads
  bool debug = false;    // libfuse's -d tracing
};

// Calls `on_ready` once the mount is in place and served (the caller
// reports readiness, e.g. to a waiting parent). Returns when the file
// system is unmounted. kFailedPrecondition if mounting fails.
absl::Status RunSession(Mount& mount, const SessionOptions& options,
                        const std::function<void()>& on_ready);

}  // namespace logfs::fuse
