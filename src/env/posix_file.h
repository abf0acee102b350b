// Durable file helpers over the FileSystem seam (src/env/file_system.h),
// and two raw-descriptor helpers. What they create survives a crash: a
// file or directory is durable only once it is synced *and* the directory
// holding its name is synced after the name appeared (POSIX leaves the
// entry volatile until then; LevelDB's SyncDir, RocksDB's
// FSDirectory::Fsync).
//
// Each helper takes the FileSystem to use; the overloads without one use
// FileSystem::Default(), for code that never runs on a fake (process
// spawning, main). Built on the seam rather than beside it, so that a
// store handed a fault-injecting file system has every one of its files,
// the small state files included, go through it.
//
// Every function is thread-safe (no shared state) and reports a failed
// syscall as SyscallError(errno, "<call> <path>") (src/status/). None retries an
// fsync that failed (fsyncgate): the error is returned as is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "src/env/file_system.h"

namespace logfs::env {

// The directory part of `path` ("a/b" -> "a", "/a" -> "/", "a" -> ".").
std::string Dirname(const std::string& path);

// fsyncs directory `dir` of the POSIX file system, so that every create,
// rename and unlink in it before the call is durable (FileSystem::SyncDir).
absl::Status SyncDir(const std::string& dir);

// Replaces `path` with `contents` durably: writes `path`.tmp, fdatasyncs
// it, renames it over `path` and syncs the directory of `path`. When it
// returns OK, a crash leaves `path` with exactly `contents`; on failure the
// old file, if any, is unchanged (a stray .tmp may remain; the directory
// sync may also fail after the rename, and then `path` may hold either).
absl::Status WriteFileAtomically(FileSystem& fs, const std::string& path,
                                 absl::string_view contents);
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// mkdir -p with mode 0755: creates `dir` and its missing parents, and
// syncs the parent of each directory it creates, so every directory it
// created is durable when it returns OK. A directory that already existed
// is taken as it is. kFailedPrecondition if `dir` or a parent exists and is
// not a directory, kInvalidArgument for "".
absl::Status MakeDirs(FileSystem& fs, const std::string& dir);
absl::Status MakeDirs(const std::string& dir);

// Removes `path`, a file or a directory with what it holds, at most
// `depth` levels of directories down (kFailedPrecondition past that,
// after removing what it could). A missing `path` is success. Not
// atomic; syncs nothing.
absl::Status RemoveTree(FileSystem& fs, const std::string& path, int depth);

// Reads a whole small file (at most `bytes_max` bytes; kDataLoss if it is
// larger). kNotFound if it does not exist.
absl::StatusOr<std::string> ReadSmallFile(FileSystem& fs, const std::string& path,
                                          size_t bytes_max);
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t bytes_max);

// Raw descriptors (one a short-circuit reader got from another process):
// pwrite(2) of all of `data` at `offset`, retrying short writes and EINTR.
absl::Status PwriteAll(int fd, absl::string_view data, uint64_t offset);

// Reads up to `n` bytes at `offset` with pread(2); fewer only at the end of
// the file.
absl::StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, size_t n);

}  // namespace logfs::env
