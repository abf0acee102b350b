// Statuses that carry an exact errno across processes. The namespace
// (meta) and the FUSE layer agree on POSIX errors (ENOTEMPTY, EISDIR, ...)
// that absl::StatusCode alone cannot tell apart, so such a status keeps the
// errno as a payload, and the RPC layer ships it in ErrorResponse.
// Thread-safe: pure functions.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace logfs {

// A status with the canonical code for `errno_value` (absl::ErrnoToStatus)
// and the errno itself attached.
absl::Status PosixError(int errno_value, absl::string_view message);

// The attached errno, or 0 when none. Code below fuse/ tests for a
// particular POSIX error with it (AttachedErrno(s) == EBUSY); which errno
// a status without one reports is fuse/errno_map's business alone.
int AttachedErrno(const absl::Status& status);

}  // namespace logfs
