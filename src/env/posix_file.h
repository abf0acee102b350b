// POSIX file helpers that make what they create survive a crash: a file or
// directory is durable only once it is fsynced *and* the directory holding
// its name is fsynced after the name appeared (POSIX leaves the entry
// volatile until then; LevelDB's SyncDir, RocksDB's FSDirectory::Fsync).
// The FileSystem seam of STYLE §5 goes on top of these later.
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

namespace logfs::env {

// The directory part of `path` ("a/b" -> "a", "/a" -> "/", "a" -> ".").
std::string Dirname(const std::string& path);

// fsyncs directory `dir`, so that every create, rename and unlink in it
// before the call is durable.
absl::Status SyncDir(const std::string& dir);

// Replaces `path` with `contents` durably: writes `path`.tmp, fsyncs it,
// renames it over `path` and fsyncs the directory of `path`. When it
// returns OK, a crash leaves `path` with exactly `contents`; on failure the
// old file, if any, is unchanged (a stray .tmp may remain; the directory
// fsync may also fail after the rename, and then `path` may hold either).
absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents);

// mkdir -p with mode 0755: creates `dir` and its missing parents, and
// fsyncs the parent of each directory it creates, so every directory it
// created is durable when it returns OK. A directory that already existed
// is taken as it is. kFailedPrecondition if `dir` or a parent exists and is
// not a directory, kInvalidArgument for "".
absl::Status MakeDirs(const std::string& dir);

// Reads a whole small file (at most `bytes_max` bytes; kDataLoss if it is
// larger). kNotFound if it does not exist.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t bytes_max);

// pwrite(2) of all of `data` at `offset`, retrying short writes and EINTR.
absl::Status PwriteAll(int fd, absl::string_view data, uint64_t offset);

// Reads up to `n` bytes at `offset` with pread(2); fewer only at the end of
// the file.
absl::StatusOr<std::string> PreadUpTo(int fd, uint64_t offset, size_t n);

}  // namespace logfs::env
