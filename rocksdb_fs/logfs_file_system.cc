#include "rocksdb_fs/logfs_file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cerrno>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/time.h"
#include "rocksdb/env.h"
#include "rocksdb/utilities/options_type.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "store/rpc/frame_auth.h"

namespace logfs::rocksdb_fs {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

// Returns the IOStatus of `expr` if it is not OK.
#define RETURN_IF_ERROR_IO(expr)    \
  do {                              \
    IOStatus io_status_ = (expr);   \
    if (!io_status_.ok()) return io_status_; \
  } while (false)

namespace {

// Errors of a file already closed: RocksDB's own (posix) files return
// IOError for a call after Close, never crash.
IOStatus Closed(const std::string& path) {
  return IOStatus::IOError(absl::StrCat(path, ": the file is closed"));
}

// A file open for read, as both of RocksDB's read-only file types use it:
// closed (its pin at meta released) when the file goes.
class ReadHandle {
 public:
  ReadHandle(std::shared_ptr<LogfsSession> session, std::string path,
             std::shared_ptr<fsclient::OpenFile> file)
      : session_(std::move(session)), path_(std::move(path)), file_(std::move(file)) {}
  ~ReadHandle() { session_->paths().Close(std::move(file_)).IgnoreError(); }

  // Up to `n` bytes at `offset` into `scratch`, as *result.
  IOStatus ReadAt(uint64_t offset, size_t n, Slice* result, char* scratch) const {
    absl::StatusOr<size_t> read = session_->paths().ReadAt(*file_, offset, n, scratch);
    if (!read.ok()) return ToIOStatus(read.status(), absl::StrCat("read ", path_));
    *result = Slice(scratch, *read);
    return IOStatus::OK();
  }
  fsclient::Client& client() const { return session_->client(); }
  const std::shared_ptr<fsclient::OpenFile>& file() const { return file_; }
  const std::string& path() const { return path_; }

 private:
  const std::shared_ptr<LogfsSession> session_;  // keeps the client up while the file lives
  const std::string path_;
  std::shared_ptr<fsclient::OpenFile> file_;
};

class LogfsSequentialFile : public rocksdb::FSSequentialFile {
 public:
  LogfsSequentialFile(std::shared_ptr<LogfsSession> session, std::string path,
                      std::shared_ptr<fsclient::OpenFile> file)
      : handle_(std::move(session), std::move(path), std::move(file)) {}

  IOStatus Read(size_t n, const IOOptions& /*options*/, Slice* result, char* scratch,
                IODebugContext* /*dbg*/) override {
    IOStatus status = handle_.ReadAt(offset_, n, result, scratch);
    if (status.ok()) offset_ += result->size();
    return status;
  }
  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions& /*options*/, Slice* result,
                          char* scratch, IODebugContext* /*dbg*/) override {
    return handle_.ReadAt(offset, n, result, scratch);
  }
  IOStatus Skip(uint64_t n) override {
    offset_ += n;
    return IOStatus::OK();
  }

 private:
  const ReadHandle handle_;
  uint64_t offset_ = 0;  // RocksDB reads a sequential file from one thread
};

class LogfsRandomAccessFile : public rocksdb::FSRandomAccessFile {
 public:
  LogfsRandomAccessFile(std::shared_ptr<LogfsSession> session, std::string path,
                        std::shared_ptr<fsclient::OpenFile> file)
      : handle_(std::move(session), std::move(path), std::move(file)) {}

  IOStatus Read(uint64_t offset, size_t n, const IOOptions& /*options*/, Slice* result,
                char* scratch, IODebugContext* /*dbg*/) const override {
    return handle_.ReadAt(offset, n, result, scratch);
  }

