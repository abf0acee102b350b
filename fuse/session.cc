#include "fuse/session.h"

#include <fuse_lowlevel.h>
#include <glog/logging.h>
#include <linux/fuse.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "fuse/kernel_cache.h"
#include "fuse/ops.h"
#include "fuse/request.h"
#include "fuse/worker_loop.h"

namespace logfs::fuse {

void SessionControl::Attach(WorkerLoop* loop, fsclient::Client* mount) {
  absl::MutexLock lock(&mu_);
  loop_ = loop;
  mount_ = mount;
  if (loop_ != nullptr && ending_) loop_->Stop();
}

void SessionControl::Unmount() {
  absl::MutexLock lock(&mu_);
  if (unmount_) return;
  unmount_ = true;
  ending_ = true;
  handoff_.reset();  // an unmount wins over a handoff not yet under way
  if (loop_ != nullptr) loop_->Stop();
}

bool SessionControl::HandOff(Deliver deliver) {
  fsclient::Client* mount;
  {
    absl::MutexLock lock(&mu_);
    if (ending_) return false;
    ending_ = true;
    handoff_ = std::move(deliver);
    mount = mount_;
  }
  // What the kernel keeps of this mount's answers goes first, while the
  // workers still serve: a drop may wait for a directory lock that a
  // request being served holds (CacheCoherence::StopWithin). From here on
  // nothing is given to the kernel for long; the successor's own cache
  // session starts afresh.
  if (mount != nullptr && !mount->coherence().DropWithin(absl::Seconds(10))) {
    LOG(WARNING) << "handoff: dropping the kernel's cached names took over 10 s";
  }
  absl::MutexLock lock(&mu_);
  if (loop_ != nullptr) loop_->Stop();
  return true;
}

std::optional<SessionControl::Deliver> SessionControl::TakeHandoff() {
  absl::MutexLock lock(&mu_);
  std::optional<Deliver> handoff = std::move(handoff_);
  handoff_.reset();
  return handoff;
}

void SessionControl::HandoffFailed() {
  absl::MutexLock lock(&mu_);
  ending_ = unmount_;
}

namespace {

// libfuse's session over `options`: not mounted yet.
fuse_session* NewSession(const SessionOptions& options, fuse_lowlevel_ops* ops,
                         OpsContext* context) {
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
  return fuse_session_new(&fargs, ops, sizeof(*ops), context);
}

// The unique the replayed FUSE_INIT carries: even, as the kernel's are,
// and far above any it gives out (it counts up from 0 by 2), so that the
// kernel answers the reply with ENOENT (no such request), which libfuse
// ignores, instead of taking it for a reply to a request of its own.
constexpr uint64_t kReplayedInitUnique = ~uint64_t{0} - 1;

// Serves `adopt`'s handover in `se`: the FUSE_INIT the kernel sent the
// predecessor goes through this session's libfuse (which answers nothing
// before INIT), then every handle the predecessor had open is put back
// under its fh.
absl::Status AdoptInto(fuse_session* se, fsclient::Client& mount, const Adoption& adopt,
                       OpsContext& context) {
  const proto::MountHandoff& state = adopt.state;
  // INIT's argument: at least major, minor, max_readahead and flags.
  if (state.fuse_init().size() < sizeof(fuse_in_header) + 4 * sizeof(uint32_t) ||
      reinterpret_cast<const fuse_in_header*>(state.fuse_init().data())->opcode != FUSE_INIT) {
    return absl::FailedPreconditionError("the handover carries no FUSE_INIT request");
  }
  std::string init = state.fuse_init();
  fuse_in_header header;
  std::memcpy(&header, init.data(), sizeof(header));
  if (header.len != init.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the handed-over FUSE_INIT says ", header.len, " bytes and has ", init.size()));
  }
  header.unique = kReplayedInitUnique;
  std::memcpy(init.data(), &header, sizeof(header));
  fuse_buf buf;
  std::memset(&buf, 0, sizeof(buf));
  buf.mem = init.data();
  buf.size = init.size();
  fuse_session_process_buf(se, &buf);
  // The kernel keeps what it settled with the first daemon: one that
  // would settle otherwise (another release's INIT callback) must not
  // serve this connection.
  if (context.fuse_want != state.fuse_want() || context.fuse_max_write != state.fuse_max_write()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this logfs mount would settle FUSE capabilities 0x", absl::Hex(context.fuse_want),
        " and max_write ", context.fuse_max_write, " with the kernel, the running daemon settled 0x",
        absl::Hex(state.fuse_want()), " and ", state.fuse_max_write(),
        ": unmount and mount again instead"));
  }
  for (const proto::HandedOffFile& handed : state.files()) {
    absl::StatusOr<std::unique_ptr<fsclient::OpenFile>> file = mount.Adopt(handed);
    if (!file.ok()) {
      return absl::Status(file.status().code(), absl::StrCat("cannot adopt the handle of inode ",
                                                             handed.ino(), ": ",
                                                             file.status().message()));
    }
    if (!context.files->AddAt(handed.fh(), *std::move(file))) {
      return absl::FailedPreconditionError(absl::StrCat("file handle ", handed.fh(), " twice"));
    }
  }
  for (const proto::HandedOffDir& handed : state.dirs()) {
    auto dir = std::make_shared<DirHandle>(mount, handed.ino());
    {
      absl::MutexLock lock(&dir->mu);
      dir->stream.Restore(handed);
    }
    if (!context.dirs->AddAt(handed.fh(), std::move(dir))) {
      return absl::FailedPreconditionError(absl::StrCat("dir handle ", handed.fh(), " twice"));
    }
  }
  LOG(INFO) << "adopted mount " << state.mount_id() << " at " << state.mountpoint() << ": "
            << state.files_size() << " open files, " << state.dirs_size()
            << " open directories";
  return absl::OkStatus();
}

