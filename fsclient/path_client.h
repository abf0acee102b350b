// Calls by path over a Client, for programs that name files by path (the
// RocksDB plugin in rocksdb_fs/, an application, a tool) instead of by
// inode as the FUSE layer does. This is the API a C++ program uses
// (docs/rocksdb.md "From any C++ program"), as libcephfs's ceph_open /
// ceph_mkdir are over its inode calls.
//
// Paths are absolute ("/a/b"), resolved one component at a time from the
// root with one meta lookup each, and nothing is cached: a name another
// client changed is never seen old (a FUSE mount caches names for 1 s).
// Symbolic links are not followed (ENOTDIR past one). No permission checks
// are made: the cluster secret is what admits a client (README
// "Authentication"), and files are created with this process's uid and gid.
//
// Thread-safe: every call blocks its caller on meta (and Close, Sync on
// the writer's replicas) and may be made from any thread but one of the
// client's own (Executors::CheckMayWaitOn CHECKs it). Errors are the
// Client's, with the errno attached (src/status/posix_error.h): ENOENT,
// EEXIST, ENOTDIR, EISDIR, ENOTEMPTY, EBUSY (another client writes the
// file), EPERM (a sealed block file written or truncated), EINVAL for a
// path that is not absolute or has an empty, "." or ".." component,
// ENAMETOOLONG for a component longer than format::kNameBytesMax.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cache/file_read.h"
#include "fsclient/client.h"
#include "store/format/logfs.pb.h"

namespace logfs::fsclient {

// Meta's root directory (store/meta/namespace/namespace.h, FUSE_ROOT_ID).
inline constexpr uint64_t kRootIno = 1;

// The components of absolute `path` ("/a//b/" -> {"a", "b"}; "/" -> {}).
// EINVAL and ENAMETOOLONG as above.
absl::StatusOr<std::vector<std::string>> SplitPath(absl::string_view path);

// Copies the bytes of `buffer` to `out` (room for buffer.size()); their count.
size_t CopyOut(const cache::ReadBuffer& buffer, char* out);

class PathClient {
 public:
  // `client` is not owned, must be connected and outlive this.
  explicit PathClient(Client* client) : client_(*client) {}

  // The attributes of `path`: its size is the live one (Client::Lookup).
  absl::StatusOr<proto::Attr> Stat(absl::string_view path);
  // mkdir: EEXIST if `path` exists.
  absl::Status MakeDir(absl::string_view path, uint32_t mode);
  // mkdir -p: every missing directory on `path`; ENOTDIR if one is a file.
  absl::Status MakeDirs(absl::string_view path, uint32_t mode);
  // unlink(2), or rmdir(2) with `directory`.
  absl::Status Remove(absl::string_view path, bool directory);
  // rename(2): replaces `to` if it exists (a file over a file, a directory
  // over an empty directory).
  absl::Status Rename(absl::string_view from, absl::string_view to);
  // link(2): `to` names the inode `from` names (not a directory: EPERM);
  // EEXIST if `to` exists (Client::Link).
  absl::Status Link(absl::string_view from, absl::string_view to);
  // The names in directory `path`, without "." and "..", in meta's order.
  absl::StatusOr<std::vector<std::string>> List(absl::string_view path);

  // Opens existing `path` with `flags` (O_RDONLY, or O_WRONLY / O_RDWR
  // with O_APPEND, O_TRUNC: Client::Open, which takes the writer lease).
  absl::StatusOr<std::shared_ptr<OpenFile>> Open(absl::string_view path, int flags);
  // Creates regular file `path` with `mode` and opens it for write with
  // `flags` holding the writer lease (one durable change at meta:
  // Client::CreateForWrite). `kind` unset: its directory's kind. EEXIST if
  // `path` exists.
  absl::StatusOr<std::shared_ptr<OpenFile>> Create(absl::string_view path, uint32_t mode,
                                                   int flags,
                                                   std::optional<proto::FileKind> kind);
  // Appends `data` to a file opened for write with O_APPEND (Client::Write:
  // it waits only when the replica queue is full or a segment rolls).
  absl::Status Append(OpenFile& file, absl::string_view data);
  // Blocks until every byte appended to `file` is durable on its ack
  // quorum (fsync; DESIGN §3); the writer's error (EIO) otherwise.
  absl::Status Sync(OpenFile& file);
  // Up to `n` bytes at `offset` into `out` (fewer at end of file); the
  // count. EIO when no replica can serve a segment.
  absl::StatusOr<size_t> ReadAt(OpenFile& file, uint64_t offset, size_t n, char* out);
  // Closes `file`: the last handle of a writer syncs and seals it and
  // releases the lease (Client::Release); its error is the writer's.
  absl::Status Close(std::shared_ptr<OpenFile> file);

  Client& client() { return client_; }

 private:
  // The attr of `name` in directory `parent` (Client::Lookup).
  absl::StatusOr<proto::Attr> Lookup(uint64_t parent, const std::string& name);
  // The inode of the directory named by `components`.
  absl::StatusOr<uint64_t> ResolveDir(const std::vector<std::string>& components, size_t count);
  // The parent directory's inode and the last component of `path`; EINVAL
  // for "/".
  struct Parent {
    uint64_t ino = 0;
    std::string name;
  };
  absl::StatusOr<Parent> ResolveParent(absl::string_view path);

  Client& client_;
};

}  // namespace logfs::fsclient
