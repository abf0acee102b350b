#include "tests/fakes/power_cut_fs.h"

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace logfs::testing {
namespace {

// Undo granularity: the synced bytes of a block are saved before the first
// write or truncation that touches the block after a sync.
constexpr uint64_t kUndoBlockBytes = 4096;

// How long the destructor waits for the serving thread after a lazy
// unmount before it gives up on it (something still uses the mount).
constexpr absl::Duration kStopTimeout = absl::Seconds(5);

struct Node {
  fuse_ino_t ino = 0;
  mode_t mode = 0;  // type and permission bits
  uid_t uid = 0;
  gid_t gid = 0;
  uint32_t links = 0;  // names in the current namespace (regular files etc.)
  struct timespec atime = {}, mtime = {}, ctime = {};

  // Directories: the entries now, and as of the last fsync.
  std::map<std::string, fuse_ino_t> entries;
  std::map<std::string, fuse_ino_t> synced_entries;

  // Regular files: the backing file, its size now and at the last sync,
  // and the synced bytes of every block changed since (block -> bytes, at
  // most kUndoBlockBytes, fewer for the block holding synced_size).
  int fd = -1;
  uint64_t size = 0;
  uint64_t synced_size = 0;
  std::map<uint64_t, std::string> undo;

  bool IsDir() const { return S_ISDIR(mode); }
  bool IsRegular() const { return S_ISREG(mode); }
};

struct timespec Now() {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t;
}

// One opendir's listing, taken at opendir (readdir pages through it).
struct DirListing {
  std::vector<std::pair<std::string, struct stat>> entries;
};

}  // namespace

class PowerCutFs::Impl {
 public:
  Impl(std::string mountpoint, std::string backing_dir)
      : mountpoint_(std::move(mountpoint)), backing_dir_(std::move(backing_dir)) {
    auto root = std::make_unique<Node>();
    root->ino = FUSE_ROOT_ID;
    root->mode = S_IFDIR | 0755;
    root->atime = root->mtime = root->ctime = Now();
    nodes_[FUSE_ROOT_ID] = std::move(root);
  }

  ~Impl() {
    Stop(/*lazy=*/true).IgnoreError();  // reported on stderr; nothing else to do here
    absl::MutexLock lock(&mu_);
    for (auto& [ino, node] : nodes_) {
      if (node->fd >= 0) ::close(node->fd);
    }
  }

  absl::Status Start();
  absl::Status Stop(bool lazy);
  absl::Status PowerCut();

  Stats stats() const {
    absl::MutexLock lock(&mu_);
    return stats_;
  }
  const std::string& mountpoint() const { return mountpoint_; }

  // The FUSE operations (fuse_lowlevel_ops), one per request.
  static fuse_lowlevel_ops Operations();

 private:
  static Impl* Of(fuse_req_t req) { return static_cast<Impl*>(fuse_req_userdata(req)); }

  Node* Find(fuse_ino_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto it = nodes_.find(ino);
    return it == nodes_.end() ? nullptr : it->second.get();
  }
  // The directory `ino`, or nullptr with *error set.
  Node* Dir(fuse_ino_t ino, int* error) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Node* n = Find(ino);
    *error = n == nullptr ? ENOENT : !n->IsDir() ? ENOTDIR : 0;
    return *error == 0 ? n : nullptr;
  }
  static void Fill(const Node& n, struct stat* st) {
    *st = {};
    st->st_ino = n.ino;
    st->st_mode = n.mode;
    st->st_nlink = n.IsDir() ? 2 : n.links;
    st->st_uid = n.uid;
    st->st_gid = n.gid;
    st->st_size = static_cast<off_t>(n.IsRegular() ? n.size : n.IsDir() ? 4096 : 0);
    st->st_blksize = 4096;
    st->st_blocks = (st->st_size + 511) / 512;
    st->st_atim = n.atime;
    st->st_mtim = n.mtime;
    st->st_ctim = n.ctime;
  }
  void ReplyEntry(fuse_req_t req, const Node& n, fuse_file_info* fi_for_create)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    fuse_entry_param e = {};
    e.ino = n.ino;
    Fill(n, &e.attr);
    e.attr_timeout = 0;   // every change goes through this mount, but keep
    e.entry_timeout = 0;  // the kernel honest: it asks every time
    if (fi_for_create != nullptr) {
      fuse_reply_create(req, &e, fi_for_create);
    } else {
      fuse_reply_entry(req, &e);
    }
  }

  // Creates a node of `mode` named `name` in `parent`; errno on failure.
  int MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, Node** out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Saves the synced bytes of [begin, end) that are not saved yet.
  int SaveUndo(Node& n, uint64_t begin, uint64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int Truncate(Node& n, uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes the synced state current (PowerCut's work once unmounted).
  absl::Status RollBack() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RollBackFile(Node& n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static void OpInit(void* userdata, fuse_conn_info* conn);
  static void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void OpForget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
  static void OpForgetMulti(fuse_req_t req, size_t count, fuse_forget_data* forgets);
  static void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                        fuse_file_info* fi);
  static void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
  static void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
  static void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                       fuse_file_info* fi);
  static void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
  static void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
                       const char* newname, unsigned int flags);
  static void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname);
  static void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
                      fuse_file_info* fi);
  static void OpFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  static void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
  static void OpReleasedir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
  static void OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info* fi);
  static void OpStatfs(fuse_req_t req, fuse_ino_t ino);
  static void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                          fuse_file_info* fi);

  // Immutable after construction.
  const std::string mountpoint_;
  const std::string backing_dir_;

  // Owned by the thread calling Start/Stop/PowerCut.
  fuse_session* session_ = nullptr;
  std::thread thread_;
  std::unique_ptr<absl::Notification> loop_done_;

  mutable absl::Mutex mu_;
  std::unordered_map<fuse_ino_t, std::unique_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);
  fuse_ino_t next_ino_ ABSL_GUARDED_BY(mu_) = FUSE_ROOT_ID + 1;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// ---- Mounting ----

