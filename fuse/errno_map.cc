#include "fuse/errno_map.h"

#include <glog/logging.h>

#include <cerrno>

#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"

namespace logfs::fuse {

namespace {

// The errno for a status that carries none, by its code (README "Errors").
int ErrnoOfCode(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kPermissionDenied:
      return EPERM;
    case absl::StatusCode::kInvalidArgument:
      return EINVAL;
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kResourceExhausted:
      return ENOSPC;
    // A server that does not answer in time is, for the caller, the same
    // cause as one that cannot be reached (README "Errors"): EIO, as an NFS
    // soft mount answers; ETIMEDOUT is not an errno file calls document.
    case absl::StatusCode::kDeadlineExceeded:
      return EIO;
    case absl::StatusCode::kUnimplemented:
      return ENOSYS;
    case absl::StatusCode::kFailedPrecondition:
      return EIO;
    case absl::StatusCode::kAborted:
      return EAGAIN;
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    default:
      return EIO;
  }
}

// A socket's errno (a server refused, reset or unreachable): for a file
// call that is the same cause as a timeout, EIO (README "Errors"), however
// deep in the stack the syscall that saw it was.
bool IsTransportErrno(int err) {
  switch (err) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ENETDOWN:
    case ENOTCONN:
    case ESHUTDOWN:
      return true;
    default:
      return false;
  }
}

}  // namespace

int ToErrno(const absl::Status& status) {
  if (status.ok()) return 0;
  int err = AttachedErrno(status);
  if (err == 0) err = ErrnoOfCode(status);
  if (IsTransportErrno(err)) err = EIO;
  // A failing cluster can fail every call of a busy application.
  if (err == EIO) LOGFS_LOG_EVERY_MS(WARNING, 1000) << "returning EIO for: " << status;
  return err;
}

int ToErrno(Refusal refusal) {
  switch (refusal) {
    case Refusal::kXattrBufferTooSmall: return ERANGE;
    case Refusal::kNotRoot: return EPERM;
    case Refusal::kFallocateMode: return EOPNOTSUPP;
  }
  return EIO;
}

}  // namespace logfs::fuse
