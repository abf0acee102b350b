#include "fsclient/path_client.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "src/status/posix_error.h"
#include "src/status/macros.h"
#include "store/format/limits.h"

namespace logfs::fsclient {

absl::StatusOr<std::vector<std::string>> SplitPath(absl::string_view path) {
  if (path.empty() || path[0] != '/') {
    return PosixError(EINVAL, absl::StrCat("'", path, "' is not an absolute path"));
  }
  std::vector<std::string> components;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return PosixError(EINVAL, absl::StrCat("'", path, "': no . or .. in a logfs path"));
    }
    if (part.size() > format::kNameBytesMax) {
      return PosixError(ENAMETOOLONG, absl::StrCat("'", path, "': a name longer than ",
                                                   format::kNameBytesMax, " bytes"));
    }
    components.emplace_back(part);
  }
  return components;
}

size_t CopyOut(const cache::ReadBuffer& buffer, char* out) {
  size_t copied = 0;
  for (const iovec& piece : buffer.iov()) {
    std::memcpy(out + copied, piece.iov_base, piece.iov_len);
    copied += piece.iov_len;
  }
  return copied;
}

absl::StatusOr<proto::Attr> PathClient::Lookup(uint64_t parent, const std::string& name) {
  absl::Notification done;
  absl::StatusOr<proto::Attr> attr;
  client_.Lookup(parent, name, [&](absl::StatusOr<proto::Attr> result) {
    attr = std::move(result);
    done.Notify();
  });
  done.WaitForNotification();
  return attr;
}

absl::StatusOr<uint64_t> PathClient::ResolveDir(const std::vector<std::string>& components,
                                                size_t count) {
  uint64_t ino = kRootIno;
  for (size_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(proto::Attr attr, Lookup(ino, components[i]));
    if (!S_ISDIR(attr.mode())) {
      return PosixError(ENOTDIR, absl::StrCat("'", components[i], "' is not a directory"));
    }
    ino = attr.ino();
  }
  return ino;
}

absl::StatusOr<PathClient::Parent> PathClient::ResolveParent(absl::string_view path) {
  ASSIGN_OR_RETURN(std::vector<std::string> components, SplitPath(path));
  if (components.empty()) return PosixError(EINVAL, "the root has no parent");
  Parent parent;
  ASSIGN_OR_RETURN(parent.ino, ResolveDir(components, components.size() - 1));
  parent.name = std::move(components.back());
  return parent;
}

absl::StatusOr<proto::Attr> PathClient::Stat(absl::string_view path) {
  ASSIGN_OR_RETURN(std::vector<std::string> components, SplitPath(path));
  if (components.empty()) {
    absl::Notification done;
    absl::StatusOr<proto::Attr> attr;
    client_.GetAttr(kRootIno, [&](absl::StatusOr<proto::Attr> result) {
      attr = std::move(result);
      done.Notify();
    });
    done.WaitForNotification();
    return attr;
  }
  ASSIGN_OR_RETURN(uint64_t parent, ResolveDir(components, components.size() - 1));
  return Lookup(parent, components.back());
}

absl::Status PathClient::MakeDir(absl::string_view path, uint32_t mode) {
  ASSIGN_OR_RETURN(Parent parent, ResolveParent(path));
  return client_
      .Create(parent.ino, parent.name, S_IFDIR | (mode & 07777), getuid(), getgid(), "", 0)
      .status();
}

absl::Status PathClient::MakeDirs(absl::string_view path, uint32_t mode) {
  ASSIGN_OR_RETURN(std::vector<std::string> components, SplitPath(path));
  uint64_t ino = kRootIno;
  for (const std::string& name : components) {
    absl::StatusOr<proto::Attr> attr = Lookup(ino, name);
    if (AttachedErrno(attr.status()) == ENOENT) {
      attr = client_.Create(ino, name, S_IFDIR | (mode & 07777), getuid(), getgid(), "", 0);
      // Made by another client since the lookup: use theirs.
      if (AttachedErrno(attr.status()) == EEXIST) attr = Lookup(ino, name);
    }
    if (!attr.ok()) return attr.status();
    if (!S_ISDIR(attr->mode())) {
      return PosixError(ENOTDIR, absl::StrCat("'", name, "' in '", path, "' is not a directory"));
    }
    ino = attr->ino();
  }
  return absl::OkStatus();
}