  // The reads go out together: those the block cache or a local replica
  // serve complete on this thread, the others on the client's waiting
  // pool, each from its own replica (Client::ReadAsync).
  IOStatus MultiRead(rocksdb::FSReadRequest* requests, size_t count, const IOOptions& options,
                     IODebugContext* dbg) override {
    if (count == 1) {
      requests[0].status = Read(requests[0].offset, requests[0].len, options,
                                &requests[0].result, requests[0].scratch, dbg);
      return IOStatus::OK();
    }
    absl::BlockingCounter pending(static_cast<int>(count));
    for (size_t i = 0; i < count; ++i) {
      rocksdb::FSReadRequest& request = requests[i];
      handle_.client().ReadAsync(
          handle_.file(), request.offset, request.len,
          [this, &request, &pending](absl::StatusOr<cache::ReadBuffer> read) {
            if (read.ok()) {
              request.result = Slice(request.scratch, fsclient::CopyOut(*read, request.scratch));
              request.status = IOStatus::OK();
            } else {
              request.result = Slice();
              request.status = ToIOStatus(read.status(), absl::StrCat("read ", handle_.path()));
            }
            pending.DecrementCount();
          });
    }
    pending.Wait();
    return IOStatus::OK();
  }

 private:
  const ReadHandle handle_;
};

class LogfsWritableFile : public rocksdb::FSWritableFile {
 public:
  LogfsWritableFile(std::shared_ptr<LogfsSession> session, std::string path,
                    std::shared_ptr<fsclient::OpenFile> file, uint64_t size)
      : session_(std::move(session)),
        paths_(session_->paths()),
        path_(std::move(path)),
        file_(std::move(file)),
        size_(size) {}
  // RocksDB closes its files before dropping them; one it drops open is
  // closed here (sealed, its lease released), its error dropped as posix's.
  ~LogfsWritableFile() override {
    if (file_ != nullptr) paths_.Close(std::move(file_)).IgnoreError();
  }

  IOStatus Append(const Slice& data, const IOOptions& /*options*/,
                  IODebugContext* /*dbg*/) override {
    if (file_ == nullptr) return Closed(path_);
    absl::Status status = paths_.Append(*file_, absl::string_view(data.data(), data.size()));
    if (!status.ok()) return ToIOStatus(status, absl::StrCat("append to ", path_));
    size_ += data.size();
    return IOStatus::OK();
  }
  IOStatus Append(const Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& /*verification_info*/,
                  IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }
  // logfs files are append-only (DESIGN §2).
  IOStatus PositionedAppend(const Slice& /*data*/, uint64_t offset, const IOOptions& /*options*/,
                            IODebugContext* /*dbg*/) override {
    return IOStatus::NotSupported(
        absl::StrCat(path_, ": logfs files are append-only (a write at ", offset, ")"));
  }
  IOStatus PositionedAppend(const Slice& data, uint64_t offset, const IOOptions& options,
                            const rocksdb::DataVerificationInfo& /*verification_info*/,
                            IODebugContext* dbg) override {
    return PositionedAppend(data, offset, options, dbg);
  }
  // Only to the current size (RocksDB truncates after preallocating, which
  // logfs does not do).
  IOStatus Truncate(uint64_t size, const IOOptions& /*options*/,
                    IODebugContext* /*dbg*/) override {
    if (size == size_) return IOStatus::OK();
    return IOStatus::NotSupported(
        absl::StrCat(path_, ": logfs files are append-only (truncate to ", size, ")"));
  }
  IOStatus Close(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    if (file_ == nullptr) return IOStatus::OK();
    return ToIOStatus(paths_.Close(std::move(file_)), absl::StrCat("close ", path_));
  }
  // The writer sends appends on its own (a WAL file's at once, a block
  // file's in large appends); durability is Sync's.
  IOStatus Flush(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    return IOStatus::OK();
  }
  IOStatus Sync(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    if (file_ == nullptr) return Closed(path_);
    return ToIOStatus(paths_.Sync(*file_), absl::StrCat("sync ", path_));
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return Sync(options, dbg);
  }
  // Client::Sync is thread-safe: RocksDB may sync a WAL while another
  // thread appends to it (group commit outside its mutex).
  bool IsSyncThreadSafe() const override { return true; }
  uint64_t GetFileSize(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    return size_;
  }

  // Appends `data` without ever blocking the caller (Client::WriteAsync:
  // a full queue or a roll waits on the client's waiting pool); appends
  // are taken in call order. Its error is dropped: for the info log.
  void AppendInBackground(std::string data) {
    if (file_ == nullptr) return;
    auto kept = std::make_shared<const std::string>(std::move(data));
    size_ += kept->size();
    session_->client().WriteAsync(*file_, 0, kept->data(), kept->size(),
                                  [kept](absl::Status) {});
  }

