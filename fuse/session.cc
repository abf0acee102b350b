#include "fuse/session.h"

#include <fuse_lowlevel.h>
#include <glog/logging.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fuse/kernel_cache.h"
#include "fuse/ops.h"
#include "fuse/request.h"

namespace logfs::fuse {

absl::Status RunSession(fsclient::Client& mount, const SessionOptions& options,
                        const std::function<void()>& on_ready) {
  // fuse_opt splits options at commas; a backslash keeps one in the value.
  std::string fsname;
  for (char c : options.fsname) {
    if (c == ',' || c == '\\') fsname += '\\';
    fsname += c;
  }
  // libfuse mounts nodev,nosuid unless told otherwise (mount.fuse3 adds
  // dev,suid as root); say so anyway, as nothing may ever turn them off.
  std::string mount_options =
      absl::StrCat("fsname=", fsname, ",subtype=logfs,default_permissions,nodev,nosuid");
  if (geteuid() == 0 || options.allow_other) mount_options += ",allow_other";
  if (options.read_only) mount_options += ",ro";
  std::vector<std::string> args = {"logfs", "-o", mount_options};
  if (options.debug) args.push_back("-d");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_lowlevel_ops ops = MakeOperations();
  // Declared first, destroyed last: requests it watches name the session.
  InterruptWatcher interrupts;
  OpsContext context{&mount, &interrupts};
  fuse_session* se = fuse_session_new(&fargs, &ops, sizeof(ops), &context);
  if (se == nullptr) return absl::FailedPreconditionError("cannot create the FUSE session");
  if (fuse_set_signal_handlers(se) != 0) {
    fuse_session_destroy(se);
    return absl::FailedPreconditionError("cannot install signal handlers");
  }
  if (fuse_session_mount(se, options.mountpoint.c_str()) != 0) {
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mount at ", options.mountpoint,
                     " (is it an existing directory, and is /dev/fuse usable?)"));
  }
  // Meta's invalidations reach the kernel from here on (stopped by
  // mount.Shutdown(), before the session goes).
  FuseKernelCache kernel_cache(se);
  mount.coherence().Start(&kernel_cache);
  on_ready();
  fuse_loop_config* config = fuse_loop_cfg_create();
  fuse_loop_cfg_set_max_threads(config, options.max_threads);
  fuse_loop_cfg_set_idle_threads(config, 4);
  int rc = fuse_session_loop_mt(se, config);
  fuse_loop_cfg_destroy(config);
  // Requests still waiting on the mount's pools (a read, a stat, a close
  // behind a stalled replica) reply when they finish, each within its
  // deadline; a reply writes to the session's device descriptor and names
  // the session, so both must outlive them. After a signal the kernel
  // mount stays until they have replied; after an unmount it is gone.
  LOG(INFO) << "FUSE session ended: replying to the requests still waiting, then unmounting";
  // A drop of meta's may wait in the kernel for a directory lock held by a
  // request no worker will read now; unmounting ends that request.
  bool unmounted = false;
  if (!mount.coherence().StopWithin(absl::Seconds(2))) {
    LOG(WARNING) << "a cache invalidation is stuck in the kernel: unmounting first";
    fuse_session_unmount(se);
    unmounted = true;
  }
  mount.Shutdown();
  interrupts.Stop();  // its requests reply through the session
  if (!unmounted) fuse_session_unmount(se);
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  if (rc < 0) LOG(WARNING) << "FUSE loop ended with " << rc;
  return absl::OkStatus();
}

}  // namespace logfs::fuse