absl::Status PowerCutFs::Impl::Start() {
  std::vector<std::string> args = {"powercutfs", "-o",
                                   "fsname=powercutfs,subtype=powercutfs,default_permissions"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  fuse_args fargs = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  fuse_lowlevel_ops ops = Operations();
  session_ = fuse_session_new(&fargs, &ops, sizeof(ops), this);
  fuse_opt_free_args(&fargs);
  if (session_ == nullptr) return absl::FailedPreconditionError("fuse_session_new failed");
  if (fuse_session_mount(session_, mountpoint_.c_str()) != 0) {
    fuse_session_destroy(session_);
    session_ = nullptr;
    return absl::FailedPreconditionError(absl::StrCat("cannot mount powercutfs at ", mountpoint_));
  }
  loop_done_ = std::make_unique<absl::Notification>();
  thread_ = std::thread([se = session_, done = loop_done_.get()] {
    fuse_session_loop(se);  // returns once the kernel ends the connection (unmount)
    done->Notify();
  });
  return absl::OkStatus();
}

absl::Status PowerCutFs::Impl::Stop(bool lazy) {
  if (session_ == nullptr) return absl::OkStatus();
  if (::umount2(mountpoint_.c_str(), 0) != 0) {
    int error = errno;
    if (!lazy) {
      return absl::FailedPreconditionError(absl::StrCat("cannot unmount ", mountpoint_, " (",
                                                        std::strerror(error), "): still in use"));
    }
    ::umount2(mountpoint_.c_str(), MNT_DETACH);
  }
  if (!loop_done_->WaitForNotificationWithTimeout(kStopTimeout)) {
    // Still in use after a lazy unmount: leave the thread to it rather
    // than hang the test.
    std::fprintf(stderr, "powercutfs at %s: still in use, abandoned\n", mountpoint_.c_str());
    thread_.detach();
    (void)loop_done_.release();  // the thread still notifies it
    session_ = nullptr;          // leaked with the thread
    return absl::FailedPreconditionError("powercutfs still in use");
  }
  thread_.join();
  fuse_session_unmount(session_);  // closes the device (already unmounted)
  fuse_session_destroy(session_);
  session_ = nullptr;
  return absl::OkStatus();
}

absl::Status PowerCutFs::Impl::PowerCut() {
  if (absl::Status stopped = Stop(/*lazy=*/false); !stopped.ok()) return stopped;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status rolled = RollBack(); !rolled.ok()) return rolled;
  }
  return Start();
}

