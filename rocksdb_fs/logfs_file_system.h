// logfs as a RocksDB FileSystem (rocksdb/file_system.h, RocksDB 7.8 as
// Debian 12 ships it): RocksDB's files live in logfs and go through the
// client library (fsclient/) in the RocksDB process, with no FUSE round
// trip per write, as RocksDB runs on HDFS through its HDFS Env or on
// zoned disks through ZenFS. docs/rocksdb.md is the user's guide.
//
// One LogfsFileSystem is one client session with meta (a "mount" to meta:
// its writer leases, its pins), so a file it writes is EBUSY to every
// mount's writer and the reverse, and a process that dies has its files
// recovered like a dead mount's. It connects in PrepareOptions, which
// FileSystem::CreateFromString runs once the options below are set (else
// on its first call), with those options:
//
//   logfs://META_LIST[/ROOT]                      (rocksdb_fs/names.h)
//   id=logfs://META_LIST[/ROOT];cluster_secret_file=PATH;block_cache_mb=N;connect_wait_ms=N
//
// Files: WAL files for RocksDB's logs, MANIFEST and info LOG, block files
// for the rest (names.h KindOf). A writable file appends only (no
// positioned writes: NotSupported, as a FUSE write at the wrong offset is
// EINVAL); Sync and Fsync return once every appended byte is durable on
// the file's ack quorum (DESIGN §3); Close syncs and seals. A directory's
// Fsync does nothing: meta acknowledges a namespace change only once it is
// durable. LockFile takes the writer lease of the lock file (and a lock
// table in this process, which leases do not cover), so two processes, or
// a process and a mount, never open one DB at once.
//
// Thread-safe, as RocksDB requires of a FileSystem; each call blocks its
// caller on meta and, for Sync, Close and reads of data not cached, on
// segment servers. Errors: names.h ToIOStatus.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "fsclient/client.h"
#include "fsclient/path_client.h"
#include "rocksdb/file_system.h"
#include "rocksdb/utilities/object_registry.h"
#include "rocksdb_fs/names.h"

namespace logfs::rocksdb_fs {

// What RocksDB configures on the FileSystem after creating it from its
// URI (Customizable options; RegisterOptions).
struct LogfsFsOptions {
  std::string cluster_secret_file;  // empty: the process's key (none)
  uint64_t block_cache_mb = 256;    // the client's block cache; 0: none
  uint64_t connect_wait_ms = 10000; // ClientOptions::connect_wait
};

// One client session with meta, shared by the FileSystem and by every
// file, logger and lock it hands out: the last of them to go shuts the
// client down, so a file RocksDB drops after the FileSystem still closes
// (seals, releases its lease) cleanly.
class LogfsSession {
 public:
  // `client` is connected.
  explicit LogfsSession(std::unique_ptr<fsclient::Client> client);
  ~LogfsSession();  // Client::Shutdown
  fsclient::Client& client() { return *client_; }
  fsclient::PathClient& paths() { return paths_; }

 private:
  const std::unique_ptr<fsclient::Client> client_;
  fsclient::PathClient paths_;
};

class LogfsFileSystem : public rocksdb::FileSystem {
 public:
  // A file system on the cluster and root `uri` names; connects later.
  explicit LogfsFileSystem(Uri uri);
  ~LogfsFileSystem() override;

  static const char* kClassName() { return "logfs"; }
  const char* Name() const override { return kClassName(); }
  // RocksDB finds the FileSystem of a URI by this ("logfs://...").
  bool IsInstanceOf(const std::string& id) const override;

  // Connects (Customizable: after the options are set).
  rocksdb::Status PrepareOptions(const rocksdb::ConfigOptions& options) override;

