// The kernel's dentry and attribute caches of one FUSE session, as
// fsclient::CacheCoherence drops entries from them: the FUSE notify calls
// (fuse_lowlevel_notify_inval_entry / _inval_inode). Either may block while
// the kernel holds the directory's lock; call them only off FUSE workers
// (CacheCoherence's poll thread), never from an op, which may hold it.
#pragma once

#include <fuse_lowlevel.h>

#include <cstdint>
#include <string>

#include "fsclient/cache_coherence.h"

namespace logfs::fuse {

class FuseKernelCache : public fsclient::KernelCache {
 public:
  // `session` must outlive this (and every call).
  explicit FuseKernelCache(fuse_session* session) : session_(session) {}

  // Nothing cached (ENOENT) is not an error; others are logged (rate
  // limited) and the kernel keeps the entry until its timeout.
  void InvalidateEntry(uint64_t parent, const std::string& name) override;
  // The attributes; the kernel then drops cached data whose mtime or size
  // changed when it next reads them (FUSE_AUTO_INVAL_DATA).
  void InvalidateInode(uint64_t ino) override;

 private:
  fuse_session* const session_;
};

}  // namespace logfs::fuse