 private:
  const std::shared_ptr<LogfsSession> session_;  // keeps the client up while the file lives
  fsclient::PathClient& paths_;
  const std::string path_;
  std::shared_ptr<fsclient::OpenFile> file_;  // null once closed
  uint64_t size_;
};

// Meta acknowledges a namespace change once it is durable, so a
// directory has nothing to sync.
class LogfsDirectory : public rocksdb::FSDirectory {
 public:
  IOStatus Fsync(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    return IOStatus::OK();
  }
  IOStatus Close(const IOOptions& /*options*/, IODebugContext* /*dbg*/) override {
    return IOStatus::OK();
  }
};

// RocksDB's info log: one line per call, "YYYY/MM/DD-HH:MM:SS.uuuuuu TID
// message", as RocksDB's own loggers write it.
// RocksDB logs while it holds its DB mutex, so a line never waits for a
// replica: it is appended in the background (AppendInBackground).
class LogfsLogger : public rocksdb::Logger {
 public:
  LogfsLogger(std::unique_ptr<LogfsWritableFile> file, rocksdb::InfoLogLevel level)
      : rocksdb::Logger(level), file_(std::move(file)) {}
  ~LogfsLogger() override {
    if (!closed_) {
      closed_ = true;
      CloseImpl().PermitUncheckedError();
    }
  }

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    struct timeval now;
    gettimeofday(&now, nullptr);
    struct tm t;
    localtime_r(&now.tv_sec, &t);
    char prefix[64];
    const int prefix_bytes = std::snprintf(
        prefix, sizeof(prefix), "%04d/%02d/%02d-%02d:%02d:%02d.%06ld %zx ", t.tm_year + 1900,
        t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec, static_cast<long>(now.tv_usec),
        std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffffffffffff);
    std::string line(prefix, prefix_bytes > 0 ? static_cast<size_t>(prefix_bytes) : 0);
    va_list copy;
    va_copy(copy, ap);
    const int bytes = std::vsnprintf(nullptr, 0, format, copy);
    va_end(copy);
    if (bytes > 0) {
      const size_t start = line.size();
      line.resize(start + bytes + 1);
      std::vsnprintf(line.data() + start, bytes + 1, format, ap);
      line.resize(start + bytes);
    }
    if (line.empty() || line.back() != '\n') line.push_back('\n');
    absl::MutexLock lock(&mu_);
    if (file_ == nullptr) return;
    file_->AppendInBackground(std::move(line));
  }

 protected:
  rocksdb::Status CloseImpl() override {
    absl::MutexLock lock(&mu_);
    if (file_ == nullptr) return rocksdb::Status::OK();
    IOStatus status = file_->Close(IOOptions(), nullptr);
    file_.reset();
    return status;
  }

 private:
  absl::Mutex mu_;
  std::unique_ptr<LogfsWritableFile> file_ ABSL_GUARDED_BY(mu_);
};

class LogfsLock : public rocksdb::FileLock {
 public:
  LogfsLock(std::shared_ptr<LogfsSession> session, std::string path,
            std::shared_ptr<fsclient::OpenFile> file)
      : session(std::move(session)), path(std::move(path)), file(std::move(file)) {}
  const std::shared_ptr<LogfsSession> session;
  const std::string path;
  std::shared_ptr<fsclient::OpenFile> file;
};

const std::unordered_map<std::string, rocksdb::OptionTypeInfo>& OptionsTypeInfo() {
  static const auto* info = new std::unordered_map<std::string, rocksdb::OptionTypeInfo>{
      {"cluster_secret_file",
       {offsetof(LogfsFsOptions, cluster_secret_file), rocksdb::OptionType::kString}},
      {"block_cache_mb", {offsetof(LogfsFsOptions, block_cache_mb), rocksdb::OptionType::kUInt64T}},
      {"connect_wait_ms",
       {offsetof(LogfsFsOptions, connect_wait_ms), rocksdb::OptionType::kUInt64T}},
  };
  return *info;
}

}  // namespace

LogfsSession::LogfsSession(std::unique_ptr<fsclient::Client> client)
    : client_(std::move(client)), paths_(client_.get()) {}