// ---- The power cut ----

absl::Status PowerCutFs::Impl::RollBackFile(Node& n) {
  if (n.size == n.synced_size && n.undo.empty()) return absl::OkStatus();
  ++stats_.files_rolled_back;
  if (::ftruncate(n.fd, static_cast<off_t>(n.synced_size)) != 0) {
    return absl::ErrnoToStatus(errno, "ftruncate backing file");
  }
  for (const auto& [block, bytes] : n.undo) {
    ssize_t w =
        ::pwrite(n.fd, bytes.data(), bytes.size(), static_cast<off_t>(block * kUndoBlockBytes));
    if (w != static_cast<ssize_t>(bytes.size())) {
      return absl::ErrnoToStatus(w < 0 ? errno : EIO, "pwrite backing file");
    }
  }
  n.undo.clear();
  n.size = n.synced_size;
  return absl::OkStatus();
}

absl::Status PowerCutFs::Impl::RollBack() {
  // Walk the synced namespace from the root; what it does not reach is gone.
  std::unordered_set<fuse_ino_t> reached = {FUSE_ROOT_ID};
  std::unordered_map<fuse_ino_t, uint32_t> links;
  std::vector<fuse_ino_t> dirs = {FUSE_ROOT_ID};
  stats_.names_dropped = stats_.names_restored = stats_.files_rolled_back = 0;
  while (!dirs.empty()) {
    Node& dir = *Find(dirs.back());
    dirs.pop_back();
    std::map<std::string, fuse_ino_t> entries;
    for (const auto& [name, ino] : dir.synced_entries) {
      Node* child = Find(ino);
      if (child == nullptr) continue;
      if (child->IsDir()) {
        // A directory synced under two parents (moved, both synced) keeps
        // the first name only.
        if (!reached.insert(ino).second) continue;
        dirs.push_back(ino);
      } else {
        reached.insert(ino);
        ++links[ino];
      }
      entries.emplace(name, ino);
    }
    for (const auto& [name, ino] : dir.entries) {
      auto it = entries.find(name);
      if (it == entries.end() || it->second != ino) ++stats_.names_dropped;
    }
    for (const auto& [name, ino] : entries) {
      auto it = dir.entries.find(name);
      if (it == dir.entries.end() || it->second != ino) ++stats_.names_restored;
    }
    dir.entries = std::move(entries);
  }
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    Node& n = *it->second;
    if (reached.count(n.ino) == 0) {
      if (n.fd >= 0) {
        ::close(n.fd);
        ::unlink(absl::StrCat(backing_dir_, "/", n.ino).c_str());
      }
      it = nodes_.erase(it);
      continue;
    }
    if (!n.IsDir()) n.links = links[n.ino];
    if (n.IsRegular()) {
      if (absl::Status s = RollBackFile(n); !s.ok()) return s;
    }
    ++it;
  }
  return absl::OkStatus();
}

// ---- File content ----

int PowerCutFs::Impl::SaveUndo(Node& n, uint64_t begin, uint64_t end) {
  end = std::min(end, n.synced_size);
  if (begin >= end) return 0;
  for (uint64_t block = begin / kUndoBlockBytes; block * kUndoBlockBytes < end; ++block) {
    if (n.undo.count(block) != 0) continue;  // saved at an earlier change
    const uint64_t at = block * kUndoBlockBytes;
    std::string bytes(std::min(kUndoBlockBytes, n.synced_size - at), '\0');
    ssize_t r = ::pread(n.fd, bytes.data(), bytes.size(), static_cast<off_t>(at));
    if (r != static_cast<ssize_t>(bytes.size())) return r < 0 ? errno : EIO;
    n.undo.emplace(block, std::move(bytes));
  }
  return 0;
}

int PowerCutFs::Impl::Truncate(Node& n, uint64_t size) {
  if (int error = SaveUndo(n, size, n.synced_size); error != 0) return error;
  if (::ftruncate(n.fd, static_cast<off_t>(size)) != 0) return errno;
  n.size = size;
  n.mtime = n.ctime = Now();
  return 0;
}

