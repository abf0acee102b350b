// The FUSE low-level operations: each decodes its request, calls the
// client library (fsclient::Client), and replies once (fuse/request.h). No
// logic beyond translation lives here.
#include "fuse/ops.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <glog/logging.h>
#include <limits.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "fsclient/client.h"
#include "fuse/dir_stream.h"
#include "fuse/errno_map.h"
#include "fuse/op_metrics.h"
#include "fuse/process_state.h"
#include "fuse/request.h"
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

// The session's userdata. Read it, and the request's context, before an
// op may block: once a dying caller's request is answered (fuse/request.h)
// libfuse may free `req`, and an op reaches it only through Claim().
OpsContext& Context(fuse_req_t req) { return *static_cast<OpsContext*>(fuse_req_userdata(req)); }
fsclient::Client& M(fuse_req_t req) { return *Context(req).mount; }

using fsclient::OpenFile;
using RequestPtr = std::shared_ptr<Request>;

RequestPtr Begin(fuse_req_t req, FuseOp op) {
  return Request::Start(req, op, *Context(req).interrupts);
}

// One handle per open file description: a share of the OpenFile, so that a
// read still on the waiting pool keeps it alive past a RELEASE that
// follows an interrupted (answered) read. fi->fh is its id in the
// session's table (fuse/handle_table.h); null for an id that names none
// (the op answers EBADF).
using FileHandle = std::shared_ptr<OpenFile>;
FileHandle Handle(fuse_req_t req, fuse_file_info* fi) { return Context(req).files->Get(fi->fh); }
FileHandle TakeHandle(HandleTable<OpenFile>& files, fuse_file_info* fi) {
  FileHandle handle = files.Take(fi->fh);
  fi->fh = 0;
  return handle;
}

void ReplyErr(const RequestPtr& r, int error) {
  if (fuse_req_t req = r->Claim()) r->Replied(fuse_reply_err(req, error), error);
}

void ReplyStatus(const RequestPtr& r, const absl::Status& status) { ReplyErr(r, ToErrno(status)); }

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

// How long the kernel keeps names and attributes is the mount's cache
// coherence's to say (fsclient/cache_coherence.h): long while meta
// invalidates them, for names (and missing names) and for the attributes
// of everything but files being written, which are asked for every time.
bool AttrCacheable(const proto::Attr& a) { return !a.open_for_write() && !a.open_segment(); }

fuse_entry_param EntryOf(const proto::Attr& attr, double entry_timeout, double attr_timeout) {
  fuse_entry_param e;
  std::memset(&e, 0, sizeof(e));
  e.ino = attr.ino();
  e.generation = 1;
  FillStat(attr, &e.attr);
  e.attr_timeout = attr_timeout;
  e.entry_timeout = entry_timeout;
  return e;
}

// A lookup's or create's answer: the entry `name` of `parent`. A name that
// does not exist is answered as a negative entry (ino 0) the kernel may
// keep, when it may keep names at all.
void ReplyEntry(fsclient::Client& mount, const RequestPtr& r, fsclient::CacheCoherence::Ticket ticket,
                uint64_t parent, const std::string& name, const absl::StatusOr<proto::Attr>& attr) {
  const bool missing = !attr.ok() && ToErrno(attr.status()) == ENOENT;
  if (!attr.ok() && !missing) return ReplyStatus(r, attr.status());
  const int error = mount.coherence().ReplyEntry(
      ticket, parent, name, missing ? 0 : attr->ino(), !missing && AttrCacheable(*attr),
      [&](double entry_s, double attr_s) {
        if (missing && entry_s <= 0) return ENOENT;
        fuse_entry_param e = EntryOf(missing ? proto::Attr() : *attr, entry_s, attr_s);
        // A negative entry is the lookup's ENOENT, counted as one.
        if (fuse_req_t req = r->Claim()) r->Replied(fuse_reply_entry(req, &e), missing ? ENOENT : 0);
        return 0;
      });
  if (error != 0) ReplyErr(r, error);
}