LogfsSession::~LogfsSession() { client_->Shutdown(); }

LogfsFileSystem::LogfsFileSystem(Uri uri) : uri_(std::move(uri)) {
  RegisterOptions("LogfsFsOptions", &options_, &OptionsTypeInfo());
}

// The session closes when the last file, logger or lock of it goes.
LogfsFileSystem::~LogfsFileSystem() = default;

bool LogfsFileSystem::IsInstanceOf(const std::string& id) const {
  return id == kClassName() || absl::StartsWith(id, "logfs://") || FileSystem::IsInstanceOf(id);
}

rocksdb::Status LogfsFileSystem::PrepareOptions(const rocksdb::ConfigOptions& options) {
  rocksdb::Status status = FileSystem::PrepareOptions(options);
  if (!status.ok()) return status;
  std::shared_ptr<LogfsSession> session;
  return Connected(&session);
}

IOStatus LogfsFileSystem::Connected(std::shared_ptr<LogfsSession>* session) {
  {
    absl::ReaderMutexLock lock(&connect_mu_);
    if (session_ != nullptr) {
      *session = session_;
      return IOStatus::OK();
    }
  }
  absl::MutexLock lock(&connect_mu_);
  if (session_ != nullptr) {  // another caller connected meanwhile
    *session = session_;
    return IOStatus::OK();
  }
  fsclient::ClientOptions client_options;
  client_options.meta_address = uri_.meta;
  client_options.block_cache_bytes = options_.block_cache_mb << 20;
  client_options.connect_wait = absl::Milliseconds(options_.connect_wait_ms);
  if (!options_.cluster_secret_file.empty()) {
    auto key = rpc::ClusterKey::FromFile(options_.cluster_secret_file, "logfs rocksdb");
    if (!key.ok()) {
      return IOStatus::InvalidArgument(absl::StrCat("logfs: cluster_secret_file ",
                                                    options_.cluster_secret_file, ": ",
                                                    key.status().message()));
    }
    client_options.cluster_key = std::move(*key);
    client_options.cluster_secret_file = options_.cluster_secret_file;
  }
  auto client = std::make_unique<fsclient::Client>(client_options);
  absl::Status status = client->Connect();
  if (!status.ok()) {
    client->Shutdown();
    return IOStatus::IOError(absl::StrCat("logfs: cannot connect to meta at ", uri_.meta, ": ",
                                          status.message()));
  }
  auto connected = std::make_shared<LogfsSession>(std::move(client));
  if (uri_.root != "/") {
    status = connected->paths().MakeDirs(uri_.root, 0755);
    if (!status.ok()) return ToIOStatus(status, absl::StrCat("logfs: the root ", uri_.root));
  }
  session_ = connected;
  *session = std::move(connected);
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::Call(
    const std::string& what, const std::function<absl::Status(fsclient::PathClient&)>& call) {
  std::shared_ptr<LogfsSession> session;
  RETURN_IF_ERROR_IO(Connected(&session));
  return ToIOStatus(call(session->paths()), what);
}

template <typename File, typename RocksdbFile>
IOStatus LogfsFileSystem::OpenForRead(const std::string& fname,
                                      std::unique_ptr<RocksdbFile>* result) {
  std::shared_ptr<LogfsSession> session;
  RETURN_IF_ERROR_IO(Connected(&session));
  auto file = session->paths().Open(Path(fname), O_RDONLY);
  if (!file.ok()) return ToIOStatus(file.status(), absl::StrCat("open ", fname));
  *result = std::make_unique<File>(std::move(session), fname, std::move(*file));
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::NewSequentialFile(const std::string& fname,
                                            const rocksdb::FileOptions& /*options*/,
                                            std::unique_ptr<rocksdb::FSSequentialFile>* result,
                                            IODebugContext* /*dbg*/) {
  return OpenForRead<LogfsSequentialFile>(fname, result);
}

IOStatus LogfsFileSystem::NewRandomAccessFile(const std::string& fname,
                                              const rocksdb::FileOptions& /*options*/,
                                              std::unique_ptr<rocksdb::FSRandomAccessFile>* result,
                                              IODebugContext* /*dbg*/) {
  return OpenForRead<LogfsRandomAccessFile>(fname, result);
}

IOStatus LogfsFileSystem::OpenForWrite(const std::string& fname, bool replace,
                                       std::unique_ptr<rocksdb::FSWritableFile>* result) {
  std::shared_ptr<LogfsSession> session;
  RETURN_IF_ERROR_IO(Connected(&session));
  fsclient::PathClient* paths = &session->paths();
  const std::string path = Path(fname);
  // Create, else replace or append; another client may create or remove
  // the name between two steps, so a few rounds.
  absl::Status status;
  for (int round = 0; round < 3; ++round) {
    auto created = paths->Create(path, 0644, O_WRONLY | O_APPEND, KindOf(path));
    if (created.ok()) {
      *result = std::make_unique<LogfsWritableFile>(session, fname, std::move(*created), 0);
      return IOStatus::OK();
    }
    status = created.status();
    if (AttachedErrno(status) != EEXIST) break;
    if (replace) {
      status = paths->Remove(path, /*directory=*/false);
      if (!status.ok() && AttachedErrno(status) != ENOENT) break;
      continue;
    }
    auto opened = paths->Open(path, O_WRONLY | O_APPEND);
    if (opened.ok() && (*opened)->writer == nullptr) {  // a sealed block file
      status = paths->Close(std::move(*opened));
      // NotSupported: what RocksDB expects of a file system that cannot
      // reopen a file for write, and does not need to (a sealed block
      // file is durable): IngestExternalFile reopens an SST it linked in
      // only to sync it, and takes NotSupported as "nothing to sync".
      return IOStatus::NotSupported(absl::StrCat(
          "reopen ", fname, " for append: a sealed block file takes no more appends"));
    }
    if (opened.ok()) {
      // The writer's length: every byte appended, durable or not.
      const uint64_t size = (*opened)->writer->length();
      *result = std::make_unique<LogfsWritableFile>(session, fname, std::move(*opened), size);
      return IOStatus::OK();
    }
    status = opened.status();
    if (AttachedErrno(status) != ENOENT) break;
  }
  return ToIOStatus(status, absl::StrCat("open for write ", fname));
}

IOStatus LogfsFileSystem::NewWritableFile(const std::string& fname,
                                          const rocksdb::FileOptions& /*options*/,
                                          std::unique_ptr<rocksdb::FSWritableFile>* result,
                                          IODebugContext* /*dbg*/) {
  return OpenForWrite(fname, /*replace=*/true, result);
}

IOStatus LogfsFileSystem::ReopenWritableFile(const std::string& fname,
                                             const rocksdb::FileOptions& /*options*/,
                                             std::unique_ptr<rocksdb::FSWritableFile>* result,
                                             IODebugContext* /*dbg*/) {
  return OpenForWrite(fname, /*replace=*/false, result);
}

IOStatus LogfsFileSystem::NewDirectory(const std::string& name, const IOOptions& options,
                                       std::unique_ptr<rocksdb::FSDirectory>* result,
                                       IODebugContext* dbg) {
  bool is_dir = false;
  RETURN_IF_ERROR_IO(IsDirectory(name, options, &is_dir, dbg));
  if (!is_dir) return IOStatus::IOError(absl::StrCat(name, ": not a directory"));
  *result = std::make_unique<LogfsDirectory>();
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::FileExists(const std::string& fname, const IOOptions& /*options*/,
                                     IODebugContext* /*dbg*/) {
  std::shared_ptr<LogfsSession> session;
  RETURN_IF_ERROR_IO(Connected(&session));
  fsclient::PathClient* paths = &session->paths();
  auto attr = paths->Stat(Path(fname));
  // RocksDB: NotFound for a missing file and for a name that cannot exist.
  const int error = AttachedErrno(attr.status());
  if (error == ENOENT || error == ENOTDIR || error == EINVAL || error == ENAMETOOLONG) {
    return IOStatus::NotFound(fname);
  }
  return ToIOStatus(attr.status(), absl::StrCat("stat ", fname));
}

IOStatus LogfsFileSystem::GetChildren(const std::string& dir, const IOOptions& /*options*/,
                                      std::vector<std::string>* result, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("list ", dir), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(*result, paths.List(Path(dir)));
    return absl::OkStatus();
  });
}

IOStatus LogfsFileSystem::DeleteFile(const std::string& fname, const IOOptions& /*options*/,
                                     IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("delete ", fname), [&](fsclient::PathClient& paths) {
    return paths.Remove(Path(fname), /*directory=*/false);
  });
}

