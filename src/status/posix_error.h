// Statuses that carry an exact errno across processes. The namespace
// (meta) and the FUSE layer agree on POSIX errors (ENOTEMPTY, EISDIR, ...)
// that absl::StatusCode alone cannot tell apart, so such a status keeps the
// errno as a payload, and the RPC layer ships it in ErrorResponse.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace logfs {

// A status with the canonical code for `errno_value` (absl::ErrnoToStatus)
// and the errno itself attached.
absl::Status PosixError(int errno_value, absl::string_view message);

// The errno to report for `status`: the attached one if any, else one
// derived from the code (kNotFound→ENOENT, kResourceExhausted→ENOSPC,
// kUnavailable/kDeadlineExceeded/kDataLoss/kInternal→EIO, ...; the table
// is in README "Errors"). 0 for OK.
int ErrnoFromStatus(const absl::Status& status);

// The attached errno, or 0 when none.
int AttachedErrno(const absl::Status& status);

}  // namespace logfs
