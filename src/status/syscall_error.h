// The one place a failed syscall becomes a Status (STYLE §4: syscalls are
// one of the three error boundaries). The code is absl::ErrnoToStatus's
// (ENOENT -> kNotFound, ENOSPC -> kResourceExhausted, EIO -> kUnknown, ...)
// and the errno itself rides along as a PosixError payload, so the FUSE
// layer answers with exactly the errno the kernel gave us.
// Thread-safe: pure functions.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace logfs {

// A status for a failed syscall: "`what`: strerror(errno_value)", the code
// for `errno_value` and the errno attached. `errno_value` must not be 0.
absl::Status SyscallError(int errno_value, absl::string_view what);

}  // namespace logfs
