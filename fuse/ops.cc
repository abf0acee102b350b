// The FUSE low-level operations: each decodes its request, calls Mount,
// and replies. No logic beyond translation lives here.
#include <fuse_lowlevel.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fuse/dir_stream.h"
#include "fuse/errno_map.h"
#include "fuse/mount.h"
#include "fuse/op_metrics.h"
#include "fuse/session.h"
#include "store/format/limits.h"
#include "store/format/setattr_bits.h"
#include "store/format/xattr_names.h"

namespace logfs::fuse {
namespace {

static_assert(format::kSetAttrMode == FUSE_SET_ATTR_MODE &&
                  format::kSetAttrUid == FUSE_SET_ATTR_UID &&
                  format::kSetAttrGid == FUSE_SET_ATTR_GID &&
                  format::kSetAttrSize == FUSE_SET_ATTR_SIZE &&
                  format::kSetAttrAtime == FUSE_SET_ATTR_ATIME &&
                  format::kSetAttrMtime == FUSE_SET_ATTR_MTIME &&
                  format::kSetAttrAtimeNow == FUSE_SET_ATTR_ATIME_NOW &&
                  format::kSetAttrMtimeNow == FUSE_SET_ATTR_MTIME_NOW,
              "SetAttrRequest.to_set carries the kernel's FUSE_SET_ATTR_* mask unchanged");

// Sealed files change only by replacement, so the kernel may keep their
// attributes for a while; files being written are asked for every time.
constexpr double kSealedAttrTimeoutSeconds = 1.0;
constexpr double kEntryTimeoutSeconds = 1.0;

Mount& M(fuse_req_t req) { return *static_cast<Mount*>(fuse_req_userdata(req)); }

// The errno this thread's last reply carried, for Timed below.
thread_local int t_reply_errno = 0;

void ReplyErr(fuse_req_t req, int error) {
  t_reply_errno = error;
  fuse_reply_err(req, error);
}

OpenFile* Handle(fuse_file_info* fi) { return reinterpret_cast<OpenFile*>(fi->fh); }

void FillStat(const proto::Attr& a, struct stat* st) {
  std::memset(st, 0, sizeof(*st));
  st->st_ino = a.ino();
  st->st_mode = a.mode();
  st->st_nlink = a.nlink();
  st->st_rdev = static_cast<dev_t>(a.rdev());
  st->st_uid = a.uid();
  st->st_gid = a.gid();
  st->st_size = static_cast<off_t>(a.size());
  st->st_blksize = 1 << 20;
  st->st_blocks = static_cast<blkcnt_t>((a.size() + 511) / 512);
  auto ts = [](int64_t ns) {
    timespec t;
    t.tv_sec = ns / 1000000000;
    t.tv_nsec = ns % 1000000000;
    return t;
  };
  st->st_atim = ts(a.atime_ns());
  st->st_mtim = ts(a.mtime_ns());
  st->st_ctim = ts(a.ctime_ns());
}

double AttrTimeout(const proto::Attr& a) {
  return a.open_for_write() || a.open_segment() ? 0.0 : kSealedAttrTimeoutSeconds;
}

void ReplyEntry(fuse_req_t req, const absl::StatusOr<proto::Attr>& attr) {
  if (!attr.ok()) {
    ReplyErr(req, ToErrno(attr.status()));
    return;
  }
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = attr->ino();
  e.generation = 1;
  FillStat(*attr, &e.attr);
  e.attr_timeout = AttrTimeout(*attr);
  e.entry_timeout = kEntryTimeoutSeconds;
  fuse_reply_entry(req, &e);
}

void ReplyAttr(fuse_req_t req, const absl::StatusOr<proto::Attr>& attr) {
  if (!attr.ok()) {
    ReplyErr(req, ToErrno(attr.status()));
    return;
  }
  struct stat st;
  FillStat(*attr, &st);
  fuse_reply_attr(req, &st, AttrTimeout(*attr));
}

void ReplyStatus(fuse_req_t req, const absl::Status& status) { ReplyErr(req, ToErrno(status)); }

void OpInit(void* userdata, fuse_conn_info* conn) noexcept {
  conn->max_write = format::kFuseWriteBytesMax;
  // Appends must reach us in order and at once: no kernel write-back cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

// lookup, getattr and setattr reply inline unless a file another mount
// writes needs its open segment's acked length, or setattr empties a WAL
// file this mount writes: that reply comes from the mount's waiting pool
// (Mount::GetAttrAsync, SetAttrAsync), so they time themselves.
// `kReply` replies with the attributes, timed as `op`.
template <void (*kReply)(fuse_req_t, const absl::StatusOr<proto::Attr>&)>
Mount::AttrDone ReplyAttrWhenDone(fuse_req_t req, FuseOp op) {
  return [req, timer = FuseOpTimer(op)](absl::StatusOr<proto::Attr> attr) {
    timer.Done(attr.ok() ? 0 : ToErrno(attr.status()));
    kReply(req, attr);
  };
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  M(req).LookupAsync(parent, name, ReplyAttrWhenDone<ReplyEntry>(req, FuseOp::kLookup));
}

void OpForget(fuse_req_t req, fuse_ino_t, uint64_t) noexcept { fuse_reply_none(req); }

void OpGetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) noexcept {
  M(req).GetAttrAsync(ino, ReplyAttrWhenDone<ReplyAttr>(req, FuseOp::kGetAttr));
}

void OpSetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               fuse_file_info*) noexcept {
  proto::SetAttrRequest r;
  r.set_ino(ino);
  uint32_t bits = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                            FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME);
  int64_t now = absl::ToUnixNanos(absl::Now());
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) bits |= FUSE_SET_ATTR_ATIME;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) bits |= FUSE_SET_ATTR_MTIME;
  r.set_to_set(bits);
  r.set_mode(attr->st_mode);
  r.set_uid(attr->st_uid);
  r.set_gid(attr->st_gid);
  r.set_size(attr->st_size);
  r.set_atime_ns((to_set & FUSE_SET_ATTR_ATIME_NOW)
                     ? now
                     : attr->st_atim.tv_sec * 1000000000LL + attr->st_atim.tv_nsec);
  r.set_mtime_ns((to_set & FUSE_SET_ATTR_MTIME_NOW)
                     ? now
                     : attr->st_mtim.tv_sec * 1000000000LL + attr->st_mtim.tv_nsec);
  M(req).SetAttrAsync(r, ReplyAttrWhenDone<ReplyAttr>(req, FuseOp::kSetAttr));
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) noexcept {
  auto target = M(req).Readlink(ino);
  if (!target.ok()) return ReplyStatus(req, target.status());
  fuse_reply_readlink(req, target->c_str());
}

void CreateNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                const std::string& target, dev_t rdev = 0) {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  mode_t umasked = mode & ~ctx->umask;
  ReplyEntry(req, M(req).Create(parent, name, umasked, ctx->uid, ctx->gid, target, rdev));
}

// A regular file (mknod(2) of S_IFREG, as `mknod` without O_CREAT's open),
// or a special file: FIFO, socket (bind(2) of an AF_UNIX socket), device
// node. The kernel checks permissions (default_permissions; CAP_MKNOD for
// device nodes) before it asks; meta refuses any other type with EINVAL.
void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
             dev_t rdev) noexcept {
  CreateNode(req, parent, name, mode, "", S_ISCHR(mode) || S_ISBLK(mode) ? rdev : 0);
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) noexcept {
  CreateNode(req, parent, name, (mode & 07777) | S_IFDIR, "");
}

void OpSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) noexcept {
  CreateNode(req, parent, name, S_IFLNK | 0777, link);
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  ReplyStatus(req, M(req).Unlink(parent, name, false));
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  ReplyStatus(req, M(req).Unlink(parent, name, true));
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned int flags) noexcept {
  ReplyStatus(req, M(req).Rename(parent, name, new_parent, new_name, flags));
}

void OpLink(fuse_req_t req, fuse_ino_t, fuse_ino_t, const char*) noexcept {
  ReplyErr(req, ToErrno(Refusal::kHardLink));
}

