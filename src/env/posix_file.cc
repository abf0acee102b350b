#include "src/env/posix_file.h"

#include <unistd.h>

#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"

namespace logfs::env {
namespace {

absl::Status NotADirectory(const std::string& dir) {
  return absl::FailedPreconditionError(absl::StrCat(dir, " exists and is not a directory"));
}

// Writes `contents` to a new `tmp`, syncs and closes it.
absl::Status WriteSyncedFile(FileSystem& fs, const std::string& tmp, absl::string_view contents) {
  ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                   fs.NewWritableFile(tmp, WritableFileOptions{/*create=*/true,
                                                               /*truncate=*/true}));
  absl::Status status = file->WriteAt(0, contents);
  if (status.ok()) status = file->Sync();
  absl::Status closed = file->Close();
  return status.ok() ? closed : status;
}

}  // namespace

std::string Dirname(const std::string& path) {
  size_t end = path.size();
  while (end > 1 && path[end - 1] == '/') --end;  // "a/b/" names a/b
  size_t slash = path.rfind('/', end - 1);
  if (slash == std::string::npos) return ".";
  while (slash > 0 && path[slash - 1] == '/') --slash;
  return slash == 0 ? "/" : path.substr(0, slash);
}

absl::Status SyncDir(const std::string& dir) { return FileSystem::Default()->SyncDir(dir); }

absl::Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                                 absl::string_view contents) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  absl::Status status = WriteSyncedFile(fs, tmp, contents);
  if (status.ok()) status = fs.Rename(tmp, path);
  if (!status.ok()) {
    fs.Remove(tmp).IgnoreError();  // best effort; readers ignore a stale .tmp
    return status;
  }
  return fs.SyncDir(Dirname(path));
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  return WriteFileAtomically(*FileSystem::Default(), path, contents);
}

absl::Status RemoveTree(FileSystem& fs, const std::string& path, int depth) {
  absl::StatusOr<FileAttributes> attributes = fs.Stat(path);
  if (absl::IsNotFound(attributes.status())) return absl::OkStatus();
  if (!attributes.ok()) return attributes.status();
  if (attributes->is_directory) {
    if (depth <= 0) return absl::FailedPreconditionError(absl::StrCat(path, " is too deep"));
    absl::StatusOr<std::vector<std::string>> names = fs.ListDir(path);
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      if (absl::Status s = RemoveTree(fs, path + "/" + name, depth - 1); !s.ok()) return s;
    }
  }
  absl::Status removed = fs.Remove(path);
  return absl::IsNotFound(removed) ? absl::OkStatus() : removed;
}

absl::Status MakeDirs(FileSystem& fs, const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("empty directory path");
  absl::StatusOr<FileAttributes> existing = fs.Stat(dir);
  if (existing.ok()) return existing->is_directory ? absl::OkStatus() : NotADirectory(dir);
  if (!absl::IsNotFound(existing.status())) return existing.status();
  const std::string parent = Dirname(dir);
  if (parent != dir) RETURN_IF_ERROR(MakeDirs(fs, parent));
  if (absl::Status made = fs.CreateDir(dir); !made.ok()) {
    if (!absl::IsAlreadyExists(made)) return made;
    // Created by someone else meanwhile: theirs to sync.
    ASSIGN_OR_RETURN(FileAttributes attributes, fs.Stat(dir));
    return attributes.is_directory ? absl::OkStatus() : NotADirectory(dir);
  }
  // The new entry lives in `parent`: durable once `parent` is synced.
  return fs.SyncDir(parent);
}

absl::Status MakeDirs(const std::string& dir) { return MakeDirs(*FileSystem::Default(), dir); }

absl::StatusOr<std::string> ReadSmallFile(FileSystem& fs, const std::string& path,
                                          size_t bytes_max) {
  ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> file, fs.NewRandomAccessFile(path));
  // One byte more than allowed tells "exactly bytes_max" from "larger".
  ASSIGN_OR_RETURN(std::string out, ReadUpTo(*file, 0, bytes_max + 1));
  if (out.size() > bytes_max) {
    return absl::DataLossError(absl::StrCat(path, " is larger than ", bytes_max, " bytes"));
  }
  return out;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t bytes_max) {
  return ReadSmallFile(*FileSystem::Default(), path, bytes_max);
}

absl::Status PwriteAll(int fd, absl::string_view data, uint64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n =
        ::pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "pwrite");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, size_t n) {
  std::string out(n, '\0');
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return SyscallError(errno, "pread");
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  out.resize(done);
  return out;
}

}  // namespace logfs::env
