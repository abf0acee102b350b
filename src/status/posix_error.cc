#include "src/status/posix_error.h"

#include <cerrno>
#include <string>

#include "absl/numeric/int128.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace logfs {
namespace {
constexpr char kErrnoPayloadUrl[] = "logfs/errno";
}  // namespace

absl::Status PosixError(int errno_value, absl::string_view message) {
  absl::Status status = absl::ErrnoToStatus(errno_value, message);
  // ErrnoToStatus prefixes strerror; keep the caller's message plain.
  status = absl::Status(status.code(), message);
  status.SetPayload(kErrnoPayloadUrl, absl::Cord(std::to_string(errno_value)));
  return status;
}

int AttachedErrno(const absl::Status& status) {
  auto payload = status.GetPayload(kErrnoPayloadUrl);
  int value = 0;
  if (payload.has_value() && absl::SimpleAtoi(std::string(*payload), &value)) return value;
  return 0;
}

int ErrnoFromStatus(const absl::Status& status) {
  if (status.ok()) return 0;
  if (int attached = AttachedErrno(status); attached != 0) return attached;
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return ENOENT;
    case absl::StatusCode::kAlreadyExists: return EEXIST;
    case absl::StatusCode::kPermissionDenied: return EPERM;
    case absl::StatusCode::kInvalidArgument: return EINVAL;
    case absl::StatusCode::kOutOfRange: return EINVAL;
    case absl::StatusCode::kResourceExhausted: return ENOSPC;
    // A server that does not answer in time is, for the caller, the same
    // cause as one that cannot be reached (README "Errors"): EIO, as an NFS
    // soft mount answers; ETIMEDOUT is not an errno file calls document.
    case absl::StatusCode::kDeadlineExceeded: return EIO;
    case absl::StatusCode::kUnimplemented: return ENOSYS;
    case absl::StatusCode::kFailedPrecondition: return EIO;
    case absl::StatusCode::kAborted: return EAGAIN;
    case absl::StatusCode::kUnauthenticated: return EACCES;
    default: return EIO;
  }
}

}  // namespace logfs
