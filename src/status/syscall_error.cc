#include "src/status/syscall_error.h"

#include "src/status/posix_error.h"

namespace logfs {

absl::Status SyscallError(int errno_value, absl::string_view what) {
  // ErrnoToStatus adds strerror to the message; PosixError attaches the errno.
  return PosixError(errno_value, absl::ErrnoToStatus(errno_value, what).message());
}

}  // namespace logfs
