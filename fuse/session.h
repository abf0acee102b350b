// Runs a FUSE low-level session for a client (fsclient::Client): mounts `mountpoint`, serves
// requests on its workers (fuse/worker_loop.h) until unmounted, told to
// unmount, or told to hand the mount to a successor process. Blocks. The
// mount is always nodev,nosuid and default_permissions (the kernel checks
// mode bits).
//
// Handing over (`logfs mount --takeover`, a restart of logfs-mount@; docs/
// OPERATIONS.md "Restarting a mount"), as JuiceFS's and DingoFS's mount
// daemons restart: the predecessor drops what it gave the kernel's cache,
// stops reading requests (those not read stay queued in the kernel),
// waits for the ones it read to be answered, seals its writers keeping
// their leases (Client::HandOff), and passes the /dev/fuse descriptor with
// a proto::MountHandoff (its session, the kernel's FUSE_INIT, every open
// file and directory handle by its fh) to the successor, which continues
// the same meta session, adopts the handles under the same fh values,
// replays FUSE_INIT into its own libfuse session and serves on. Callers
// see a pause. If the successor does not take over, the predecessor serves
// on (without long kernel caching, which it dropped); one told to go by
// SIGTERM (systemd's restart) unmounts instead.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "fsclient/client.h"
#include "store/format/logfs.pb.h"

namespace logfs::fuse {

class WorkerLoop;

// A mount handed over by a predecessor: what the successor serves.
struct Adoption {
  // The kernel connection's /dev/fuse descriptor: RunSession closes it
  // when it returns, whatever happened.
  int fuse_fd = -1;
  proto::MountHandoff state;
};

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
  // Set: serve the mount `adopt` hands over (the client already Resume()d
  // its session) instead of mounting. Not owned.
  const Adoption* adopt = nullptr;
  // How long a handoff waits for the requests the predecessor read to be
  // answered (each op is bounded by its own deadlines) before it gives up
  // and serves on.
  absl::Duration drain_wait = absl::Seconds(60);
};

// How a running session is told to end (mount_main: signals, the takeover
// socket, systemd's file descriptor store). Thread-safe; not from a signal
// handler.
class SessionControl {
 public:
  // Delivers the descriptor and the state to the successor; OK once the
  // successor has them and took over (the predecessor then exits without
  // unmounting), else the error (the predecessor serves on). Runs on the
  // session's thread; `fuse_fd` stays the session's.
  using Deliver = std::function<absl::Status(int fuse_fd, const proto::MountHandoff& state)>;

  // Ends the session as an unmount does: stop serving, answer what was
  // read, unmount. During a handoff: once it failed (if it succeeds, the
  // successor serves on). A handoff asked for and not under way yet is
  // called off.
  void Unmount() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the session to hand it over through `deliver`; false (and
  // nothing happens) if a handoff or unmount is already asked for or
  // under way.
  bool HandOff(Deliver deliver) ABSL_LOCKS_EXCLUDED(mu_);
  // True once an unmount was asked for (a signal): a successor that has
  // not served yet then lets its predecessor serve on.
  bool UnmountAsked() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return unmount_;
  }

 private:
  friend absl::StatusOr<bool> RunSession(fsclient::Client&, const SessionOptions&,
                                         const std::function<absl::Status()>&, SessionControl*);
  // The session's side: the loop now serving (null between loops).
  void Attach(WorkerLoop* loop, fsclient::Client* mount) ABSL_LOCKS_EXCLUDED(mu_);
  // The handoff asked for, taken: it is under way; nullopt for an unmount.
  std::optional<Deliver> TakeHandoff() ABSL_LOCKS_EXCLUDED(mu_);
  // The handoff under way failed: the session serves on, unless an
  // unmount was asked for meanwhile.
  void HandoffFailed() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  WorkerLoop* loop_ ABSL_GUARDED_BY(mu_) = nullptr;
  fsclient::Client* mount_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;   // an unmount or a handoff asked for
  bool unmount_ ABSL_GUARDED_BY(mu_) = false;  // an unmount asked for
  std::optional<Deliver> handoff_ ABSL_GUARDED_BY(mu_);  // asked for, not under way yet
};

// Calls `on_ready` once the mount is in place, before it is served (the
// caller reports readiness, e.g. to a waiting parent; a successor tells
// its predecessor, and may serve only once that one committed to exit:
// an error from `on_ready` ends an adopted session at once, neither
// served nor unmounted, and RunSession returns it). Returns when the file system is unmounted, after
// `mount.Shutdown()`: every request the mount still held has replied by
// then (false); or once the mount was handed to a successor (true), also
// after `mount.Shutdown()`, leaving the kernel mount to it. `control` (not
// null, outlives the call) is how the caller ends the session otherwise
// (signals are the caller's). kFailedPrecondition if mounting or adopting
// fails.
absl::StatusOr<bool> RunSession(fsclient::Client& mount, const SessionOptions& options,
                                const std::function<absl::Status()>& on_ready,
                                SessionControl* control);

}  // namespace logfs::fuse