absl::Status PathClient::Remove(absl::string_view path, bool directory) {
  ASSIGN_OR_RETURN(Parent parent, ResolveParent(path));
  return client_.Unlink(parent.ino, parent.name, directory);
}

absl::Status PathClient::Rename(absl::string_view from, absl::string_view to) {
  ASSIGN_OR_RETURN(Parent source, ResolveParent(from));
  ASSIGN_OR_RETURN(Parent target, ResolveParent(to));
  return client_.Rename(source.ino, source.name, target.ino, target.name, 0);
}

absl::Status PathClient::Link(absl::string_view from, absl::string_view to) {
  ASSIGN_OR_RETURN(proto::Attr source, Stat(from));
  ASSIGN_OR_RETURN(Parent target, ResolveParent(to));
  return client_.Link(source.ino(), target.ino, target.name).status();
}

absl::StatusOr<std::vector<std::string>> PathClient::List(absl::string_view path) {
  ASSIGN_OR_RETURN(std::vector<std::string> components, SplitPath(path));
  ASSIGN_OR_RETURN(uint64_t ino, ResolveDir(components, components.size()));
  std::vector<std::string> names;
  std::string after;
  for (;;) {
    ASSIGN_OR_RETURN(proto::ReaddirResponse page, client_.Readdir(ino, after));
    for (const proto::DirEntry& entry : page.entries()) {
      if (entry.name() != "." && entry.name() != "..") names.push_back(entry.name());
    }
    if (!page.more() || page.entries_size() == 0) break;
    after = page.entries(page.entries_size() - 1).name();
  }
  return names;
}

absl::StatusOr<std::shared_ptr<OpenFile>> PathClient::Open(absl::string_view path, int flags) {
  ASSIGN_OR_RETURN(proto::Attr attr, Stat(path));
  if (S_ISDIR(attr.mode()) && (flags & O_ACCMODE) != O_RDONLY) {
    return PosixError(EISDIR, absl::StrCat("'", path, "' is a directory"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OpenFile> file, client_.Open(attr.ino(), flags));
  return std::shared_ptr<OpenFile>(std::move(file));
}

absl::StatusOr<std::shared_ptr<OpenFile>> PathClient::Create(absl::string_view path, uint32_t mode,
                                                             int flags,
                                                             std::optional<proto::FileKind> kind) {
  ASSIGN_OR_RETURN(Parent parent, ResolveParent(path));
  proto::Attr attr;
  ASSIGN_OR_RETURN(std::unique_ptr<OpenFile> file,
                   client_.CreateForWrite(parent.ino, parent.name, S_IFREG | (mode & 07777),
                                          getuid(), getgid(), flags, &attr, kind));
  return std::shared_ptr<OpenFile>(std::move(file));
}

absl::Status PathClient::Append(OpenFile& file, absl::string_view data) {
  return client_.Write(file, 0, data.data(), data.size());
}

absl::Status PathClient::Sync(OpenFile& file) {
  Executors::CheckMayWaitOn(Executor::kRecovery, "a writer's sync");
  absl::Notification done;
  absl::Status status;
  client_.Sync(file, [&](absl::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

absl::StatusOr<size_t> PathClient::ReadAt(OpenFile& file, uint64_t offset, size_t n, char* out) {
  ASSIGN_OR_RETURN(cache::ReadBuffer buffer, client_.Read(file, offset, n));
  return CopyOut(buffer, out);
}

absl::Status PathClient::Close(std::shared_ptr<OpenFile> file) {
  return client_.Release(std::move(file));
}

}  // namespace logfs::fsclient
