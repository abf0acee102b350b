// How a mount daemon's /dev/fuse descriptor and its handover state
// (proto::MountHandoff, fuse/session.h) reach a successor on this host:
//
// - over the takeover socket: the running daemon listens on an abstract
//   Unix socket named after its mount point; `logfs mount --takeover MNT`
//   connects (the peer must be root or the daemon's own user), and gets
//   both descriptors in one SCM_RIGHTS message, the state in a memfd; it
//   answers "ready", or why it cannot (the daemon serves on), and serves
//   once the daemon answers "commit" (mount_handoff.cc);
// - through systemd's file descriptor store, on a restart of
//   logfs-mount@ (FileDescriptorStoreMax=): on SIGTERM, when the unit's
//   job is a restart, the daemon stores both (FDSTORE=1, names logfs-fuse
//   and logfs-state) and exits; the new instance finds them in
//   $LISTEN_FDS, and removes them from the store once it serves
//   (FDSTOREREMOVE=1), so that a kill -9 of it still ends the connection.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <sys/types.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuse/session.h"
#include "store/format/logfs.pb.h"

namespace logfs::main {

// The abstract socket name (without the leading NUL) for `mountpoint`.
std::string TakeoverSocketName(const std::string& mountpoint);

// A handover received by a successor.
struct Handover {
  fuse::Adoption adoption;
  // The takeover socket's connection (the predecessor waits on it for the
  // answer), or -1 from the fd store.
  int connection = -1;
  pid_t predecessor = 0;  // the socket's predecessor (0: from the fd store)
  bool from_fd_store = false;
  // Closes the connection, and adoption.fuse_fd unless it went to a
  // session (which closes it: the caller sets it to -1 then).
  ~Handover();
};

// `logfs mount --takeover`: asks the daemon serving `mountpoint` for its
// mount and waits (up to `wait`) for it to drain and send it. Errors:
// kNotFound when no daemon listens for that mount point, the daemon's
// refusal (kFailedPrecondition), kDeadlineExceeded, a state that does not
// parse or is of a version this one does not speak.
absl::StatusOr<std::unique_ptr<Handover>> RequestTakeover(const std::string& mountpoint,
                                                          absl::Duration wait);
// The handover a restarted logfs-mount@ instance finds in $LISTEN_FDS;
// null if there is none. Errors: a state that does not parse, or of a
// version this one does not speak.
absl::StatusOr<std::unique_ptr<Handover>> HandoverFromFdStore();
// Tells the predecessor (or systemd) how the takeover went, before the
// successor serves: an error makes the socket's predecessor serve on (and
// is returned); OK is returned once the predecessor committed to exit
// (the socket; systemd: the descriptors are taken out of its store), and
// only then may the successor serve. kAborted: the predecessor did not
// commit, and serves on.
absl::Status AnswerHandover(Handover& handover, const absl::Status& result);

// What the running daemon does on SIGTERM under systemd.
enum class SigtermHandoff {
  kAuto,    // hand over to the fd store when the unit's job is a restart (asked over D-Bus)
  kAlways,  // hand over to the fd store on every SIGTERM under systemd
  kNever,   // unmount
};

// The running daemon's side: turns SIGTERM, SIGINT and SIGHUP into the
// session's end (an unmount, or a handover to the fd store as `sigterm`
// says), and serves the takeover socket. Start before RunSession, Stop
// after it returns.
class HandoffListener {
 public:
  HandoffListener(fuse::SessionControl& control, std::string mountpoint, SigtermHandoff sigterm,
                  bool can_hand_off);
  ~HandoffListener();  // Stop
  // Installs the signal handlers and starts the listening thread, which
  // listens on the takeover socket and then runs `after_predecessor` (may
  // be empty): at once, or with `predecessor` > 0 (the daemon this one
  // took over from through the takeover socket) once that daemon has
  // exited, which frees the socket's name and its metrics port. A name
  // that cannot be bound is logged (the mount cannot be taken over by
  // hand then). Errors: the signal pipe or eventfd cannot be made.
  absl::Status Start(pid_t predecessor, std::function<void()> after_predecessor);
  void Stop();

 private:
  absl::Status Listen();
  void Run();
  // False if Stop came first.
  bool WaitForExit(pid_t predecessor);
  void ReadSignals();
  void OnSignal(int signal);
  void OnConnection(int connection);
  absl::Status StoreInSystemd(int fuse_fd, const proto::MountHandoff& state);

  fuse::SessionControl& control_;
  const std::string mountpoint_;
  const SigtermHandoff sigterm_;
  const bool can_hand_off_;  // false: an embedded cluster's mount
  int listen_fd_ = -1;
  int signal_read_fd_ = -1;  // the signal handlers' pipe
  int wake_fd_ = -1;         // eventfd: Stop
  std::thread thread_;
};

}  // namespace logfs::main