void SetOpenFlags(const OpenFile& file, fuse_file_info* fi) {
  // Files being written bypass the page cache so every read and stat sees
  // the current durable length; a shared mmap of them fails with ENODEV.
  // Sealed files go through the page cache, so they can be mmapped
  // (MAP_SHARED too, read-only: writes are refused at open). Block files
  // are immutable and keep their cache across opens; a sealed WAL file
  // may be appended to or emptied later, so its cache is dropped at open,
  // and the kernel drops it whenever it sees the size change.
  if (file.writable || file.growing) {
    fi->direct_io = 1;
  } else {
    fi->keep_cache = file.kind == proto::KIND_BLOCK;
  }
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  auto file = M(req).Open(ino, fi->flags);
  if (!file.ok()) return ReplyStatus(req, file.status());
  SetOpenFlags(**file, fi);
  fi->fh = reinterpret_cast<uint64_t>(file->release());
  if (fuse_reply_open(req, fi) != 0) {
    // The opener was interrupted: nobody will release this handle.
    M(req).Release(std::unique_ptr<OpenFile>(Handle(fi))).IgnoreError();
  }
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) noexcept {
  const fuse_ctx* ctx = fuse_req_ctx(req);
  auto attr = M(req).Create(parent, name, (mode & ~ctx->umask & 07777) | S_IFREG, ctx->uid,
                            ctx->gid, "", 0);
  if (!attr.ok()) return ReplyStatus(req, attr.status());
  auto file = M(req).Open(attr->ino(), fi->flags);
  if (!file.ok()) return ReplyStatus(req, file.status());
  SetOpenFlags(**file, fi);
  fi->fh = reinterpret_cast<uint64_t>(file->release());
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = attr->ino();
  e.generation = 1;
  FillStat(*attr, &e.attr);
  e.attr_timeout = 0;
  e.entry_timeout = kEntryTimeoutSeconds;
  if (fuse_reply_create(req, &e, fi) != 0) {
    M(req).Release(std::unique_ptr<OpenFile>(Handle(fi))).IgnoreError();
  }
}

// read, write, flush (every close), fsync and release never hold a FUSE
// worker while they wait for a segment server (DESIGN §2): each replies
// inline when it need not wait, else from the completion (the writer's,
// or a thread of the mount's waiting pool), so the workers go on serving
// stat, ls and every other call. Their latency is timed to that reply.

void OpRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  M(req).ReadAsync(
      *Handle(fi), static_cast<uint64_t>(off), size,
      [req, timer = FuseOpTimer(FuseOp::kRead)](absl::StatusOr<cache::ReadBuffer> data) {
        if (!data.ok()) {
          const int error = ToErrno(data.status());
          timer.Done(error);
          fuse_reply_err(req, error);
          return;
        }
        timer.Done(0);
        // Scatter-gather straight from the cached blocks; the
        // pins drop after the kernel has copied them.
        fuse_reply_iov(req, data->iov().data(), static_cast<int>(data->iov().size()));
      });
}

void OpWrite(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
             fuse_file_info* fi) noexcept {
  M(req).WriteAsync(*Handle(fi), static_cast<uint64_t>(off), buf, size,
                    [req, size, timer = FuseOpTimer(FuseOp::kWrite)](absl::Status s) {
                      const int error = ToErrno(s);
                      timer.Done(error);
                      if (error != 0) {
                        fuse_reply_err(req, error);
                      } else {
                        fuse_reply_write(req, size);
                      }
                    });
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  M(req).Flush(*Handle(fi), [req, timer = FuseOpTimer(FuseOp::kFlush)](absl::Status s) {
    const int error = ToErrno(s);
    timer.Done(error);
    fuse_reply_err(req, error);
  });
}

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) noexcept {
  M(req).Sync(*Handle(fi), [req, timer = FuseOpTimer(FuseOp::kFsync)](absl::Status s) {
    const int error = ToErrno(s);
    timer.Done(error);
    fuse_reply_err(req, error);
  });
}

