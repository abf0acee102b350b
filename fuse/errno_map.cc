#include "fuse/errno_map.h"

#include <glog/logging.h>

#include <cerrno>

#include "src/status/posix_error.h"
#include "src/util/log_rate_limit.h"

namespace logfs::fuse {

int ToErrno(const absl::Status& status) {
  int err = ErrnoFromStatus(status);
  // A failing cluster can fail every call of a busy application.
  if (err == EIO) LOGFS_LOG_EVERY_MS(WARNING, 1000) << "returning EIO for: " << status;
  return err;
}

int ToErrno(Refusal refusal) {
  switch (refusal) {
    case Refusal::kSpecialFile: return EPERM;
    case Refusal::kHardLink: return EPERM;
    case Refusal::kXattrBufferTooSmall: return ERANGE;
    case Refusal::kNotRoot: return EPERM;
    case Refusal::kFallocateMode: return EOPNOTSUPP;
  }
  return EIO;
}

}  // namespace logfs::fuse