void ReplyAttr(fsclient::Client& mount, const RequestPtr& r, fsclient::CacheCoherence::Ticket ticket,
               const absl::StatusOr<proto::Attr>& attr) {
  if (!attr.ok()) return ReplyStatus(r, attr.status());
  struct stat st;
  FillStat(*attr, &st);
  mount.coherence().ReplyAttr(ticket, attr->ino(), AttrCacheable(*attr), [&](double attr_s) {
    if (fuse_req_t req = r->Claim()) r->Replied(fuse_reply_attr(req, &st, attr_s), 0);
    return 0;
  });
}

void ReplyBuf(const RequestPtr& r, const char* data, size_t size) {
  if (fuse_req_t req = r->Claim()) r->Replied(fuse_reply_buf(req, data, size), 0);
}

// libfuse sends a reply with one writev(2) of its out header and the
// pieces, and writev takes at most IOV_MAX of them (EINVAL beyond, and
// then the request is never answered). A read of many small pieces (one
// per segment of a file of many tiny segments) is copied into one buffer
// instead; the usual read, a few block-cache chunks, goes out uncopied.
constexpr size_t kReplyPiecesMax = IOV_MAX - 1;
static_assert(kReplyPiecesMax >= 64, "a read of a few blocks must go out uncopied");

void ReplyData(const RequestPtr& r, const cache::ReadBuffer& data) {
  fuse_req_t req = r->Claim();
  if (req == nullptr) return;
  const std::vector<iovec>& iov = data.iov();
  if (iov.size() <= kReplyPiecesMax) {
    r->Replied(fuse_reply_iov(req, iov.data(), static_cast<int>(iov.size())), 0);
    return;
  }
  RecordFuseGatheredReply();
  const std::string gathered = data.ToString();
  r->Replied(fuse_reply_buf(req, gathered.data(), gathered.size()), 0);
}

// Replies to an open or create with `fi`'s handle; if the caller is gone
// (answered as interrupted, or the kernel refused the reply), nobody will
// release the handle, so it is released here.
template <typename ReplyFn>
void ReplyOpened(fsclient::Client& mount, HandleTable<OpenFile>& files, const RequestPtr& r,
                 fuse_file_info* fi, ReplyFn reply) {
  fuse_req_t req = r->Claim();
  const int result = req != nullptr ? reply(req) : -EINTR;
  if (req != nullptr) r->Replied(result, 0);
  if (result != 0) mount.Release(TakeHandle(files, fi)).IgnoreError();
}

// Stores `file`'s handle in `fi`; if the table is full, releases the file
// and answers ENFILE (false).
bool StoreHandle(fsclient::Client& mount, fuse_req_t req, const RequestPtr& r, fuse_file_info* fi,
                 std::unique_ptr<OpenFile> file) {
  std::shared_ptr<OpenFile> shared = std::move(file);
  fi->fh = Context(req).files->Add(shared);
  if (fi->fh != 0) return true;
  mount.Release(std::move(shared)).IgnoreError();
  ReplyErr(r, ENFILE);
  return false;
}

void OpInit(void* userdata, fuse_conn_info* conn) noexcept {
  conn->max_write = format::kFuseWriteBytesMax;
  // Appends must reach us in order and at once: no kernel write-back cache.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
  // An O_DIRECT read or write of a file in the page cache is its caller's
  // own request, not a background one the caller waits for without
  // interrupts: so a killed caller's request is interrupted (FUSE_INTERRUPT)
  // and answered at once (fuse/request.h), as a direct_io file's are.
  conn->want &= ~FUSE_CAP_ASYNC_DIO;
  // The kernel clears set-ID bits itself on truncate and chown (it sends
  // the cleared mode with the change) unless the file system says it
  // handles them; writes are cleared in OpWrite, since libfuse does not
  // pass the kernel's FUSE_WRITE_KILL_SUIDGID on.
  conn->want &= ~FUSE_CAP_HANDLE_KILLPRIV;
  // A successor daemon must settle the same (fuse/session.h).
  auto* context = static_cast<OpsContext*>(userdata);
  context->fuse_want = conn->want;
  context->fuse_max_write = conn->max_write;
}