int PowerCutFs::Impl::MakeNode(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                               Node** out) {
  int error = 0;
  Node* dir = Dir(parent, &error);
  if (dir == nullptr) return error;
  if (dir->entries.count(name) != 0) return EEXIST;
  auto node = std::make_unique<Node>();
  node->ino = next_ino_++;
  node->mode = mode;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  node->uid = ctx->uid;
  node->gid = ctx->gid;
  node->atime = node->mtime = node->ctime = Now();
  if (node->IsRegular()) {
    const std::string path = absl::StrCat(backing_dir_, "/", node->ino);
    node->fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (node->fd < 0) return errno;
  }
  node->links = 1;
  dir->entries[name] = node->ino;
  dir->mtime = dir->ctime = Now();
  *out = node.get();
  nodes_[node->ino] = std::move(node);
  return 0;
}

// ---- Operations ----

void PowerCutFs::Impl::OpInit(void*, fuse_conn_info* conn) {
  // Every write reaches us before write() returns, so an unmount drops no
  // dirty page the kernel still held.
  conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

void PowerCutFs::Impl::OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(parent, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return (void)fuse_reply_err(req, ENOENT);
  fs->ReplyEntry(req, *fs->Find(it->second), nullptr);
}

// Nodes live until a power cut drops them (or the file system goes), so
// the kernel's lookup counts need no bookkeeping.
void PowerCutFs::Impl::OpForget(fuse_req_t req, fuse_ino_t, uint64_t) { fuse_reply_none(req); }
void PowerCutFs::Impl::OpForgetMulti(fuse_req_t req, size_t, fuse_forget_data*) {
  fuse_reply_none(req);
}

void PowerCutFs::Impl::OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ENOENT);
  struct stat st;
  Fill(*n, &st);
  fuse_reply_attr(req, &st, 0);
}

void PowerCutFs::Impl::OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                                 fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ENOENT);
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (!n->IsRegular()) return (void)fuse_reply_err(req, n->IsDir() ? EISDIR : EINVAL);
    if (int error = fs->Truncate(*n, static_cast<uint64_t>(attr->st_size)); error != 0) {
      return (void)fuse_reply_err(req, error);
    }
  }
  if (to_set & FUSE_SET_ATTR_MODE) n->mode = (n->mode & S_IFMT) | (attr->st_mode & 07777);
  if (to_set & FUSE_SET_ATTR_UID) n->uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) n->gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_ATIME) n->atime = attr->st_atim;
  if (to_set & FUSE_SET_ATTR_MTIME) n->mtime = attr->st_mtim;
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) n->atime = Now();
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) n->mtime = Now();
  n->ctime = Now();
  struct stat st;
  Fill(*n, &st);
  fuse_reply_attr(req, &st, 0);
}

void PowerCutFs::Impl::OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                               dev_t) {
  // Sockets (a server's bind) and FIFOs are names only: the kernel keeps
  // the endpoint itself.
  if (!S_ISREG(mode) && !S_ISSOCK(mode) && !S_ISFIFO(mode)) {
    return (void)fuse_reply_err(req, EPERM);
  }
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = nullptr;
  if (int error = fs->MakeNode(req, parent, name, mode, &n); error != 0) {
    return (void)fuse_reply_err(req, error);
  }
  fs->ReplyEntry(req, *n, nullptr);
}

void PowerCutFs::Impl::OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = nullptr;
  if (int error = fs->MakeNode(req, parent, name, S_IFDIR | (mode & 07777), &n); error != 0) {
    return (void)fuse_reply_err(req, error);
  }
  fs->ReplyEntry(req, *n, nullptr);
}

void PowerCutFs::Impl::OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
                                fuse_file_info* fi) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = nullptr;
  if (int error = fs->MakeNode(req, parent, name, S_IFREG | (mode & 07777), &n); error != 0) {
    return (void)fuse_reply_err(req, error);
  }
  fi->keep_cache = 0;
  fs->ReplyEntry(req, *n, fi);
}

