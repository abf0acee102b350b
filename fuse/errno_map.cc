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

}  // namespace logfs::fuse