// Every op but forget starts a Request (fuse/request.h) and replies through
// it exactly once, from wherever its answer comes: inline, a completion of
// the writer, or the mount's waiting pool (DESIGN §2: read, write, flush,
// fsync, release, and the live sizes of lookup, getattr, setattr and
// getxattr never hold a FUSE worker on a segment server). Each op is timed
// from its start to that reply. A dying caller's request is answered EINTR
// at once by the interrupt watcher; the op's own answer then goes nowhere.

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kLookup);
  const auto ticket = mount.coherence().Begin();
  mount.Lookup(parent, name,
               [&mount, r, ticket, parent, name = std::string(name)](absl::StatusOr<proto::Attr> attr) {
                 ReplyEntry(mount, r, ticket, parent, name, attr);
               });
}

void OpForget(fuse_req_t req, fuse_ino_t, uint64_t) noexcept {
  const FuseOpTimer timer(FuseOp::kForget);
  fuse_reply_none(req);
  timer.Done(0);
}

void OpGetAttr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kGetAttr);
  const auto ticket = mount.coherence().Begin();
  mount.GetAttr(ino, [&mount, r, ticket](absl::StatusOr<proto::Attr> attr) {
    ReplyAttr(mount, r, ticket, attr);
  });
}

void OpSetAttr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               fuse_file_info*) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kSetAttr);
  proto::SetAttrRequest request;
  request.set_ino(ino);
  uint32_t bits = to_set & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID |
                            FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME);
  int64_t now = absl::ToUnixNanos(absl::Now());
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) bits |= FUSE_SET_ATTR_ATIME;
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) bits |= FUSE_SET_ATTR_MTIME;
  request.set_to_set(bits);
  request.set_mode(attr->st_mode);
  request.set_uid(attr->st_uid);
  request.set_gid(attr->st_gid);
  request.set_size(attr->st_size);
  request.set_atime_ns((to_set & FUSE_SET_ATTR_ATIME_NOW)
                           ? now
                           : attr->st_atim.tv_sec * 1000000000LL + attr->st_atim.tv_nsec);
  request.set_mtime_ns((to_set & FUSE_SET_ATTR_MTIME_NOW)
                           ? now
                           : attr->st_mtim.tv_sec * 1000000000LL + attr->st_mtim.tv_nsec);
  const auto ticket = mount.coherence().Begin();
  mount.SetAttr(request, [&mount, r, ticket](absl::StatusOr<proto::Attr> attr) {
    ReplyAttr(mount, r, ticket, attr);
  });
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kReadlink);
  auto target = mount.Readlink(ino);
  if (!target.ok()) return ReplyStatus(r, target.status());
  if (fuse_req_t claimed = r->Claim()) {
    r->Replied(fuse_reply_readlink(claimed, target->c_str()), 0);
  }
}

void CreateNode(fuse_req_t req, FuseOp op, fuse_ino_t parent, const char* name, mode_t mode,
                const std::string& target, dev_t rdev = 0) {
  fsclient::Client& mount = M(req);
  const fuse_ctx ctx = *fuse_req_ctx(req);
  RequestPtr r = Begin(req, op);
  mode_t umasked = mode & ~ctx.umask;
  const auto ticket = mount.coherence().Begin();
  auto created = mount.Create(parent, name, umasked, ctx.uid, ctx.gid, target, rdev);
  // ENOENT here is the parent's, not a missing name to cache.
  if (!created.ok()) return ReplyStatus(r, created.status());
  ReplyEntry(mount, r, ticket, parent, name, created);
}

// A regular file (mknod(2) of S_IFREG, as `mknod` without O_CREAT's open),
// or a special file: FIFO, socket (bind(2) of an AF_UNIX socket), device
// node. The kernel checks permissions (default_permissions; CAP_MKNOD for
// device nodes) before it asks; meta refuses any other type with EINVAL.
void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
             dev_t rdev) noexcept {
  CreateNode(req, FuseOp::kMknod, parent, name, mode, "",
             S_ISCHR(mode) || S_ISBLK(mode) ? rdev : 0);
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) noexcept {
  CreateNode(req, FuseOp::kMkdir, parent, name, (mode & 07777) | S_IFDIR, "");
}

void OpSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) noexcept {
  CreateNode(req, FuseOp::kSymlink, parent, name, S_IFLNK | 0777, link);
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kUnlink);
  ReplyStatus(r, mount.Unlink(parent, name, false));
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kRmdir);
  ReplyStatus(r, mount.Unlink(parent, name, true));
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t new_parent,
              const char* new_name, unsigned int flags) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kRename);
  const absl::Status renamed = mount.Rename(parent, name, new_parent, new_name, flags);
  // The kernel moves its entries, timeouts and all (RENAME_EXCHANGE: both).
  if (renamed.ok()) {
    mount.coherence().Renamed(new_parent, new_name);
    mount.coherence().Renamed(parent, name);
  }
  ReplyStatus(r, renamed);
}

// A hard link: the kernel checked the caller's rights on the new parent
// and that `ino` is no directory; meta adds the name (docs/POSIX.md).
void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t new_parent, const char* new_name) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kLink);
  const auto ticket = mount.coherence().Begin();
  auto linked = mount.Link(ino, new_parent, new_name);
  // ENOENT here is the inode's (unlinked meanwhile), not a name to cache.
  if (!linked.ok()) return ReplyStatus(r, linked.status());
  ReplyEntry(mount, r, ticket, new_parent, new_name, linked);
}

// As ext4 (the kernel's file_remove_privs): a write or truncate by a
// caller without CAP_FSETID first clears the file's set-user-ID bit, and
// its set-group-ID bit if group execute is set. Only files that had them
// at open pay the /proc read and the meta round trip.
absl::Status ClearSetIdFor(fsclient::Client& mount, fuse_req_t req, OpenFile& file) {
  if (!file.set_id_at_open.load(std::memory_order_relaxed)) return absl::OkStatus();
  if (CallerHasCapability(fuse_req_ctx(req)->pid, CAP_FSETID)) return absl::OkStatus();
  return mount.ClearSetId(file);
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
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kOpen);
  auto file = mount.Open(ino, fi->flags);
  if (!file.ok()) return ReplyStatus(r, file.status());
  // An O_TRUNC open truncates here (the kernel sends no setattr for it:
  // FUSE_CAP_ATOMIC_O_TRUNC), so it clears set-ID bits as a truncate does.
  if ((fi->flags & O_TRUNC) != 0) {
    if (absl::Status s = ClearSetIdFor(mount, req, **file); !s.ok()) {
      mount.Release(std::move(*file)).IgnoreError();
      return ReplyStatus(r, s);
    }
  }
  SetOpenFlags(**file, fi);
  HandleTable<OpenFile>& files = *Context(req).files;
  if (!StoreHandle(mount, req, r, fi, *std::move(file))) return;
  ReplyOpened(mount, files, r, fi,
              [fi](fuse_req_t claimed) { return fuse_reply_open(claimed, fi); });
}

// What the VFS's may_open() checks of an existing file before an open
// (default_permissions checks nothing for a create, whose name the kernel
// found missing): the caller's rights for `flags`' access mode, by owner,
// group (with supplementary groups) or others; root, or a caller with
// CAP_DAC_OVERRIDE, passes. An errno, or 0.
int MayOpenExisting(const fuse_ctx& ctx, int flags, const proto::Attr& attr) {
  const int accmode = flags & O_ACCMODE;
  const uint32_t want =
      (accmode != O_WRONLY ? 4 : 0) | (accmode != O_RDONLY || (flags & O_TRUNC) != 0 ? 2 : 0);
  if (ctx.uid == 0) return 0;
  uint32_t granted = attr.mode() & 07;
  if (attr.uid() == ctx.uid) {
    granted = (attr.mode() >> 6) & 07;
  } else if (attr.gid() == ctx.gid || CallerInGroup(ctx.pid, attr.gid())) {
    granted = (attr.mode() >> 3) & 07;
  }
  if ((granted & want) == want) return 0;
  return CallerHasCapability(ctx.pid, CAP_DAC_OVERRIDE) ? 0 : EACCES;
}

