// Runs a FUSE low-level session for a client (fsclient::Client): mounts `mountpoint`, serves
// requests on a multithreaded loop until unmounted or signalled, then
// unmounts. Blocks. The mount is always nodev,nosuid and
// default_permissions (the kernel checks mode bits).
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "fsclient/client.h"

namespace logfs::fuse {

struct SessionOptions {
  std::string mountpoint;
  int max_threads = 16;  // FUSE worker threads
  bool debug = false;    // libfuse's -d tracing
  // The source field of /proc/mounts (fuse(8) fsname=); the mount helper
  // puts the meta list here so that `mount -a` sees its fstab line mounted.
  std::string fsname = "logfs";
  // Other users may use the mount (fuse(8) allow_other). Always on as root;
  // others need user_allow_other in /etc/fuse.conf.
  bool allow_other = false;
  // The kernel mounts it read-only (MS_RDONLY): writes fail with EROFS.
  bool read_only = false;
};

// Calls `on_ready` once the mount is in place and served (the caller
// reports readiness, e.g. to a waiting parent). Returns when the file
// system is unmounted, after `mount.Shutdown()`: every request the mount
// still held has replied by then. kFailedPrecondition if mounting fails.
absl::Status RunSession(fsclient::Client& mount, const SessionOptions& options,
                        const std::function<void()>& on_ready);

}  // namespace logfs::fuse
