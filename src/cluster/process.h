// Child processes and small file helpers shared by the embedded cluster,
// the mount daemon and the tests (durable file helpers: src/env/
// posix_file.h). Thread-compatible.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace logfs::cluster {

// Starts `argv[0]` with `argv`, stdout and stderr appended to `log_path`
// (or inherited when empty), stdin /dev/null. Returns the child's pid.
// kInternal if fork fails; an exec failure shows as the child exiting with
// status 127. A non-empty `netns` is a network namespace file (e.g.
// /run/netns/NAME) the child joins before exec, as `nsenter --net=` does:
// only the network namespace changes, so the child's FUSE mounts stay
// visible here. Errors: the errno of opening `netns`; a failed setns shows
// as exit status 126.
//
// The child inherits this process's other descriptors not marked
// close-on-exec, unless `close_inherited`: then it closes them before
// exec, so that a server that outlives them does not hold files of a FUSE
// mount open (keeping it busy). Not the default: closing a logfs file
// sends a FLUSH, which seals its writer's segment and waits for meta, so
// a child that is itself the only meta would wait for itself.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path,
                            const std::string& netns = "", bool close_inherited = false);

// True while `pid` (our child) has not exited; reaps it if it has, storing
// its wait status in `*wait_status` when given.
bool ChildRunning(pid_t pid, int* wait_status = nullptr);

// Sends `signal` and waits up to `timeout` for the child to exit, then
// SIGKILLs it. Returns once it has been reaped.
void StopChild(pid_t pid, int signal, absl::Duration timeout);

// Polls for up to `timeout` until `path` exists and is non-empty, and
// returns its contents without a trailing newline. Stops early with
// kFailedPrecondition if `pid` (when > 0) exits meanwhile.
absl::StatusOr<std::string> WaitForFile(const std::string& path, absl::Duration timeout,
                                        pid_t pid);

// The last non-empty line of a text file ("" if none), for error messages.
std::string LastLine(const std::string& path);

}  // namespace logfs::cluster