void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  M(req).ReleaseAsync(std::unique_ptr<OpenFile>(Handle(fi)),
                      [req, ino, timer = FuseOpTimer(FuseOp::kRelease)](absl::Status s) {
                        if (!s.ok()) LOG(ERROR) << "release of inode " << ino << ": " << s;
                        const int error = ToErrno(s);
                        timer.Done(error);
                        fuse_reply_err(req, error);
                      });
}

// One opendir: a paged listing (fuse/dir_stream.h). The kernel serializes
// readdir on one open directory, but a handle shared by threads of a
// process may still be read twice at once: the mutex orders them.
struct DirHandle {
  DirHandle(Mount& mount, fuse_ino_t ino)
      : stream(ino, [&mount, ino](const std::string& start_after) {
          return mount.Readdir(ino, start_after);
        }) {}
  absl::Mutex mu;
  DirStream stream ABSL_GUARDED_BY(mu);
};

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  auto dir = std::make_unique<DirHandle>(M(req), ino);
  absl::Status opened;
  {
    absl::MutexLock lock(&dir->mu);
    opened = dir->stream.Open();
  }
  if (!opened.ok()) return ReplyStatus(req, opened);
  fi->fh = reinterpret_cast<uint64_t>(dir.release());
  if (fuse_reply_open(req, fi) != 0) delete reinterpret_cast<DirHandle*>(fi->fh);
}

// Fills at most `size` bytes of entries from offset `off`.
absl::StatusOr<std::string> ReaddirBuffer(fuse_req_t req, DirHandle& dir, size_t size, off_t off) {
  absl::MutexLock lock(&dir.mu);
  auto entries = dir.stream.EntriesAt(static_cast<uint64_t>(off));
  if (!entries.ok()) return entries.status();
  std::string buf(size, '\0');
  size_t used = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const auto& e = (*entries)[i];
    struct stat st;
    std::memset(&st, 0, sizeof(st));
    st.st_ino = e.ino();
    st.st_mode = e.mode();
    const off_t next = off + static_cast<off_t>(i) + 1;
    size_t n = fuse_add_direntry(req, buf.data() + used, size - used, e.name().c_str(), &st, next);
    if (n > size - used) break;
    used += n;
  }
  buf.resize(used);
  return buf;
}

void OpReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  // The handle's lock is released before the reply: once the kernel has
  // the reply, a releasedir on another thread may delete the handle.
  auto buf = ReaddirBuffer(req, *reinterpret_cast<DirHandle*>(fi->fh), size, off);
  if (!buf.ok()) return ReplyStatus(req, buf.status());
  fuse_reply_buf(req, buf->data(), buf->size());
}

void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  delete reinterpret_cast<DirHandle*>(fi->fh);
  ReplyErr(req, 0);
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) noexcept {
  ReplyErr(req, 0);  // namespace changes are synced in meta before they return
}

void OpStatfs(fuse_req_t req, fuse_ino_t) noexcept {
  auto fs = M(req).StatFs();
  if (!fs.ok()) return ReplyStatus(req, fs.status());
  struct statvfs st;
  std::memset(&st, 0, sizeof(st));
  constexpr uint64_t kBlock = 4096;
  st.f_bsize = kBlock;
  st.f_frsize = kBlock;
  st.f_blocks = fs->capacity_bytes() / kBlock;
  st.f_bfree = fs->free_bytes() / kBlock;
  st.f_bavail = st.f_bfree;
  st.f_files = fs->inodes() + (1u << 30);
  st.f_ffree = 1u << 30;
  st.f_favail = st.f_ffree;
  st.f_namemax = 255;
  fuse_reply_statfs(req, &st);
}

void ReplyXattrValue(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) {
    fuse_reply_xattr(req, value.size());
  } else if (value.size() > size) {
    ReplyErr(req, ToErrno(Refusal::kXattrBufferTooSmall));
  } else {
    fuse_reply_buf(req, value.data(), value.size());
  }
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value,
                size_t size, int flags) noexcept {
  if (name == std::string_view(format::kDropBlockCacheXattr) && fuse_req_ctx(req)->uid != 0) {
    ReplyErr(req, ToErrno(Refusal::kNotRoot));
    return;
  }
  ReplyStatus(req, M(req).SetXattr(ino, name, std::string(value, size), flags));
}