// Creates `name` and opens it with `fi->flags`. Without O_EXCL, a create
// that finds the name taken (another mount created it after the kernel
// looked it up: two hosts' `>> log` at once) opens what is there, as
// open(2) of an existing file (Client::OpenCreated); should that name go
// away again, the create is tried anew, a bounded number of times.
absl::StatusOr<std::unique_ptr<OpenFile>> CreateAndOpen(fsclient::Client& mount,
                                                        const fuse_ctx& ctx, uint64_t parent,
                                                        const std::string& name, uint32_t file_mode,
                                                        int flags, proto::Attr* attr) {
  constexpr int kCreateRacesMax = 8;
  for (int attempt = 1;; ++attempt) {
    absl::StatusOr<std::unique_ptr<OpenFile>> file;
    if ((flags & O_ACCMODE) != O_RDONLY) {
      // Created with the writer lease: one change at meta, not two.
      file = mount.CreateForWrite(parent, name, file_mode, ctx.uid, ctx.gid, flags, attr);
    } else {
      auto created = mount.Create(parent, name, file_mode, ctx.uid, ctx.gid, "", 0);
      if (created.ok()) {
        *attr = *std::move(created);
        return mount.Open(attr->ino(), flags);
      }
      file = created.status();
    }
    if (file.ok() || (flags & O_EXCL) != 0 || ToErrno(file.status()) != EEXIST) return file;
    file = mount.OpenCreated(
        parent, name, flags,
        [&ctx, flags](const proto::Attr& found) { return MayOpenExisting(ctx, flags, found); },
        attr);
    if (file.ok() || ToErrno(file.status()) != ENOENT || attempt == kCreateRacesMax) return file;
  }
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  const fuse_ctx ctx = *fuse_req_ctx(req);
  RequestPtr r = Begin(req, FuseOp::kCreate);
  const auto ticket = mount.coherence().Begin();
  const uint32_t file_mode = (mode & ~ctx.umask & 07777) | S_IFREG;
  proto::Attr attr;
  absl::StatusOr<std::unique_ptr<OpenFile>> file =
      CreateAndOpen(mount, ctx, parent, name, file_mode, fi->flags, &attr);
  if (!file.ok()) return ReplyStatus(r, file.status());
  SetOpenFlags(**file, fi);
  HandleTable<OpenFile>& files = *Context(req).files;
  if (!StoreHandle(mount, req, r, fi, *std::move(file))) return;
  ReplyOpened(mount, files, r, fi, [&](fuse_req_t claimed) {
    return mount.coherence().ReplyEntry(ticket, parent, name, attr.ino(), /*attr_cacheable=*/false,
                                        [&](double entry_s, double) {
                                          const fuse_entry_param e = EntryOf(attr, entry_s, 0);
                                          return fuse_reply_create(claimed, &e, fi);
                                        });
  });
}

// read, write, flush and fsync take their share of the handle before
// Begin: once the request can be answered (an interrupt that came first),
// the caller may exit, and its RELEASE free the handle on another worker.

void OpRead(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  FileHandle file = Handle(req, fi);
  RequestPtr r = Begin(req, FuseOp::kRead);
  if (file == nullptr) return ReplyErr(r, EBADF);
  mount.ReadAsync(std::move(file), static_cast<uint64_t>(off), size,
                  [r](absl::StatusOr<cache::ReadBuffer> data) {
                    if (!data.ok()) return ReplyStatus(r, data.status());
                    // Scatter-gather straight from the cached blocks; the
                    // pins drop after the kernel has copied them.
                    ReplyData(r, *data);
                  });
}

void OpWrite(fuse_req_t req, fuse_ino_t, const char* buf, size_t size, off_t off,
             fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  const FileHandle file = Handle(req, fi);
  RequestPtr r = Begin(req, FuseOp::kWrite);
  if (file == nullptr) return ReplyErr(r, EBADF);
  if (absl::Status s = ClearSetIdFor(mount, req, *file); !s.ok()) return ReplyStatus(r, s);
  mount.WriteAsync(*file, static_cast<uint64_t>(off), buf, size, [r, size](absl::Status s) {
    if (!s.ok()) return ReplyStatus(r, s);
    if (fuse_req_t claimed = r->Claim()) r->Replied(fuse_reply_write(claimed, size), 0);
  });
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  const FileHandle file = Handle(req, fi);
  RequestPtr r = Begin(req, FuseOp::kFlush);
  if (file == nullptr) return ReplyErr(r, EBADF);
  mount.Flush(*file, [r](absl::Status s) { ReplyStatus(r, s); });
}

