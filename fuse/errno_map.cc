#include "fuse/errno_map.h"

#include <glog/logging.h>

#include <cerrno>

#include "src/status/posix_error.h"

namespace logfs::fuse {

int ToErrno(const absl::Status& status) {
  int err = ErrnoFromStatus(status);
  if (err == EIO) LOG(WARNING) << "returning EIO for: " << status;
  return err;
}

}  // namespace logfs::fuse
