// The FUSE low-level operations (fuse/ops.cc) and what they reach through
// the session's userdata.
#pragma once

#include <fuse_lowlevel.h>

#include <memory>

#include "absl/synchronization/mutex.h"
#include "fsclient/client.h"
#include "fuse/dir_stream.h"
#include "fuse/handle_table.h"
#include "fuse/request.h"

namespace logfs::fuse {

// One opendir: a paged listing (fuse/dir_stream.h). The kernel serializes
// readdir on one open directory, but a handle shared by threads of a
// process may still be read twice at once: the mutex orders them.
struct DirHandle {
  DirHandle(fsclient::Client& mount, uint64_t dir_ino)
      : ino(dir_ino), stream(dir_ino, [&mount, dir_ino](const std::string& start_after) {
          return mount.Readdir(dir_ino, start_after);
        }) {}
  const uint64_t ino;
  absl::Mutex mu;
  DirStream stream ABSL_GUARDED_BY(mu);
};

// The session's userdata: the mount the ops call, the watcher that
// answers interrupted requests of dying callers (fuse/request.h), and the
// tables of the file and directory handles the kernel holds. All must
// outlive the session and every request it holds.
struct OpsContext {
  fsclient::Client* mount = nullptr;
  InterruptWatcher* interrupts = nullptr;
  HandleTable<fsclient::OpenFile>* files = nullptr;
  HandleTable<DirHandle>* dirs = nullptr;
  // What the INIT callback settled with the kernel (fuse_conn_info's want
  // and max_write): set once, at INIT, before any other request.
  uint64_t fuse_want = 0;
  uint32_t fuse_max_write = 0;
};

// The operations table for fuse_session_new, with an OpsContext as its
// userdata.
fuse_lowlevel_ops MakeOperations();

}  // namespace logfs::fuse
