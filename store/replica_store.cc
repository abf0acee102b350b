#include "store/replica_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "src/util/crc32c.h"
#include "store/replica_files.h"

namespace logfs::store {

struct ReplicaStore::Replica {
  Replica(uint64_t id, int file_fd) : segment_id(id), fd(file_fd) {}
  ~Replica() { ::close(fd); }

  ReplicaInfo Snapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return ReplicaInfo{segment_id, epoch, length, durable_length, sealed};
  }
  // kNotFound once deleted; the sticky failure once failed.
  absl::Status Usable() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (deleted) return absl::NotFoundError(absl::StrCat("segment ", segment_id, " not found"));
    return failure;
  }

  // Immutable after construction. The fd stays open as long as anyone holds
  // the Replica, so a sync in flight never touches a reused descriptor.
  const uint64_t segment_id;
  const int fd;

  mutable absl::Mutex mu;
  uint64_t epoch ABSL_GUARDED_BY(mu) = 0;
  uint64_t length ABSL_GUARDED_BY(mu) = 0;
  uint64_t durable_length ABSL_GUARDED_BY(mu) = 0;
  bool sealed ABSL_GUARDED_BY(mu) = false;
  bool deleted ABSL_GUARDED_BY(mu) = false;
  absl::Status failure ABSL_GUARDED_BY(mu);  // sticky, set by a failed fdatasync
};

namespace {

absl::Status PwriteAll(int fd, absl::string_view data, uint64_t offset) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::pwrite(fd, data.data() + done, data.size() - done,
                         static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "pwrite");
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads up to `n` bytes at `offset`; fewer only at end of file.
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

bool ParseSegmentFileName(absl::string_view name, absl::string_view suffix, uint64_t* id) {
  if (!absl::EndsWith(name, suffix)) return false;
  name.remove_suffix(suffix.size());
  return absl::SimpleAtoi(name, id);
}

absl::Status Unusable(const absl::Status& status) {
  return absl::FailedPreconditionError(
      absl::StrCat("data dir not usable: ", status.ToString()));
}

}  // namespace

ReplicaStore::ReplicaStore(std::string data_dir)
    : data_dir_(std::move(data_dir)), segments_dir_(data_dir_ + "/" + kSegmentsDirName) {}

ReplicaStore::~ReplicaStore() = default;

absl::StatusOr<std::unique_ptr<ReplicaStore>> ReplicaStore::Open(
    const ReplicaStoreOptions& options) {
  std::unique_ptr<ReplicaStore> store(new ReplicaStore(options.data_dir));
  absl::Status status = MakeDirs(store->data_dir_);
  if (status.ok()) status = MakeDirs(store->segments_dir_);
  if (status.ok()) {
    // Probe writability with a real create: access(2) lies for root and
    // read-only mounts.
    const std::string probe = store->segments_dir_ + "/.probe";
    int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      status = SyscallError(errno, absl::StrCat("create ", probe));
    } else {
      ::close(fd);
      ::unlink(probe.c_str());
    }
  }
  if (status.ok()) status = store->LoadAll();
  if (!status.ok()) return Unusable(status);
  return store;
}