void PowerCutFs::Impl::OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(parent, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return (void)fuse_reply_err(req, ENOENT);
  Node* n = fs->Find(it->second);
  if (n->IsDir()) return (void)fuse_reply_err(req, EISDIR);
  --n->links;
  n->ctime = dir->mtime = dir->ctime = Now();
  dir->entries.erase(it);  // the node stays: open descriptors, synced names
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(parent, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return (void)fuse_reply_err(req, ENOENT);
  Node* n = fs->Find(it->second);
  if (!n->IsDir()) return (void)fuse_reply_err(req, ENOTDIR);
  if (!n->entries.empty()) return (void)fuse_reply_err(req, ENOTEMPTY);
  dir->mtime = dir->ctime = Now();
  dir->entries.erase(it);
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpRename(fuse_req_t req, fuse_ino_t parent, const char* name,
                                fuse_ino_t newparent, const char* newname, unsigned int flags) {
  if ((flags & ~static_cast<unsigned int>(RENAME_NOREPLACE)) != 0) {
    return (void)fuse_reply_err(req, EINVAL);  // RENAME_EXCHANGE, RENAME_WHITEOUT
  }
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* from = fs->Dir(parent, &error);
  Node* to = from == nullptr ? nullptr : fs->Dir(newparent, &error);
  if (to == nullptr) return (void)fuse_reply_err(req, error);
  auto src = from->entries.find(name);
  if (src == from->entries.end()) return (void)fuse_reply_err(req, ENOENT);
  Node* moved = fs->Find(src->second);
  auto dst = to->entries.find(newname);
  if (dst != to->entries.end()) {
    if (flags & RENAME_NOREPLACE) return (void)fuse_reply_err(req, EEXIST);
    if (dst->second == src->second) return (void)fuse_reply_err(req, 0);
    Node* replaced = fs->Find(dst->second);
    if (replaced->IsDir() && !moved->IsDir()) return (void)fuse_reply_err(req, EISDIR);
    if (!replaced->IsDir() && moved->IsDir()) return (void)fuse_reply_err(req, ENOTDIR);
    if (replaced->IsDir() && !replaced->entries.empty()) {
      return (void)fuse_reply_err(req, ENOTEMPTY);
    }
    if (!replaced->IsDir()) --replaced->links;
    replaced->ctime = Now();
  }
  const fuse_ino_t ino = src->second;
  from->entries.erase(src);
  to->entries[newname] = ino;
  from->mtime = from->ctime = to->mtime = to->ctime = moved->ctime = Now();
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                              const char* newname) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(newparent, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  Node* n = fs->Find(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ENOENT);
  if (n->IsDir()) return (void)fuse_reply_err(req, EPERM);
  if (dir->entries.count(newname) != 0) return (void)fuse_reply_err(req, EEXIST);
  dir->entries[newname] = ino;
  ++n->links;
  n->ctime = dir->mtime = dir->ctime = Now();
  fs->ReplyEntry(req, *n, nullptr);
}

void PowerCutFs::Impl::OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ENOENT);
  if (!n->IsRegular()) return (void)fuse_reply_err(req, n->IsDir() ? EISDIR : ENXIO);
  if (fi->flags & O_TRUNC) {
    if (int error = fs->Truncate(*n, 0); error != 0) return (void)fuse_reply_err(req, error);
  }
  fi->keep_cache = 0;
  fuse_reply_open(req, fi);
}

void PowerCutFs::Impl::OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                              fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr || !n->IsRegular()) return (void)fuse_reply_err(req, EBADF);
  std::string buf(size, '\0');
  ssize_t r = ::pread(n->fd, buf.data(), size, off);
  if (r < 0) return (void)fuse_reply_err(req, errno);
  fuse_reply_buf(req, buf.data(), static_cast<size_t>(r));
}