  rocksdb::IOStatus NewSequentialFile(const std::string& fname,
                                      const rocksdb::FileOptions& options,
                                      std::unique_ptr<rocksdb::FSSequentialFile>* result,
                                      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewRandomAccessFile(const std::string& fname,
                                        const rocksdb::FileOptions& options,
                                        std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                        rocksdb::IODebugContext* dbg) override;
  // Replaces `fname` if it exists (RocksDB's contract).
  rocksdb::IOStatus NewWritableFile(const std::string& fname, const rocksdb::FileOptions& options,
                                    std::unique_ptr<rocksdb::FSWritableFile>* result,
                                    rocksdb::IODebugContext* dbg) override;
  // Appends to `fname` (created if missing); a sealed block file refuses
  // appends (NotSupported: it is durable already, and RocksDB then skips
  // the sync it reopened for).
  rocksdb::IOStatus ReopenWritableFile(const std::string& fname,
                                       const rocksdb::FileOptions& options,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name, const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus FileExists(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetChildren(const std::string& dir, const rocksdb::IOOptions& options,
                                std::vector<std::string>* result,
                                rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& dirname,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& dirname, const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFileSize(const std::string& fname, const rocksdb::IOOptions& options,
                                uint64_t* file_size, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFileModificationTime(const std::string& fname,
                                            const rocksdb::IOOptions& options,
                                            uint64_t* file_mtime,
                                            rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& src, const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  // A hard link (PathClient::Link): what Checkpoint and
  // IngestExternalFile(move_files) make instead of copying an SST, in
  // metadata only. NotSupported (EXDEV) where logfs cannot link, and
  // RocksDB then copies.
  rocksdb::IOStatus LinkFile(const std::string& src, const std::string& target,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  // The names `fname`'s inode has (st_nlink).
  rocksdb::IOStatus NumFileLinks(const std::string& fname, const rocksdb::IOOptions& options,
                                 uint64_t* count, rocksdb::IODebugContext* dbg) override;
  // Whether both names are one inode.
  rocksdb::IOStatus AreFilesSame(const std::string& first, const std::string& second,
                                 const rocksdb::IOOptions& options, bool* res,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LockFile(const std::string& fname, const rocksdb::IOOptions& options,
                             rocksdb::FileLock** lock, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus UnlockFile(rocksdb::FileLock* lock, const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  // "/rocksdbtest" under the root, made if missing (db_bench's default
  // --db is its "dbbench").
  rocksdb::IOStatus GetTestDirectory(const rocksdb::IOOptions& options, std::string* path,
                                     rocksdb::IODebugContext* dbg) override;
  // The info log as a WAL file: each line is sent to the replicas as it is
  // logged, so `tail -f` on a mount follows it.
  rocksdb::IOStatus NewLogger(const std::string& fname, const rocksdb::IOOptions& options,
                              std::shared_ptr<rocksdb::Logger>* result,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetAbsolutePath(const std::string& db_path, const rocksdb::IOOptions& options,
                                    std::string* output_path,
                                    rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus IsDirectory(const std::string& path, const rocksdb::IOOptions& options,
                                bool* is_dir, rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFreeSpace(const std::string& path, const rocksdb::IOOptions& options,
                                 uint64_t* diskfree, rocksdb::IODebugContext* dbg) override;

 private:
  // The session, connecting on the first call (and again on the next call
  // after a failed attempt); the connection's error otherwise.
  rocksdb::IOStatus Connected(std::shared_ptr<LogfsSession>* session)
      ABSL_LOCKS_EXCLUDED(connect_mu_);
  // Opens `fname` for write: created with its kind (KindOf) if missing,
  // replaced first if `replace`, appended to otherwise.
  rocksdb::IOStatus OpenForWrite(const std::string& fname, bool replace,
                                 std::unique_ptr<rocksdb::FSWritableFile>* result);
  // `call` on the session's paths, its error as an IOStatus after `what`.
  rocksdb::IOStatus Call(const std::string& what,
                         const std::function<absl::Status(fsclient::PathClient&)>& call);
  // NewSequentialFile, NewRandomAccessFile: `fname` opened for read as a File.
  template <typename File, typename RocksdbFile>
  rocksdb::IOStatus OpenForRead(const std::string& fname, std::unique_ptr<RocksdbFile>* result);
  std::string Path(const std::string& fname) const { return UnderRoot(uri_.root, fname); }

  const Uri uri_;
  LogfsFsOptions options_;  // set by RocksDB's Configure before the first call

  absl::Mutex connect_mu_;
  std::shared_ptr<LogfsSession> session_ ABSL_GUARDED_BY(connect_mu_);

  // Paths locked by LockFile in this process: leases are per client, so
  // a second LockFile of this process would get the lease it holds.
  absl::Mutex locks_mu_;
  std::set<std::string> locked_ ABSL_GUARDED_BY(locks_mu_);
};

// Adds the "logfs://" FileSystem factory to `library` (as RocksDB's own
// plugins do with their registrar functions); returns the number of
// factories added (1). The shared library calls it when it is loaded
// (rocksdb_fs/plugin/plugin_main.cc); a program that links the client
// library statically calls it itself.
int RegisterLogfsFileSystem(rocksdb::ObjectLibrary& library, const std::string& arg);

}  // namespace logfs::rocksdb_fs