absl::Status ReplicaStore::LoadAll() {
  auto id_text = ReadSmallFile(data_dir_ + "/" + kServerIdFileName, 64);
  if (id_text.ok()) {
    uint64_t id = 0;
    if (!absl::SimpleAtoi(*id_text, &id)) {
      return absl::DataLossError(absl::StrCat("bad ", kServerIdFileName, " file"));
    }
    absl::MutexLock lock(&mu_);
    server_id_ = id;
  } else if (!absl::IsNotFound(id_text.status())) {
    return id_text.status();
  }

  DIR* dir = ::opendir(segments_dir_.c_str());
  if (dir == nullptr) return SyscallError(errno, absl::StrCat("opendir ", segments_dir_));
  absl::flat_hash_set<uint64_t> data_ids, state_ids;
  std::vector<std::string> stale;
  while (struct dirent* entry = ::readdir(dir)) {
    absl::string_view name = entry->d_name;
    uint64_t id = 0;
    if (ParseSegmentFileName(name, kSegmentFileSuffix, &id)) {
      data_ids.insert(id);
    } else if (ParseSegmentFileName(name, kStateFileSuffix, &id)) {
      state_ids.insert(id);
    } else if (absl::EndsWith(name, ".tmp")) {
      stale.emplace_back(name);
    }
  }
  ::closedir(dir);
  // A data file without a state file is a Create that crashed, and a state
  // file without a data file a Delete that crashed: neither was acked.
  for (uint64_t id : data_ids) {
    if (!state_ids.contains(id)) stale.push_back(absl::StrCat(id, kSegmentFileSuffix));
  }
  for (uint64_t id : state_ids) {
    if (!data_ids.contains(id)) stale.push_back(absl::StrCat(id, kStateFileSuffix));
  }
  for (const std::string& name : stale) {
    LOG(WARNING) << "removing stale " << segments_dir_ << "/" << name;
    ::unlink((segments_dir_ + "/" + name).c_str());
  }
  if (!stale.empty()) RETURN_IF_ERROR(SyncDir(segments_dir_));
  for (uint64_t id : data_ids) {
    if (state_ids.contains(id)) RETURN_IF_ERROR(LoadOne(id));
  }
  return absl::OkStatus();
}