void PowerCutFs::Impl::OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size,
                               off_t off, fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr || !n->IsRegular()) return (void)fuse_reply_err(req, EBADF);
  const uint64_t begin = static_cast<uint64_t>(off);
  if (int error = fs->SaveUndo(*n, begin, begin + size); error != 0) {
    return (void)fuse_reply_err(req, error);
  }
  for (size_t done = 0; done < size;) {
    ssize_t w = ::pwrite(n->fd, buf + done, size - done, off + static_cast<off_t>(done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return (void)fuse_reply_err(req, w < 0 ? errno : EIO);
    done += static_cast<size_t>(w);
  }
  n->size = std::max<uint64_t>(n->size, begin + size);
  n->mtime = n->ctime = Now();
  fuse_reply_write(req, size);
}

void PowerCutFs::Impl::OpFsync(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr) return (void)fuse_reply_err(req, ENOENT);
  ++fs->stats_.file_syncs;
  // Data and size, as fdatasync promises; nothing about the file's names.
  n->synced_size = n->size;
  n->undo.clear();
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(ino, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  auto listing = std::make_unique<DirListing>();
  struct stat st;
  Fill(*dir, &st);
  listing->entries.emplace_back(".", st);
  listing->entries.emplace_back("..", st);
  for (const auto& [name, child] : dir->entries) {
    Fill(*fs->Find(child), &st);
    listing->entries.emplace_back(name, st);
  }
  fi->fh = reinterpret_cast<uint64_t>(listing.release());
  fuse_reply_open(req, fi);
}

void PowerCutFs::Impl::OpReaddir(fuse_req_t req, fuse_ino_t, size_t size, off_t off,
                                 fuse_file_info* fi) {
  const auto* listing = reinterpret_cast<const DirListing*>(fi->fh);
  std::string buf(size, '\0');
  size_t used = 0;
  for (size_t i = static_cast<size_t>(off); i < listing->entries.size(); ++i) {
    const auto& [name, st] = listing->entries[i];
    size_t need = fuse_add_direntry(req, buf.data() + used, size - used, name.c_str(), &st,
                                    static_cast<off_t>(i + 1));
    if (need > size - used) break;
    used += need;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void PowerCutFs::Impl::OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  delete reinterpret_cast<DirListing*>(fi->fh);
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int, fuse_file_info*) {
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  int error = 0;
  Node* dir = fs->Dir(ino, &error);
  if (dir == nullptr) return (void)fuse_reply_err(req, error);
  ++fs->stats_.dir_syncs;
  dir->synced_entries = dir->entries;
  fuse_reply_err(req, 0);
}

void PowerCutFs::Impl::OpStatfs(fuse_req_t req, fuse_ino_t) {
  struct statvfs st;
  if (::statvfs(Of(req)->backing_dir_.c_str(), &st) != 0) {
    return (void)fuse_reply_err(req, errno);
  }
  fuse_reply_statfs(req, &st);
}

void PowerCutFs::Impl::OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                                   off_t length, fuse_file_info*) {
  // Allocation leaves every byte as it was; growing the size is undone by
  // the power cut's truncation to the synced size.
  if ((mode & ~FALLOC_FL_KEEP_SIZE) != 0) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Impl* fs = Of(req);
  absl::MutexLock lock(&fs->mu_);
  Node* n = fs->Find(ino);
  if (n == nullptr || !n->IsRegular()) return (void)fuse_reply_err(req, EBADF);
  if (::fallocate(n->fd, mode, offset, length) != 0) return (void)fuse_reply_err(req, errno);
  if ((mode & FALLOC_FL_KEEP_SIZE) == 0) {
    n->size = std::max<uint64_t>(n->size, static_cast<uint64_t>(offset + length));
  }
  fuse_reply_err(req, 0);
}

fuse_lowlevel_ops PowerCutFs::Impl::Operations() {
  fuse_lowlevel_ops ops = {};
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.forget = OpForget;
  ops.forget_multi = OpForgetMulti;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.create = OpCreate;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.rename = OpRename;
  ops.link = OpLink;
  ops.open = OpOpen;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.fallocate = OpFallocate;
  return ops;
}

// ---- PowerCutFs ----

PowerCutFs::PowerCutFs(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PowerCutFs::~PowerCutFs() = default;

absl::StatusOr<std::unique_ptr<PowerCutFs>> PowerCutFs::Mount(const std::string& mountpoint,
                                                              const std::string& backing_dir) {
  auto impl = std::make_unique<Impl>(mountpoint, backing_dir);
  if (absl::Status started = impl->Start(); !started.ok()) return started;
  return std::unique_ptr<PowerCutFs>(new PowerCutFs(std::move(impl)));
}

absl::Status PowerCutFs::PowerCut() { return impl_->PowerCut(); }
PowerCutFs::Stats PowerCutFs::stats() const { return impl_->stats(); }
const std::string& PowerCutFs::mountpoint() const { return impl_->mountpoint(); }

}  // namespace logfs::testing