IOStatus LogfsFileSystem::CreateDir(const std::string& dirname, const IOOptions& /*options*/,
                                    IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("mkdir ", dirname),
              [&](fsclient::PathClient& paths) { return paths.MakeDir(Path(dirname), 0755); });
}

IOStatus LogfsFileSystem::CreateDirIfMissing(const std::string& dirname,
                                             const IOOptions& /*options*/,
                                             IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("mkdir -p ", dirname),
              [&](fsclient::PathClient& paths) { return paths.MakeDirs(Path(dirname), 0755); });
}

IOStatus LogfsFileSystem::DeleteDir(const std::string& dirname, const IOOptions& /*options*/,
                                    IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("rmdir ", dirname), [&](fsclient::PathClient& paths) {
    return paths.Remove(Path(dirname), /*directory=*/true);
  });
}

IOStatus LogfsFileSystem::GetFileSize(const std::string& fname, const IOOptions& /*options*/,
                                      uint64_t* file_size, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("stat ", fname), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(proto::Attr attr, paths.Stat(Path(fname)));
    *file_size = attr.size();
    return absl::OkStatus();
  });
}

IOStatus LogfsFileSystem::GetFileModificationTime(const std::string& fname,
                                                  const IOOptions& /*options*/,
                                                  uint64_t* file_mtime, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("stat ", fname), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(proto::Attr attr, paths.Stat(Path(fname)));
    *file_mtime = static_cast<uint64_t>(attr.mtime_ns()) / 1000000000;  // seconds, as posix's
    return absl::OkStatus();
  });
}