void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  const FileHandle file = Handle(req, fi);
  RequestPtr r = Begin(req, FuseOp::kFsync);
  if (file == nullptr) return ReplyErr(r, EBADF);
  mount.Sync(*file, [r](absl::Status s) { ReplyStatus(r, s); });
}

void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kRelease);
  FileHandle file = TakeHandle(*Context(req).files, fi);
  if (file == nullptr) return ReplyErr(r, EBADF);
  mount.ReleaseAsync(std::move(file), [r, ino](absl::Status s) {
    if (!s.ok()) LOG(ERROR) << "release of inode " << ino << ": " << s;
    ReplyStatus(r, s);
  });
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kOpendir);
  auto dir = std::make_shared<DirHandle>(mount, ino);
  absl::Status opened;
  {
    absl::MutexLock lock(&dir->mu);
    opened = dir->stream.Open();
  }
  if (!opened.ok()) return ReplyStatus(r, opened);
  HandleTable<DirHandle>& dirs = *Context(req).dirs;
  fi->fh = dirs.Add(std::move(dir));
  if (fi->fh == 0) return ReplyErr(r, ENFILE);
  fuse_req_t claimed = r->Claim();
  const int result = claimed != nullptr ? fuse_reply_open(claimed, fi) : -EINTR;
  if (claimed != nullptr) r->Replied(result, 0);
  if (result != 0) dirs.Take(fi->fh);
}

// Fills at most `size` bytes of entries from offset `off`.
absl::StatusOr<std::string> ReaddirBuffer(DirHandle& dir, size_t size, off_t off) {
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
    // libfuse ignores the request here; the op's may be answered already.
    size_t n =
        fuse_add_direntry(nullptr, buf.data() + used, size - used, e.name().c_str(), &st, next);
    if (n > size - used) break;
    used += n;
  }
  buf.resize(used);
  return buf;
}

void OpReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t off, fuse_file_info* fi) noexcept {
  RequestPtr r = Begin(req, FuseOp::kReaddir);
  // The handle's lock is released before the reply: once the kernel has
  // the reply, a releasedir on another thread may delete the handle.
  std::shared_ptr<DirHandle> dir = Context(req).dirs->Get(fi->fh);
  if (dir == nullptr) return ReplyErr(r, EBADF);
  auto buf = ReaddirBuffer(*dir, size, off);
  if (!buf.ok()) return ReplyStatus(r, buf.status());
  ReplyBuf(r, buf->data(), buf->size());
}

void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) noexcept {
  RequestPtr r = Begin(req, FuseOp::kReleasedir);
  ReplyErr(r, Context(req).dirs->Take(fi->fh) != nullptr ? 0 : EBADF);
}

void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*) noexcept {
  ReplyErr(Begin(req, FuseOp::kFsyncdir), 0);  // meta syncs namespace changes before they return
}

void OpStatfs(fuse_req_t req, fuse_ino_t) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kStatfs);
  auto fs = mount.StatFs();
  if (!fs.ok()) return ReplyStatus(r, fs.status());
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
  if (fuse_req_t claimed = r->Claim()) r->Replied(fuse_reply_statfs(claimed, &st), 0);
}

