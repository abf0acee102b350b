// The one place where errno leaves logfs code: internal statuses become
// the errno a FUSE reply carries. Thread-safe.
#pragma once

#include "absl/status/status.h"

namespace logfs::fuse {

// 0 for OK; else the attached errno (src/status/posix_error.h) or one
// derived from the status code. Logs statuses that become EIO, since those
// lose their detail on the way to the application.
int ToErrno(const absl::Status& status);

}  // namespace logfs::fuse
