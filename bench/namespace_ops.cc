#include "bench/namespace_ops.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fsclient/client.h"
#include "src/status/syscall_error.h"

namespace logfs::bench {
namespace {

constexpr uint64_t kRootIno = 1;

std::string PathOf(const NamespaceDir& dir, const std::string& name) {
  return absl::StrCat(dir.path, "/", name);
}

class PosixNamespaceOps : public NamespaceOps {
 public:
  explicit PosixNamespaceOps(std::string dir) : dir_(std::move(dir)) {}

  NamespaceDir Root() const override { return {dir_, 0}; }
  std::string Describe() const override { return absl::StrCat("dir=", dir_); }
  bool ForkSafe() const override { return true; }

  absl::StatusOr<NamespaceDir> MakeDir(const NamespaceDir& parent,
                                       const std::string& name) override {
    const std::string path = PathOf(parent, name);
    if (::mkdir(path.c_str(), 0755) != 0) return SyscallError(errno, absl::StrCat("mkdir ", path));
    return NamespaceDir{path, 0};
  }
  absl::Status RemoveDir(const NamespaceDir& parent, const std::string& name) override {
    const std::string path = PathOf(parent, name);
    if (::rmdir(path.c_str()) != 0) return SyscallError(errno, absl::StrCat("rmdir ", path));
    return absl::OkStatus();
  }
  absl::Status CreateFile(const NamespaceDir& dir, const std::string& name) override {
    const std::string path = PathOf(dir, name);
    const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
    if (::close(fd) != 0) return SyscallError(errno, absl::StrCat("close ", path));
    return absl::OkStatus();
  }
  absl::StatusOr<uint32_t> StatMode(const NamespaceDir& dir, const std::string& name) override {
    const std::string path = PathOf(dir, name);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return SyscallError(errno, absl::StrCat("stat ", path));
    return static_cast<uint32_t>(st.st_mode);
  }
  absl::StatusOr<std::vector<std::string>> ListNames(const NamespaceDir& dir) override {
    DIR* stream = ::opendir(dir.path.c_str());
    if (stream == nullptr) return SyscallError(errno, absl::StrCat("opendir ", dir.path));
    std::vector<std::string> names;
    for (;;) {
      errno = 0;
      const struct dirent* entry = ::readdir(stream);
      if (entry == nullptr) break;
      const absl::string_view name = entry->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int readdir_errno = errno;
    ::closedir(stream);
    if (readdir_errno != 0) return SyscallError(readdir_errno, absl::StrCat("readdir ", dir.path));
    return names;
  }
  absl::Status Rename(const NamespaceDir& dir, const std::string& from,
                      const std::string& to) override {
    const std::string old_path = PathOf(dir, from);
    const std::string new_path = PathOf(dir, to);
    if (::rename(old_path.c_str(), new_path.c_str()) != 0) {
      return SyscallError(errno, absl::StrCat("rename ", old_path, " to ", new_path));
    }
    return absl::OkStatus();
  }
  absl::Status Unlink(const NamespaceDir& dir, const std::string& name) override {
    const std::string path = PathOf(dir, name);
    if (::unlink(path.c_str()) != 0) return SyscallError(errno, absl::StrCat("unlink ", path));
    return absl::OkStatus();
  }

 private:
  const std::string dir_;
};

// Meta's answers already carry their errno (PosixError); the prefix says
// which call and name failed.
absl::Status Prefixed(const absl::Status& status, absl::string_view what) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(what, ": ", status.message()));
  status.ForEachPayload([&](absl::string_view url, const absl::Cord& payload) {
    out.SetPayload(url, payload);
  });
  return out;
}

class LibraryNamespaceOps : public NamespaceOps {
 public:
  explicit LibraryNamespaceOps(const fsclient::ClientOptions& options)
      : meta_(options.meta_address), mount_(options) {}
  ~LibraryNamespaceOps() override { mount_.Shutdown(); }

  absl::Status Connect() { return mount_.Connect(); }

  NamespaceDir Root() const override { return {"", kRootIno}; }
  std::string Describe() const override { return absl::StrCat("meta=", meta_); }
  bool ForkSafe() const override { return false; }

  absl::StatusOr<NamespaceDir> MakeDir(const NamespaceDir& parent,
                                       const std::string& name) override {
    auto attr = mount_.Create(parent.ino, name, S_IFDIR | 0755, getuid(), getgid(), "", 0);
    if (!attr.ok()) return Prefixed(attr.status(), absl::StrCat("mkdir ", name));
    return NamespaceDir{absl::StrCat(parent.path, "/", name), attr->ino()};
  }
  absl::Status RemoveDir(const NamespaceDir& parent, const std::string& name) override {
    return Prefixed(mount_.Unlink(parent.ino, name, /*directory=*/true),
                    absl::StrCat("rmdir ", PathOf(parent, name)));
  }
  absl::Status CreateFile(const NamespaceDir& dir, const std::string& name) override {
    auto attr = mount_.Create(dir.ino, name, S_IFREG | 0644, getuid(), getgid(), "", 0);
    return Prefixed(attr.status(), absl::StrCat("create ", PathOf(dir, name)));
  }
  absl::StatusOr<uint32_t> StatMode(const NamespaceDir& dir, const std::string& name) override {
    absl::Notification done;
    absl::StatusOr<proto::Attr> attr;
    mount_.Lookup(dir.ino, name, [&](absl::StatusOr<proto::Attr> result) {
      attr = std::move(result);
      done.Notify();
    });
    done.WaitForNotification();
    if (!attr.ok()) return Prefixed(attr.status(), absl::StrCat("lookup ", PathOf(dir, name)));
    return attr->mode();
  }
  absl::StatusOr<std::vector<std::string>> ListNames(const NamespaceDir& dir) override {
    std::vector<std::string> names;
    std::string after;
    for (;;) {
      auto page = mount_.Readdir(dir.ino, after);
      if (!page.ok()) return Prefixed(page.status(), absl::StrCat("readdir ", dir.path));
      for (const proto::DirEntry& entry : page->entries()) names.push_back(entry.name());
      if (!page->more() || page->entries_size() == 0) break;
      after = names.back();
    }
    return names;
  }
  absl::Status Rename(const NamespaceDir& dir, const std::string& from,
                      const std::string& to) override {
    return Prefixed(mount_.Rename(dir.ino, from, dir.ino, to, 0),
                    absl::StrCat("rename ", PathOf(dir, from), " to ", PathOf(dir, to)));
  }
  absl::Status Unlink(const NamespaceDir& dir, const std::string& name) override {
    return Prefixed(mount_.Unlink(dir.ino, name, /*directory=*/false),
                    absl::StrCat("unlink ", PathOf(dir, name)));
  }

 private:
  const std::string meta_;
  fsclient::Client mount_;  // internally synchronized
};

}  // namespace

std::unique_ptr<NamespaceOps> NewPosixNamespaceOps(const std::string& dir) {
  return std::make_unique<PosixNamespaceOps>(dir);
}

absl::StatusOr<std::unique_ptr<NamespaceOps>> ConnectLibraryNamespaceOps(
    const std::string& meta_address) {
  fsclient::ClientOptions options;
  options.meta_address = meta_address;
  auto ops = std::make_unique<LibraryNamespaceOps>(options);
  if (absl::Status s = ops->Connect(); !s.ok()) return s;
  return std::unique_ptr<NamespaceOps>(std::move(ops));
}

}  // namespace logfs::bench
