// The namespace calls `logfs bench meta` times, on two targets:
//   NewPosixNamespaceOps     system calls on paths under a directory (any
//                            file system: ext4, a FUSE passthrough, a
//                            logfs mount);
//   ConnectLibraryNamespaceOps  meta's namespace RPCs through the logfs
//                            client library (fsclient::Client without FUSE).
// Every call is thread-safe: workers on threads share one object. The
// POSIX target holds no state, so forked worker processes use their copy.
// Errors carry the errno (src/status/posix_error.h AttachedErrno): a
// syscall's, or meta's POSIX error.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace logfs::bench {

// A directory of the target: a path (POSIX) or an inode (library).
struct NamespaceDir {
  std::string path;
  uint64_t ino = 0;
};

class NamespaceOps {
 public:
  virtual ~NamespaceOps() = default;
  // Where the run directory goes: --dir, or the root of the file system.
  virtual NamespaceDir Root() const = 0;
  // "dir=PATH" or "meta=HOST:PORT", for the report.
  virtual std::string Describe() const = 0;
  // Lets the caller fork worker processes that call this object (true for
  // the POSIX target; the library's connections and threads do not
  // survive fork).
  virtual bool ForkSafe() const = 0;

  // mkdir `name` in `parent` (mode 0755).
  virtual absl::StatusOr<NamespaceDir> MakeDir(const NamespaceDir& parent,
                                               const std::string& name) = 0;
  // rmdir.
  virtual absl::Status RemoveDir(const NamespaceDir& parent, const std::string& name) = 0;
  // A new empty regular file (mode 0644) that must not exist yet. POSIX:
  // open(O_CREAT | O_EXCL | O_WRONLY) and close (a failed close fails
  // it); library: meta's Create, with no open handle (the kernel's
  // create would add an open and, at close, a release).
  virtual absl::Status CreateFile(const NamespaceDir& dir, const std::string& name) = 0;
  // The mode (S_IFMT and permissions) of `name`: stat(2) of the path, or
  // meta's Lookup (what a stat of an uncached path asks).
  virtual absl::StatusOr<uint32_t> StatMode(const NamespaceDir& dir, const std::string& name) = 0;
  // Every name in `dir` but "." and "..", in the target's order:
  // opendir/readdir to the end, or meta's Readdir page after page.
  virtual absl::StatusOr<std::vector<std::string>> ListNames(const NamespaceDir& dir) = 0;
  // rename(2) within `dir`, replacing nothing the bench made.
  virtual absl::Status Rename(const NamespaceDir& dir, const std::string& from,
                              const std::string& to) = 0;
  // unlink(2) of a file.
  virtual absl::Status Unlink(const NamespaceDir& dir, const std::string& name) = 0;
};

// System calls on paths under `dir` (which must exist).
std::unique_ptr<NamespaceOps> NewPosixNamespaceOps(const std::string& dir);

// Connects to meta at `meta_address` ("host:port" or a list of replicas)
// as a mount would, with the process's cluster secret if one is loaded
// (src/main's --cluster_secret_file). kUnavailable if meta cannot be
// reached; meta's refusal otherwise. The object disconnects when
// destroyed.
absl::StatusOr<std::unique_ptr<NamespaceOps>> ConnectLibraryNamespaceOps(
    const std::string& meta_address);

}  // namespace logfs::bench