IOStatus LogfsFileSystem::RenameFile(const std::string& src, const std::string& target,
                                     const IOOptions& /*options*/, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("rename ", src, " to ", target), [&](fsclient::PathClient& paths) {
    return paths.Rename(Path(src), Path(target));
  });
}

IOStatus LogfsFileSystem::LinkFile(const std::string& src, const std::string& target,
                                   const IOOptions& /*options*/, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("link ", src, " to ", target), [&](fsclient::PathClient& paths) {
    return paths.Link(Path(src), Path(target));
  });
}

IOStatus LogfsFileSystem::NumFileLinks(const std::string& fname, const IOOptions& /*options*/,
                                       uint64_t* count, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("stat ", fname), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(proto::Attr attr, paths.Stat(Path(fname)));
    *count = attr.nlink();
    return absl::OkStatus();
  });
}

IOStatus LogfsFileSystem::AreFilesSame(const std::string& first, const std::string& second,
                                       const IOOptions& /*options*/, bool* res,
                                       IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("stat ", first, " and ", second),
              [&](fsclient::PathClient& paths) -> absl::Status {
                ASSIGN_OR_RETURN(proto::Attr one, paths.Stat(Path(first)));
                ASSIGN_OR_RETURN(proto::Attr other, paths.Stat(Path(second)));
                *res = one.ino() == other.ino();
                return absl::OkStatus();
              });
}