// What the successor needs besides the descriptor, once drained and sealed.
proto::MountHandoff Describe(const SessionOptions& options, const fsclient::Client::Session& session,
                             const std::string& init, const OpsContext& context) {
  proto::MountHandoff state;
  state.set_mountpoint(options.mountpoint);
  state.set_mount_id(session.mount_id);
  state.set_last_call_seq(session.last_call_seq);
  state.set_cache_lease_ms(session.cache_lease_ms);
  state.set_fuse_init(init);
  for (const auto& [fh, file] : context.files->Snapshot()) {
    proto::HandedOffFile* handed = state.add_files();
    *handed = fsclient::Client::Describe(*file);
    handed->set_fh(fh);
  }
  for (const auto& [fh, dir] : context.dirs->Snapshot()) {
    proto::HandedOffDir* handed = state.add_dirs();
    {
      absl::MutexLock lock(&dir->mu);
      dir->stream.Export(handed);
    }
    handed->set_fh(fh);
    handed->set_ino(dir->ino);
  }
  state.set_fuse_want(context.fuse_want);
  state.set_fuse_max_write(context.fuse_max_write);
  return state;
}

// An adopted session was not mounted by libfuse (it knows no mount
// point): unmounted here, lazily as libfuse does, by fusermount3 for a
// user that may not umount2.
void UnmountAdopted(const std::string& mountpoint) {
  if (umount2(mountpoint.c_str(), MNT_DETACH) == 0) return;
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/fusermount3", "fusermount3", "-u", "-z", "--", mountpoint.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    LOG(ERROR) << "cannot unmount " << mountpoint;
  }
}

}  // namespace