absl::Status ReplicaStore::LoadOne(uint64_t segment_id) {
  const std::string state_path = SegmentPath(segment_id, kStateFileSuffix);
  ASSIGN_OR_RETURN(std::string text, ReadSmallFile(state_path, kStateFileBytesMax));
  auto state = DecodeReplicaState(text);
  if (!state.ok()) return absl::DataLossError(absl::StrCat(state_path, ": ", state.status().message()));
  const std::string path = SegmentPath(segment_id, kSegmentFileSuffix);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  auto replica = std::make_shared<Replica>(segment_id, fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return SyscallError(errno, absl::StrCat("fstat ", path));
  uint64_t size = static_cast<uint64_t>(st.st_size);
  absl::Status failure;
  if (state->sealed && size != state->sealed_length) {
    // Seal truncates and syncs before it persists the state, so this is
    // damage from outside: never serve it.
    failure = absl::DataLossError(absl::StrCat("segment ", segment_id, " is sealed at ",
                                               state->sealed_length, " but has ", size, " bytes"));
    LOG(ERROR) << failure;
  }
  // Bytes written before the restart may not have been synced; sync once so
  // that durable_length = length is true.
  if (failure.ok() && ::fdatasync(fd) != 0) {
    failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", std::strerror(errno)));
    LOG(ERROR) << failure;
  }
  fdatasync_count_.fetch_add(1);
  {
    absl::MutexLock lock(&replica->mu);
    replica->epoch = state->epoch;
    replica->sealed = state->sealed;
    replica->length = size;
    replica->durable_length = size;
    replica->failure = failure;
  }
  absl::MutexLock lock(&mu_);
  replicas_[segment_id] = std::move(replica);
  return absl::OkStatus();
}

std::string ReplicaStore::SegmentPath(uint64_t segment_id, const char* suffix) const {
  return absl::StrCat(segments_dir_, "/", segment_id, suffix);
}

absl::StatusOr<std::shared_ptr<ReplicaStore::Replica>> ReplicaStore::Find(
    uint64_t segment_id) const {
  absl::MutexLock lock(&mu_);
  auto it = replicas_.find(segment_id);
  if (it == replicas_.end()) {
    return absl::NotFoundError(absl::StrCat("segment ", segment_id, " not found"));
  }
  return it->second;
}

void ReplicaStore::MarkDirty(uint64_t segment_id) {
  absl::MutexLock lock(&mu_);
  dirty_.insert(segment_id);
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Create(uint64_t segment_id, uint64_t epoch) {
  // Serializes creates and deletes of the namespace; their file I/O runs
  // under it because both are rare and must not interleave for one id.
  absl::MutexLock files_lock(&files_mu_);
  if (auto existing = Find(segment_id); existing.ok()) {
    Replica& r = **existing;
    absl::MutexLock lock(&r.mu);
    RETURN_IF_ERROR(r.Usable());
    if (epoch < r.epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          "segment ", segment_id, " exists at epoch ", r.epoch, " > ", epoch));
    }
    if (epoch > r.epoch) {
      RETURN_IF_ERROR(WriteFileAtomically(
          segments_dir_, absl::StrCat(segment_id, kStateFileSuffix),
          EncodeReplicaState(ReplicaState{epoch, r.sealed, r.sealed ? r.length : 0})));
      r.epoch = epoch;
    }
    return r.Snapshot();
  }
  const std::string path = SegmentPath(segment_id, kSegmentFileSuffix);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("create ", path));
  auto replica = std::make_shared<Replica>(segment_id, fd);
  // The state file is written last; its directory fsync also makes the data
  // file's entry durable. Until then a crash leaves an orphan data file.
  absl::Status status = WriteFileAtomically(segments_dir_,
                                            absl::StrCat(segment_id, kStateFileSuffix),
                                            EncodeReplicaState(ReplicaState{epoch, false, 0}));
  if (!status.ok()) {
    ::unlink(path.c_str());
    return status;
  }
  ReplicaInfo info;
  {
    absl::MutexLock lock(&replica->mu);
    replica->epoch = epoch;
    info = replica->Snapshot();
  }
  absl::MutexLock lock(&mu_);
  replicas_[segment_id] = std::move(replica);
  return info;
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Append(uint64_t segment_id, uint64_t epoch,
                                                 uint64_t offset, absl::string_view data,
                                                 uint32_t crc32c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  if (util::Crc32c(data.data(), data.size()) != crc32c) {
    return absl::DataLossError(absl::StrCat("crc32c mismatch in append to segment ", segment_id,
                                            " at ", offset));
  }
  if (offset > std::numeric_limits<uint64_t>::max() - data.size()) {
    return absl::OutOfRangeError("append offset overflows");
  }
  const uint64_t end = offset + data.size();
  ReplicaInfo info;
  {
    absl::MutexLock lock(&r->mu);
    RETURN_IF_ERROR(r->Usable());
    if (r->sealed) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " is sealed at ", r->length));
    }
    if (epoch < r->epoch) {
      return absl::FailedPreconditionError(absl::StrCat(
          "segment ", segment_id, " is fenced: epoch ", epoch, " < ", r->epoch));
    }
    if (offset != r->length) {
      if (end <= r->length) {
        // A resend (the writer lost our answer) is fine if it is the same bytes.
        ASSIGN_OR_RETURN(std::string old, PreadUpTo(r->fd, offset, data.size()));
        if (old == data) return r->Snapshot();
      }
      return absl::OutOfRangeError(absl::StrCat("append to segment ", segment_id, " at ", offset,
                                                " but its length is ", r->length));
    }
    if (data.empty()) return r->Snapshot();
    absl::Status status = PwriteAll(r->fd, data, offset);
    if (!status.ok()) {
      // Cut off whatever part of the write landed, so a retry starts clean.
      if (::ftruncate(r->fd, static_cast<off_t>(r->length)) != 0) {
        r->failure = absl::DataLossError(absl::StrCat(
            "segment ", segment_id, ": cannot roll back a failed write: ", std::strerror(errno)));
        LOG(ERROR) << r->failure;
      }
      return status;
    }
    r->length = end;
    info = r->Snapshot();
  }
  MarkDirty(segment_id);
  return info;
}