// getxattr replies from the waiting pool when it asks replicas
// (Mount::GetXattrAsync), so it times itself.
void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) noexcept {
  M(req).GetXattrAsync(
      ino, name,
      [req, size, timer = FuseOpTimer(FuseOp::kGetxattr)](absl::StatusOr<std::string> value) {
        t_reply_errno = 0;
        if (!value.ok()) {
          ReplyStatus(req, value.status());
        } else {
          ReplyXattrValue(req, *value, size);
        }
        timer.Done(t_reply_errno);
      });
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) noexcept {
  auto names = M(req).ListXattr(ino);
  if (!names.ok()) return ReplyStatus(req, names.status());
  std::string list;
  for (const auto& n : *names) {
    list += n;
    list.push_back('\0');
  }
  ReplyXattrValue(req, list, size);
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) noexcept {
  ReplyStatus(req, M(req).RemoveXattr(ino, name));
}

void OpFallocate(fuse_req_t req, fuse_ino_t, int mode, off_t, off_t,
                 fuse_file_info*) noexcept {
  // DESIGN §2: FALLOC_FL_KEEP_SIZE is a hint that needs no work; anything
  // that would change the size or contents is not supported.
  ReplyErr(req, mode == FALLOC_FL_KEEP_SIZE ? 0 : ToErrno(Refusal::kFallocateMode));
}

// `kFn` timed and counted as `kOp` (fuse/op_metrics.h): the op's latency
// to its return (every op but lookup, getattr, setattr, getxattr, read,
// write, flush, fsync and release, which time themselves, has replied by
// then) and the errno its reply carried.
template <FuseOp kOp, auto kFn>
struct Timed;
template <FuseOp kOp, typename... Args, void (*kFn)(fuse_req_t, Args...) noexcept>
struct Timed<kOp, kFn> {
  static void Call(fuse_req_t req, Args... args) noexcept {
    const FuseOpTimer timer(kOp);
    t_reply_errno = 0;
    kFn(req, args...);
    timer.Done(t_reply_errno);
  }
};

}  // namespace

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = Timed<FuseOp::kForget, OpForget>::Call;
  ops.getattr = OpGetAttr;
  ops.setattr = OpSetAttr;
  ops.readlink = Timed<FuseOp::kReadlink, OpReadlink>::Call;
  ops.mknod = Timed<FuseOp::kMknod, OpMknod>::Call;
  ops.mkdir = Timed<FuseOp::kMkdir, OpMkdir>::Call;
  ops.unlink = Timed<FuseOp::kUnlink, OpUnlink>::Call;
  ops.rmdir = Timed<FuseOp::kRmdir, OpRmdir>::Call;
  ops.symlink = Timed<FuseOp::kSymlink, OpSymlink>::Call;
  ops.rename = Timed<FuseOp::kRename, OpRename>::Call;
  ops.link = Timed<FuseOp::kLink, OpLink>::Call;
  ops.open = Timed<FuseOp::kOpen, OpOpen>::Call;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = Timed<FuseOp::kOpendir, OpOpendir>::Call;
  ops.readdir = Timed<FuseOp::kReaddir, OpReaddir>::Call;
  ops.releasedir = Timed<FuseOp::kReleasedir, OpReleasedir>::Call;
  ops.fsyncdir = Timed<FuseOp::kFsyncdir, OpFsyncdir>::Call;
  ops.statfs = Timed<FuseOp::kStatfs, OpStatfs>::Call;
  ops.setxattr = Timed<FuseOp::kSetxattr, OpSetxattr>::Call;
  ops.getxattr = OpGetxattr;
  ops.listxattr = Timed<FuseOp::kListxattr, OpListxattr>::Call;
  ops.removexattr = Timed<FuseOp::kRemovexattr, OpRemovexattr>::Call;
  ops.create = Timed<FuseOp::kCreate, OpCreate>::Call;
  ops.fallocate = Timed<FuseOp::kFallocate, OpFallocate>::Call;
  return ops;
}

}  // namespace logfs::fuse
