// The one place where errno leaves logfs code: internal statuses become
// the errno a FUSE reply carries. Thread-safe.
#pragma once

#include "absl/status/status.h"

namespace logfs::fuse {

// 0 for OK; else the attached errno (src/status/posix_error.h) or one
// derived from the status code (kNotFound→ENOENT, kResourceExhausted→
// ENOSPC, kUnavailable/kDeadlineExceeded/kDataLoss/kInternal→EIO, ...; the
// table is in README "Errors"). Logs statuses that become EIO, since those
// lose their detail on the way to the application.
int ToErrno(const absl::Status& status);

// Calls the FUSE layer refuses by itself, before any status exists; each
// is a deliberate difference from POSIX (README "Errors").
enum class Refusal {
  kXattrBufferTooSmall,  // getxattr/listxattr into a short buffer: ERANGE
  kNotRoot,              // a root-only control xattr set by another user: EPERM
  kFallocateMode,        // fallocate that would change size or contents: EOPNOTSUPP
};

// The errno a refusal answers with.
int ToErrno(Refusal refusal);

}  // namespace logfs::fuse
