#include "fuse/kernel_cache.h"

#include <glog/logging.h>

#include <cerrno>
#include <cstring>

#include "src/util/log_rate_limit.h"

namespace logfs::fuse {
namespace {

void LogFailure(const char* what, int result) {
  // ENOENT: the kernel has nothing under that name or inode. ENOTCONN:
  // unmounting; ENOSYS: a kernel without notifications.
  if (result == 0 || result == -ENOENT || result == -ENOTCONN) return;
  LOGFS_LOG_EVERY_MS(WARNING, 10000) << what << " failed: " << std::strerror(-result)
                                     << "; the kernel keeps it until its timeout";
}

}  // namespace

void FuseKernelCache::InvalidateEntry(uint64_t parent, const std::string& name) {
  LogFailure("fuse_lowlevel_notify_inval_entry",
             fuse_lowlevel_notify_inval_entry(session_, parent, name.data(), name.size()));
}

void FuseKernelCache::InvalidateInode(uint64_t ino) {
  LogFailure("fuse_lowlevel_notify_inval_inode",
             fuse_lowlevel_notify_inval_inode(session_, ino, /*off=*/-1, /*len=*/0));
}

}  // namespace logfs::fuse