// An xattr value, or its size when the caller asks with size 0.
void ReplyXattrValue(const RequestPtr& r, const std::string& value, size_t size) {
  if (size == 0) {
    if (fuse_req_t req = r->Claim()) r->Replied(fuse_reply_xattr(req, value.size()), 0);
  } else if (value.size() > size) {
    ReplyErr(r, ToErrno(Refusal::kXattrBufferTooSmall));
  } else {
    ReplyBuf(r, value.data(), value.size());
  }
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                int flags) noexcept {
  fsclient::Client& mount = M(req);
  const uid_t uid = fuse_req_ctx(req)->uid;
  RequestPtr r = Begin(req, FuseOp::kSetxattr);
  if (name == std::string_view(format::kDropBlockCacheXattr) && uid != 0) {
    return ReplyErr(r, ToErrno(Refusal::kNotRoot));
  }
  ReplyStatus(r, mount.SetXattr(ino, name, std::string(value, size), flags));
}

// getxattr replies from the waiting pool when it asks replicas
// (fsclient::Client::GetXattr).
void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kGetxattr);
  mount.GetXattr(ino, name, [r, size](absl::StatusOr<std::string> value) {
    if (!value.ok()) return ReplyStatus(r, value.status());
    ReplyXattrValue(r, *value, size);
  });
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kListxattr);
  auto names = mount.ListXattr(ino);
  if (!names.ok()) return ReplyStatus(r, names.status());
  std::string list;
  for (const auto& n : *names) {
    list += n;
    list.push_back('\0');
  }
  ReplyXattrValue(r, list, size);
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) noexcept {
  fsclient::Client& mount = M(req);
  RequestPtr r = Begin(req, FuseOp::kRemovexattr);
  ReplyStatus(r, mount.RemoveXattr(ino, name));
}

void OpFallocate(fuse_req_t req, fuse_ino_t, int mode, off_t, off_t, fuse_file_info*) noexcept {
  // DESIGN §2: FALLOC_FL_KEEP_SIZE is a hint that needs no work; anything
  // that would change the size or contents is not supported.
  ReplyErr(Begin(req, FuseOp::kFallocate),
           mode == FALLOC_FL_KEEP_SIZE ? 0 : ToErrno(Refusal::kFallocateMode));
}

// copy_file_range(2) (and `cp`, coreutils 9 and later): whole sealed
// segments of the source that start at off_in are appended to the
// destination by reference when the destination is a file this mount
// writes, at its end, with nothing in flight (docs/POSIX.md). Anything
// else is answered EOPNOTSUPP, on which the kernel's fuse_copy_file_range
// copies the bytes itself (splice: READs and WRITEs through this mount) and
// the caller sees one call that copied. Never ENOSYS: the kernel would stop
// asking for the rest of the mount's life. A short answer (the segments
// end before `len`) sends the caller back for the rest.
void OpCopyFileRange(fuse_req_t req, fuse_ino_t, off_t off_in, fuse_file_info* fi_in, fuse_ino_t,
                     off_t off_out, fuse_file_info* fi_out, size_t len, int) noexcept {
  fsclient::Client& mount = M(req);
  const FileHandle source = Handle(req, fi_in);
  const FileHandle dst = Handle(req, fi_out);
  RequestPtr r = Begin(req, FuseOp::kCopyFileRange);
  if (source == nullptr || dst == nullptr) return ReplyErr(r, EBADF);
  // The kernel's answer holds a 32-bit count (fuse_write_out.size).
  const uint64_t length = std::min<uint64_t>(len, std::numeric_limits<uint32_t>::max());
  auto copied = mount.CopyRange(*source, static_cast<uint64_t>(off_in), *dst,
                                static_cast<uint64_t>(off_out), length);
  if (!copied.ok()) {
    const int error = ToErrno(copied.status());
    return ReplyErr(r, error == ENOSYS ? EOPNOTSUPP : error);
  }
  if (fuse_req_t claimed = r->Claim()) r->Replied(fuse_reply_write(claimed, *copied), 0);
}

}  // namespace

fuse_lowlevel_ops MakeOperations() {
  fuse_lowlevel_ops ops;
  std::memset(&ops, 0, sizeof(ops));
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.getattr = OpGetAttr;
  ops.setattr = OpSetAttr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.symlink = OpSymlink;
  ops.rename = OpRename;
  ops.link = OpLink;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  ops.create = OpCreate;
  ops.fallocate = OpFallocate;
  ops.copy_file_range = OpCopyFileRange;
  return ops;
}

}  // namespace logfs::fuse
