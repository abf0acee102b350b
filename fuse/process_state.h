// Whether the process behind a FUSE request is dying, from /proc: it has
// SIGKILL pending (on its thread or its thread group), or another signal
// that ends it (pending, not blocked, ignored or caught, fatal by
// default: SIGTERM, SIGQUIT, ...), or it is exiting (PF_EXITING) because
// a signal killed it (its exit code, which /proc shows only to a process
// that may ptrace it: root's mount daemon). A FLUSH sent by such a process
// (its own close, or the implicit close of every descriptor at exit)
// gets an answer it will never read, so it may get one at once
// (fuse/request.h). A process exiting normally (exit_code without a
// signal) is not dying: its last close still waits for the seal, so that
// its parent's wait(2) returns once the file's length is final.
#pragma once

#include <sys/types.h>

#include "absl/strings/string_view.h"

namespace logfs::fuse {

// True if task `tid` (a thread id, as FUSE passes it) is dying as above.
// A task whose /proc entry cannot be read (gone, in another pid namespace,
// hidden) and `tid` <= 0 (a request the kernel sends on its own, as
// RELEASE) never are. Reads two small /proc files; thread-safe.
bool CallerIsDying(pid_t tid);

// True if task `tid` has capability `cap` (CAP_FSETID, ...) in its
// effective set (/proc/TID/status CapEff) and lives in this process's
// user namespace (the initial one, for a mount daemon run as root), as the
// kernel's capable() asks of the
// caller; false if /proc cannot tell, so a caller that cannot be seen is
// treated as unprivileged. The kernel tells
// a filesystem that a direct write's caller lacks CAP_FSETID
// (FUSE_WRITE_KILL_SUIDGID), but libfuse 3.14's low-level write does not
// pass the flag on; this asks the same question. Thread-safe.
bool CallerHasCapability(pid_t tid, int cap);

// The same for the text of /proc/TID/status (unit-testable).
bool StatusHasCapability(absl::string_view status, int cap);

// True if `gid` is among task `tid`'s supplementary groups (/proc/TID/status
// "Groups:", what libfuse's fuse_req_getgroups reads, without the request,
// which a waiting op may no longer touch); false if /proc cannot tell.
// Thread-safe.
bool CallerInGroup(pid_t tid, gid_t gid);
// The same for the text of /proc/TID/status (unit-testable).
bool StatusInGroup(absl::string_view status, gid_t gid);

// The same judgement from the texts of /proc/TID/stat and
// /proc/TID/status (unit-testable); false for text it cannot parse.
bool IsDying(absl::string_view stat, absl::string_view status);

}  // namespace logfs::fuse