IOStatus LogfsFileSystem::LockFile(const std::string& fname, const IOOptions& /*options*/,
                                   rocksdb::FileLock** lock, IODebugContext* /*dbg*/) {
  *lock = nullptr;
  std::shared_ptr<LogfsSession> session;
  RETURN_IF_ERROR_IO(Connected(&session));
  fsclient::PathClient* paths = &session->paths();
  const std::string path = Path(fname);
  {
    absl::MutexLock guard(&locks_mu_);
    if (!locked_.insert(path).second) {
      return IOStatus::IOError(absl::StrCat("lock ", fname, ": already held by this process"));
    }
  }
  // The lock file's writer lease is the lock: EBUSY while another client
  // (a mount, another process) holds it, recovered when its holder dies.
  absl::StatusOr<std::shared_ptr<fsclient::OpenFile>> file =
      paths->Create(path, 0644, O_WRONLY, proto::KIND_BLOCK);
  if (AttachedErrno(file.status()) == EEXIST) file = paths->Open(path, O_WRONLY);
  if (file.ok() && (*file)->writer == nullptr) {
    // A sealed block file with data opens for write without a lease (it
    // takes no appends): it cannot serve as a lock.
    paths->Close(std::move(*file)).IgnoreError();
    file = PosixError(EPERM, "the lock file is a sealed block file with data: not a lock");
  }
  if (!file.ok()) {
    absl::MutexLock guard(&locks_mu_);
    locked_.erase(path);
    if (AttachedErrno(file.status()) == EBUSY) {
      return IOStatus::IOError(absl::StrCat(
          "lock ", fname, ": held by another logfs client (a mount or process writes it)"));
    }
    return ToIOStatus(file.status(), absl::StrCat("lock ", fname));
  }
  *lock = new LogfsLock(std::move(session), path, std::move(*file));
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::UnlockFile(rocksdb::FileLock* lock, const IOOptions& /*options*/,
                                     IODebugContext* /*dbg*/) {
  std::unique_ptr<LogfsLock> held(static_cast<LogfsLock*>(lock));
  absl::Status status = held->session->paths().Close(std::move(held->file));
  absl::MutexLock guard(&locks_mu_);
  locked_.erase(held->path);
  return ToIOStatus(status, absl::StrCat("unlock ", held->path));
}

IOStatus LogfsFileSystem::GetTestDirectory(const IOOptions& options, std::string* path,
                                           IODebugContext* dbg) {
  *path = "/rocksdbtest";
  return CreateDirIfMissing(*path, options, dbg);
}

IOStatus LogfsFileSystem::NewLogger(const std::string& fname, const IOOptions& /*options*/,
                                    std::shared_ptr<rocksdb::Logger>* result,
                                    IODebugContext* /*dbg*/) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  RETURN_IF_ERROR_IO(OpenForWrite(fname, /*replace=*/true, &file));
  // OpenForWrite makes LogfsWritableFiles.
  std::unique_ptr<LogfsWritableFile> log(static_cast<LogfsWritableFile*>(file.release()));
  *result = std::make_shared<LogfsLogger>(std::move(log), rocksdb::InfoLogLevel::INFO_LEVEL);
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::GetAbsolutePath(const std::string& db_path,
                                          const IOOptions& /*options*/, std::string* output_path,
                                          IODebugContext* /*dbg*/) {
  *output_path = absl::StartsWith(db_path, "/") ? db_path : absl::StrCat("/", db_path);
  return IOStatus::OK();
}

IOStatus LogfsFileSystem::IsDirectory(const std::string& path, const IOOptions& /*options*/,
                                      bool* is_dir, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("stat ", path), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(proto::Attr attr, paths.Stat(Path(path)));
    *is_dir = S_ISDIR(attr.mode());
    return absl::OkStatus();
  });
}

IOStatus LogfsFileSystem::GetFreeSpace(const std::string& path, const IOOptions& /*options*/,
                                       uint64_t* diskfree, IODebugContext* /*dbg*/) {
  return Call(absl::StrCat("statfs ", path), [&](fsclient::PathClient& paths) -> absl::Status {
    ASSIGN_OR_RETURN(proto::StatFsResponse stats, paths.client().StatFs());
    *diskfree = stats.free_bytes();
    return absl::OkStatus();
  });
}

int RegisterLogfsFileSystem(rocksdb::ObjectLibrary& library, const std::string& /*arg*/) {
  library.AddFactory<rocksdb::FileSystem>(
      rocksdb::ObjectLibrary::PatternEntry(LogfsFileSystem::kClassName(), false)
          .AddSeparator("://", false),
      [](const std::string& uri, std::unique_ptr<rocksdb::FileSystem>* guard,
         std::string* errmsg) -> rocksdb::FileSystem* {
        absl::StatusOr<Uri> parsed = ParseUri(uri);
        if (!parsed.ok()) {
          *errmsg = std::string(parsed.status().message());
          return nullptr;
        }
        guard->reset(new LogfsFileSystem(std::move(*parsed)));
        return guard->get();
      });
  return 1;
}

}  // namespace logfs::rocksdb_fs
