// The FUSE low-level operations (fuse/ops.cc) and what they reach through
// the session's userdata.
#pragma once

#include <fuse_lowlevel.h>

#include "fsclient/client.h"
#include "fuse/request.h"

namespace logfs::fuse {

// The session's userdata: the mount the ops call, and the watcher that
// answers interrupted requests of dying callers (fuse/request.h). Both
// must outlive the session and every request it holds.
struct OpsContext {
  fsclient::Client* mount = nullptr;
  InterruptWatcher* interrupts = nullptr;
};

// The operations table for fuse_session_new, with an OpsContext as its
// userdata.
fuse_lowlevel_ops MakeOperations();

}  // namespace logfs::fuse