absl::StatusOr<bool> RunSession(fsclient::Client& mount, const SessionOptions& options,
                                const std::function<absl::Status()>& on_ready,
                                SessionControl* control) {
  fuse_lowlevel_ops ops = MakeOperations();
  // Declared first, destroyed last: requests it watches name the session.
  InterruptWatcher interrupts;
  HandleTable<fsclient::OpenFile> files;
  HandleTable<DirHandle> dirs;
  OpsContext context{&mount, &interrupts, &files, &dirs};
  const bool adopted = options.adopt != nullptr;
  fuse_session* se = NewSession(options, &ops, &context);
  if (se == nullptr) {
    if (adopted) close(options.adopt->fuse_fd);
    return absl::FailedPreconditionError("cannot create the FUSE session");
  }
  // libfuse takes /dev/fd/N as a descriptor already connected.
  const std::string mount_target =
      adopted ? absl::StrCat("/dev/fd/", options.adopt->fuse_fd) : options.mountpoint;
  if (fuse_session_mount(se, mount_target.c_str()) != 0) {
    fuse_session_destroy(se);
    if (adopted) close(options.adopt->fuse_fd);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mount at ", options.mountpoint,
                     " (is it an existing directory, and is /dev/fuse usable?)"));
  }
  if (adopted) {
    if (absl::Status s = AdoptInto(se, mount, *options.adopt, context); !s.ok()) {
      fuse_session_destroy(se);  // closes the descriptor; the predecessor keeps its own
      return absl::FailedPreconditionError(absl::StrCat("cannot take over: ", s.message()));
    }
  }
  // Meta's invalidations reach the kernel from here on (stopped by
  // mount.Shutdown(), before the session goes).
  FuseKernelCache kernel_cache(se);
  mount.coherence().Start(&kernel_cache);
  if (absl::Status ready = on_ready(); !ready.ok()) {
    // Adopted: the predecessor serves on, and this one leaves the mount
    // to it. A mount of this daemon's own goes.
    mount.Shutdown();
    interrupts.Stop();
    if (!adopted) fuse_session_unmount(se);
    fuse_session_destroy(se);
    return ready;
  }
  // The kernel sends FUSE_INIT once per connection: a successor of this
  // daemon gets it from here.
  std::string init = adopted ? options.adopt->state.fuse_init() : std::string();
  bool handed_off = false;
  bool unmounted = false;
  for (;;) {
    WorkerLoop loop(se, options.max_threads);
    control->Attach(&loop, &mount);
    absl::StatusOr<WorkerLoop::End> end = loop.Run();
    control->Attach(nullptr, &mount);
    if (std::string read = loop.init_request(); !read.empty()) init = std::move(read);
    if (!end.ok()) LOG(ERROR) << "FUSE workers: " << end.status();
    std::optional<SessionControl::Deliver> handoff = control->TakeHandoff();
    if (!end.ok() || *end == WorkerLoop::End::kUnmounted || !handoff.has_value()) {
      unmounted = end.ok() && *end == WorkerLoop::End::kUnmounted;
      break;
    }
    LOG(INFO) << "handing the mount over: answering the requests read so far";
    absl::Status handed;
    if (!interrupts.WaitIdle(options.drain_wait)) {
      handed = absl::DeadlineExceededError(absl::StrCat(
          "requests were still being answered after ", absl::FormatDuration(options.drain_wait)));
    }
    absl::StatusOr<fsclient::Client::Session> session =
        handed.ok() ? mount.HandOff() : absl::StatusOr<fsclient::Client::Session>(handed);
    if (session.ok()) {
      handed = (*handoff)(fuse_session_fd(se), Describe(options, *session, init, context));
      if (!handed.ok()) mount.CancelHandOff();
    } else {
      handed = session.status();
    }
    if (handed.ok()) {
      handed_off = true;
      break;
    }
    LOG(ERROR) << "handoff failed, serving on (the kernel caches nothing for long now): "
               << handed;
    control->HandoffFailed();
  }
  if (handed_off) {
    LOG(INFO) << "mount handed over: exiting without unmounting";
    interrupts.Stop();
    mount.Shutdown();
    fuse_session_destroy(se);  // closes this process's descriptor only
    return true;
  }
  // Requests still waiting on the mount's pools (a read, a stat, a close
  // behind a stalled replica) reply when they finish, each within its
  // deadline; a reply writes to the session's device descriptor and names
  // the session, so both must outlive them. After a stop the kernel
  // mount stays until they have replied; after an unmount it is gone.
  LOG(INFO) << "FUSE session ended: replying to the requests still waiting, then unmounting";
  // A drop of meta's may wait in the kernel for a directory lock held by a
  // request no worker will read now; unmounting ends that request.
  auto unmount = [&] {
    if (unmounted) return;
    unmounted = true;
    if (adopted) {
      UnmountAdopted(options.mountpoint);
    } else {
      fuse_session_unmount(se);
    }
  };
  if (!mount.coherence().StopWithin(absl::Seconds(2))) {
    LOG(WARNING) << "a cache invalidation is stuck in the kernel: unmounting first";
    unmount();
  }
  mount.Shutdown();
  interrupts.Stop();  // its requests reply through the session
  unmount();
  fuse_session_destroy(se);
  return false;
}

}  // namespace logfs::fuse