absl::StatusOr<ReplicaRead> ReplicaStore::Read(uint64_t segment_id, uint64_t offset,
                                               uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  ReplicaRead result;
  {
    absl::MutexLock lock(&r->mu);
    RETURN_IF_ERROR(r->Usable());
    result.length = r->length;
    result.sealed = r->sealed;
  }
  if (offset > result.length) {
    return absl::OutOfRangeError(absl::StrCat("read of segment ", segment_id, " at ", offset,
                                              " past its length ", result.length));
  }
  // Bytes below a length already seen never change (appends only extend, a
  // seal only cuts), so the pread needs no lock; a concurrent seal can only
  // make it shorter.
  uint64_t n = std::min({max_bytes, kReadBytesMax, result.length - offset});
  ASSIGN_OR_RETURN(result.data, PreadUpTo(r->fd, offset, static_cast<size_t>(n)));
  return result;
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Info(uint64_t segment_id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Usable());
  return r->Snapshot();
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Seal(uint64_t segment_id, uint64_t epoch,
                                               uint64_t length) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Usable());
  if (epoch < r->epoch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", segment_id, " is fenced: epoch ", epoch, " < ", r->epoch));
  }
  if (r->sealed) {
    if (length == r->length) return r->Snapshot();
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", segment_id, " is already sealed at ", r->length, ", not ", length));
  }
  if (length > r->length) {
    return absl::OutOfRangeError(absl::StrCat("seal of segment ", segment_id, " at ", length,
                                              " past its length ", r->length));
  }
  if (length < r->length) {
    if (::ftruncate(r->fd, static_cast<off_t>(length)) != 0) {
      return SyscallError(errno, absl::StrCat("ftruncate segment ", segment_id));
    }
    r->length = length;
    r->durable_length = std::min(r->durable_length, length);
  }
  fdatasync_count_.fetch_add(1);
  if (::fdatasync(r->fd) != 0) {
    r->failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", std::strerror(errno)));
    LOG(ERROR) << r->failure;
    return r->failure;
  }
  r->durable_length = length;
  RETURN_IF_ERROR(WriteFileAtomically(segments_dir_, absl::StrCat(segment_id, kStateFileSuffix),
                                      EncodeReplicaState(ReplicaState{epoch, true, length})));
  r->epoch = epoch;
  r->sealed = true;
  return r->Snapshot();
}

absl::Status ReplicaStore::Delete(uint64_t segment_id) {
  absl::MutexLock files_lock(&files_mu_);
  std::shared_ptr<Replica> r;
  {
    absl::MutexLock lock(&mu_);
    auto it = replicas_.find(segment_id);
    if (it == replicas_.end()) return absl::OkStatus();
    r = std::move(it->second);
    replicas_.erase(it);
    dirty_.erase(segment_id);
  }
  {
    absl::MutexLock lock(&r->mu);
    r->deleted = true;
  }
  // State first: a crash in between leaves an orphan data file, which the
  // next Open removes.
  for (const char* suffix : {kStateFileSuffix, kSegmentFileSuffix}) {
    std::string path = SegmentPath(segment_id, suffix);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return SyscallError(errno, absl::StrCat("unlink ", path));
    }
  }
  return SyncDir(segments_dir_);
}

int ReplicaStore::SyncDirty() {
  std::vector<std::shared_ptr<Replica>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.reserve(dirty_.size());
    for (uint64_t id : dirty_) {
      auto it = replicas_.find(id);
      if (it != replicas_.end()) batch.push_back(it->second);
    }
    dirty_.clear();
  }
  int syncs = 0;
  for (const auto& r : batch) syncs += SyncOne(*r) ? 1 : 0;
  return syncs;
}

bool ReplicaStore::SyncOne(Replica& r) {
  uint64_t target;
  {
    absl::MutexLock lock(&r.mu);
    if (!r.Usable().ok() || r.sealed) return false;
    target = r.length;
    if (target <= r.durable_length) return false;
  }
  int rc = ::fdatasync(r.fd);
  int error = errno;
  fdatasync_count_.fetch_add(1);
  absl::MutexLock lock(&r.mu);
  if (rc != 0) {
    // Never retried: after a failed fdatasync the kernel may have dropped
    // the dirty pages, and a later success would prove nothing.
    r.failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", r.segment_id, " failed: ", std::strerror(error)));
    LOG(ERROR) << r.failure;
    return true;
  }
  // A seal may have cut the file meanwhile; durable never exceeds length.
  r.durable_length = std::max(r.durable_length, std::min(target, r.length));
  return true;
}

std::vector<uint64_t> ReplicaStore::SegmentIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  ids.reserve(replicas_.size());
  for (const auto& [id, replica] : replicas_) ids.push_back(id);
  return ids;
}

uint64_t ReplicaStore::server_id() const {
  absl::MutexLock lock(&mu_);
  return server_id_;
}

absl::Status ReplicaStore::SetServerId(uint64_t server_id) {
  absl::MutexLock files_lock(&files_mu_);
  RETURN_IF_ERROR(WriteFileAtomically(data_dir_, kServerIdFileName, absl::StrCat(server_id, "\n")));
  absl::MutexLock lock(&mu_);
  server_id_ = server_id;
  return absl::OkStatus();
}

}  // namespace logfs::store
