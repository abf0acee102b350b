#include "store/segd/replica_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"
#include "src/util/crc32c.h"
#include "store/format/chunk_crc.h"
#include "store/segd/internal/replica.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {

// A maximal read starting on a chunk boundary ends on one: it verifies no
// chunk it does not return.
static_assert(format::kReadBytesMax % format::kCrcChunkBytes == 0, "reads end on chunk boundaries");

namespace {

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

ReplicaStore::ReplicaStore(const ReplicaStoreOptions& options)
    : options_(options),
      data_dir_(options.data_dir),
      segments_dir_(data_dir_ + "/" + kSegmentsDirName) {}

ReplicaStore::~ReplicaStore() = default;

absl::StatusOr<std::unique_ptr<ReplicaStore>> ReplicaStore::Open(
    const ReplicaStoreOptions& options) {
  std::unique_ptr<ReplicaStore> store(new ReplicaStore(options));
  absl::Status status = env::MakeDirs(store->segments_dir_);
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
  auto id_text = env::ReadSmallFile(data_dir_ + "/" + kServerIdFileName, 64);
  if (id_text.ok()) {
    // "SERVER_ID CLUSTER_ID\n"; files written before cluster ids: "SERVER_ID\n".
    std::vector<absl::string_view> fields =
        absl::StrSplit(*id_text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
    uint64_t id = 0;
    uint64_t cluster = 0;
    if (fields.empty() || fields.size() > 2 || !absl::SimpleAtoi(fields[0], &id) ||
        (fields.size() == 2 && !absl::SimpleAtoi(fields[1], &cluster))) {
      return absl::DataLossError(absl::StrCat("bad ", kServerIdFileName, " file"));
    }
    absl::MutexLock lock(&mu_);
    server_id_ = id;
    cluster_id_ = cluster;
  } else if (!absl::IsNotFound(id_text.status())) {
    return id_text.status();
  }

  DIR* dir = ::opendir(segments_dir_.c_str());
  if (dir == nullptr) return SyscallError(errno, absl::StrCat("opendir ", segments_dir_));
  absl::flat_hash_set<uint64_t> data_ids, state_ids, crc_ids;
  std::vector<std::string> stale;
  while (struct dirent* entry = ::readdir(dir)) {
    absl::string_view name = entry->d_name;
    uint64_t id = 0;
    if (ParseSegmentFileName(name, kSegmentFileSuffix, &id)) {
      data_ids.insert(id);
    } else if (ParseSegmentFileName(name, kStateFileSuffix, &id)) {
      state_ids.insert(id);
    } else if (ParseSegmentFileName(name, kCrcFileSuffix, &id)) {
      crc_ids.insert(id);
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
  for (uint64_t id : crc_ids) {
    if (!data_ids.contains(id) || !state_ids.contains(id)) {
      stale.push_back(absl::StrCat(id, kCrcFileSuffix));
    }
  }
  for (const std::string& name : stale) {
    LOG(WARNING) << "removing stale " << segments_dir_ << "/" << name;
    ::unlink((segments_dir_ + "/" + name).c_str());
  }
  if (!stale.empty()) RETURN_IF_ERROR(env::SyncDir(segments_dir_));
  // Appends acknowledged from the journal alone go back into their
  // replicas before those are loaded (and fdatasynced) below.
  absl::flat_hash_map<uint64_t, int> replay_fds;
  auto journal = Journal::Open(
      JournalOptions{data_dir_, options_.journal_bytes, options_.journal_preallocate},
      [&](const JournalRecord& record) { return ReplayRecord(record, &replay_fds); });
  for (const auto& [id, fd] : replay_fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!journal.ok()) return journal.status();
  journal_ = std::move(*journal);
  journal_->SetCheckpoint([this] { return Checkpoint(); });
  for (uint64_t id : data_ids) {
    if (state_ids.contains(id)) RETURN_IF_ERROR(LoadOne(id));
  }
  RETURN_IF_ERROR(journal_->Restart());
  // LoadOne creates the .crc files of replicas written before checksums.
  bool created = false;
  for (uint64_t id : data_ids) created |= state_ids.contains(id) && !crc_ids.contains(id);
  if (created) RETURN_IF_ERROR(env::SyncDir(segments_dir_));
  return absl::OkStatus();
}

absl::Status ReplicaStore::ReplayRecord(const JournalRecord& record,
                                        absl::flat_hash_map<uint64_t, int>* fds) const {
  auto it = fds->find(record.segment_id);
  if (it == fds->end()) {
    int fd = -1;
    // Deleted segments have no state file; sealed ones were fdatasynced at
    // their final length by the seal, and must not grow back.
    auto text =
        env::ReadSmallFile(SegmentPath(record.segment_id, kStateFileSuffix), kStateFileBytesMax);
    if (text.ok()) {
      auto state = DecodeReplicaState(*text);
      if (state.ok() && !state->sealed) {
        const std::string path = SegmentPath(record.segment_id, kSegmentFileSuffix);
        fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT) return SyscallError(errno, absl::StrCat("open ", path));
      }
    } else if (!absl::IsNotFound(text.status())) {
      return text.status();
    }
    it = fds->emplace(record.segment_id, fd).first;
  }
  if (it->second < 0) return absl::OkStatus();
  struct stat st;
  if (::fstat(it->second, &st) != 0) return SyscallError(errno, "fstat replica");
  if (record.offset > static_cast<uint64_t>(st.st_size)) {
    // Records of one replica are journaled in order, so this cannot happen
    // unless the file was cut from outside; never leave a hole.
    LOG(ERROR) << "journal: segment " << record.segment_id << " has " << st.st_size
               << " bytes, record at " << record.offset << " skipped";
    return absl::OkStatus();
  }
  return env::PwriteAll(it->second, record.data, record.offset);
}

absl::Status ReplicaStore::Checkpoint() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<Replica>> batch;
  {
    absl::MutexLock lock(&checkpoint_mu_);
    batch.swap(unsynced_);
  }
  for (const auto& [id, r] : batch) {
    fdatasync_count_.fetch_add(2);
    if (int error = r->SyncFiles(); error != 0) {
      return SyscallError(error, absl::StrCat("fdatasync of segment ", id, " at checkpoint"));
    }
  }
  return absl::OkStatus();
}

uint64_t ReplicaStore::fdatasync_count() const {
  return fdatasync_count_.load() + (journal_ ? journal_->syncs() : 0);
}

uint64_t ReplicaStore::journal_wraps() const { return journal_ ? journal_->wraps() : 0; }

absl::Status ReplicaStore::LoadOne(uint64_t segment_id) {
  const std::string state_path = SegmentPath(segment_id, kStateFileSuffix);
  ASSIGN_OR_RETURN(std::string text, env::ReadSmallFile(state_path, kStateFileBytesMax));
  auto state = DecodeReplicaState(text);
  if (!state.ok()) return absl::DataLossError(absl::StrCat(state_path, ": ", state.status().message()));
  const std::string path = SegmentPath(segment_id, kSegmentFileSuffix);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
  const std::string crc_path = SegmentPath(segment_id, kCrcFileSuffix);
  int crc_fd = ::open(crc_path.c_str(), O_RDWR | O_CLOEXEC);
  const bool crc_file_existed = crc_fd >= 0;
  if (!crc_file_existed && errno == ENOENT) {
    crc_fd = ::open(crc_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  }
  if (crc_fd < 0) {
    absl::Status error = SyscallError(errno, absl::StrCat("open ", crc_path));
    ::close(fd);
    return error;
  }
  auto replica = std::make_shared<Replica>(segment_id, fd, crc_fd);
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
  uint32_t tail_crc = 0;
  absl::Status corruption;
  if (failure.ok()) {
    auto loaded = LoadChunkCrcs(segment_id, fd, crc_fd, size, state->sealed, crc_file_existed);
    if (loaded.ok()) {
      tail_crc = *loaded;
    } else if (absl::IsDataLoss(loaded.status())) {
      corruption = absl::DataLossError(absl::StrCat("replica ", server_id(), " of segment ",
                                                    segment_id, ": ", loaded.status().message()));
      LOG(ERROR) << corruption;
    } else {
      failure = loaded.status();
      LOG(ERROR) << "segment " << segment_id << ": " << failure;
    }
  }
  // Bytes written before the restart may not have been synced; sync once so
  // that durable_length = length is true.
  if (int error = failure.ok() ? replica->SyncFiles() : 0; error != 0) {
    failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", std::strerror(error)));
    LOG(ERROR) << failure;
  }
  fdatasync_count_.fetch_add(2);
  {
    absl::MutexLock lock(&replica->mu);
    replica->epoch = state->epoch;
    replica->sealed = state->sealed;
    replica->length = size;
    replica->durable_length = size;
    replica->failure = failure;
    replica->tail_crc = tail_crc;
    replica->corrupt = !corruption.ok();
    replica->corruption = corruption;
  }
  absl::MutexLock lock(&mu_);
  replicas_[segment_id] = std::move(replica);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> ReplicaStore::LoadChunkCrcs(uint64_t segment_id, int data_fd,
                                                     int crc_fd, uint64_t length, bool sealed,
                                                     bool crc_file_existed) {
  if (sealed && crc_file_existed) {
    // Seal synced both files before it persisted sealed=1: they must agree.
    struct stat st;
    if (::fstat(crc_fd, &st) != 0) return SyscallError(errno, "fstat crc file");
    if (static_cast<uint64_t>(st.st_size) != format::CrcFileBytes(length)) {
      return absl::DataLossError(absl::StrCat("crc file has ", st.st_size, " bytes for ", length,
                                              " bytes of data"));
    }
    if (length % format::kCrcChunkBytes == 0) return 0u;
    ASSIGN_OR_RETURN(std::vector<uint32_t> tail,
                     format::ReadChunkCrcs(crc_fd, length / format::kCrcChunkBytes, 1));
    return tail[0];
  }
  // An open replica's bytes past its last sync may have reached the disk
  // without their CRCs or the reverse (the two files are written back
  // independently), so its CRCs are rebuilt from the data. Its final
  // content is decided by the writer's seal or meta's recovery. A replica
  // from before checksums (no .crc file) is adopted the same way.
  ASSIGN_OR_RETURN(format::RebuildResult rebuilt,
                   format::RebuildChunkCrcs(data_fd, crc_fd, length));
  if (rebuilt.chunks_changed > 0) {
    LOG(WARNING) << "segment " << segment_id << ": rebuilt " << rebuilt.chunks_changed
                 << " chunk CRCs of " << (crc_file_existed ? "an open replica" : "a replica without a .crc file");
  }
  return rebuilt.tail_crc;
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

void ReplicaStore::MarkDirty(const std::shared_ptr<Replica>& replica, uint64_t end) {
  absl::MutexLock lock(&mu_);
  Dirty& dirty = dirty_[replica->segment_id];
  if (dirty.replica != replica) dirty = Dirty{replica, 0};  // a new incarnation of the id
  dirty.end = std::max(dirty.end, end);
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
      RETURN_IF_ERROR(env::WriteFileAtomically(
          SegmentPath(segment_id, kStateFileSuffix),
          EncodeReplicaState(ReplicaState{epoch, r.sealed, r.sealed ? r.length : 0})));
      r.epoch = epoch;
    }
    return r.Snapshot();
  }
  const std::string path = SegmentPath(segment_id, kSegmentFileSuffix);
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("create ", path));
  const std::string crc_path = SegmentPath(segment_id, kCrcFileSuffix);
  int crc_fd = ::open(crc_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (crc_fd < 0) {
    absl::Status error = SyscallError(errno, absl::StrCat("create ", crc_path));
    ::close(fd);
    ::unlink(path.c_str());
    return error;
  }
  auto replica = std::make_shared<Replica>(segment_id, fd, crc_fd);
  // The state file is written last; its directory fsync also makes the data
  // and .crc files' entries durable. Until then a crash leaves orphans.
  absl::Status status = env::WriteFileAtomically(
      SegmentPath(segment_id, kStateFileSuffix), EncodeReplicaState(ReplicaState{epoch, false, 0}));
  if (!status.ok()) {
    ::unlink(path.c_str());
    ::unlink(crc_path.c_str());
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
    RETURN_IF_ERROR(r->Servable());
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
        ASSIGN_OR_RETURN(std::string old, env::PreadUpTo(r->fd, offset, data.size()));
        if (old == data) return r->Snapshot();
      }
      return absl::OutOfRangeError(absl::StrCat("append to segment ", segment_id, " at ", offset,
                                                " but its length is ", r->length));
    }
    if (data.empty()) return r->Snapshot();
    const uint64_t old_length = r->length;
    const uint32_t old_tail_crc = r->tail_crc;
    RETURN_IF_ERROR(r->WriteAtEnd(data));
    // Written to the replica before it is journaled and noted for the next
    // checkpoint before that: a checkpoint (at a wrap) that overwrites this
    // record has synced these bytes in the replica.
    {
      absl::MutexLock lock(&checkpoint_mu_);
      unsynced_.emplace(segment_id, r);
    }
    if (absl::Status journaled = journal_->Add(segment_id, offset, data); !journaled.ok()) {
      r->RollBackTo(old_length, old_tail_crc);
      return journaled;
    }
    // Under the replica's lock, so a Delete (which marks it deleted under
    // that lock first) never sees it noted again afterwards.
    MarkDirty(r, end);
    info = r->Snapshot();
  }
  return info;
}

absl::StatusOr<ReplicaRead> ReplicaStore::Read(uint64_t segment_id, uint64_t offset,
                                               uint64_t max_bytes) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  ReadSnapshot snapshot;
  {
    absl::MutexLock lock(&r->mu);
    RETURN_IF_ERROR(r->Servable());
    snapshot = ReadSnapshot{r->length, r->sealed, r->tail_crc, r->cuts};
  }
  if (offset > snapshot.length) {
    return absl::OutOfRangeError(absl::StrCat("read of segment ", segment_id, " at ", offset,
                                              " past its length ", snapshot.length));
  }
  ReplicaRead result;
  result.length = snapshot.length;
  result.sealed = snapshot.sealed;
  uint64_t n = std::min({max_bytes, format::kReadBytesMax, snapshot.length - offset});
  if (n == 0) return result;
  ASSIGN_OR_RETURN(std::string chunks, ReadVerifiedChunks(*r, snapshot, offset, offset + n));
  result.data =
      chunks.substr(static_cast<size_t>(offset % format::kCrcChunkBytes), static_cast<size_t>(n));
  return result;
}

absl::StatusOr<std::string> ReplicaStore::ReadVerifiedChunks(Replica& r,
                                                             const ReadSnapshot& snapshot,
                                                             uint64_t begin, uint64_t end) {
  // Bytes and full-chunk CRCs below a length already seen never change
  // (appends only extend, a seal only cuts), so the preads need no lock; a
  // concurrent seal is told apart from damage by `cuts`. The last partial
  // chunk's CRC is the one taken with the snapshot: the file's may already
  // cover later appends.
  const uint64_t first_chunk = begin / format::kCrcChunkBytes;
  const uint64_t chunk_count = format::ChunkCount(end) - first_chunk;
  const uint64_t from = format::ChunkStart(first_chunk);
  const uint64_t to = std::min(snapshot.length, format::ChunkStart(first_chunk + chunk_count));
  const bool ends_in_tail = to == snapshot.length && to % format::kCrcChunkBytes != 0;
  ASSIGN_OR_RETURN(std::string data, env::PreadUpTo(r.fd, from, static_cast<size_t>(to - from)));
  auto crcs = format::ReadChunkCrcs(r.crc_fd, first_chunk, chunk_count - (ends_in_tail ? 1 : 0));
  if (!crcs.ok() && !absl::IsDataLoss(crcs.status())) return crcs.status();
  if (crcs.ok() && ends_in_tail) crcs->push_back(snapshot.tail_crc);
  std::optional<uint64_t> bad_chunk;
  if (!crcs.ok()) {
    bad_chunk = first_chunk;  // the .crc file was cut short
  } else if (data.size() != to - from) {
    bad_chunk = first_chunk + data.size() / format::kCrcChunkBytes;  // data file cut short
  } else if (auto bad = format::FirstBadChunk(data, *crcs); bad.has_value()) {
    bad_chunk = first_chunk + *bad;
  }
  if (bad_chunk.has_value()) return MarkCorrupt(r, snapshot.cuts, *bad_chunk);
  return data;
}

absl::Status ReplicaStore::MarkCorrupt(Replica& r, uint64_t cuts_seen, uint64_t chunk) {
  const uint64_t server = server_id();
  absl::MutexLock lock(&r.mu);
  if (r.cuts != cuts_seen) {
    return absl::UnavailableError(absl::StrCat("segment ", r.segment_id,
                                               " was cut by a seal during the read; retry"));
  }
  return r.SetCorrupt(server, chunk);
}

absl::StatusOr<format::ReplicaFds> ReplicaStore::OpenReadOnly(uint64_t segment_id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Servable());
  if (!r->sealed) {
    return absl::FailedPreconditionError(absl::StrCat("segment ", segment_id, " is not sealed"));
  }
  // Reopened through /proc so the new descriptors are read-only and refer
  // to the very files this replica has open, whatever their path now.
  auto reopen = [](int fd) {
    return util::UniqueFd(::open(absl::StrCat("/proc/self/fd/", fd).c_str(),
                                 O_RDONLY | O_CLOEXEC));
  };
  format::ReplicaFds files;
  files.data = reopen(r->fd);
  if (!files.data.valid()) return SyscallError(errno, "reopen replica read-only");
  files.crc = reopen(r->crc_fd);
  if (!files.crc.valid()) return SyscallError(errno, "reopen replica crc file read-only");
  files.length = r->length;
  return files;
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
  const uint64_t server = server_id();
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Servable());
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
  if (length < r->length) RETURN_IF_ERROR(r->CutTo(length, server));
  // A sealed replica's .crc file covers every byte (LoadChunkCrcs, and
  // short-circuit readers, rely on it).
  if (absl::Status tail = r->WriteTailCrc(); !tail.ok()) {
    r->failure = absl::DataLossError(absl::StrCat("segment ", segment_id,
                                                  ": cannot write its last CRC: ", tail.message()));
    LOG(ERROR) << r->failure;
    return r->failure;
  }
  fdatasync_count_.fetch_add(2);
  if (int error = r->SyncFiles(); error != 0) {
    r->failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", std::strerror(error)));
    LOG(ERROR) << r->failure;
    return r->failure;
  }
  r->durable_length = length;
  RETURN_IF_ERROR(env::WriteFileAtomically(SegmentPath(segment_id, kStateFileSuffix),
                                           EncodeReplicaState(ReplicaState{epoch, true, length})));
  r->epoch = epoch;
  r->sealed = true;
  return r->Snapshot();
}

absl::Status ReplicaStore::Delete(uint64_t segment_id) {
  absl::MutexLock files_lock(&files_mu_);
  return DeleteLocked(segment_id);
}

absl::StatusOr<bool> ReplicaStore::DeleteIfIdle(uint64_t segment_id, int64_t idle_ms) {
  // Under files_mu_, so no Create (of a copy starting over) runs between
  // the check and the unlinks.
  absl::MutexLock files_lock(&files_mu_);
  if (!Find(segment_id).ok()) return false;
  struct timespec now;
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t now_ms = now.tv_sec * 1000 + now.tv_nsec / 1000000;
  for (const char* suffix : {kStateFileSuffix, kSegmentFileSuffix, kCrcFileSuffix}) {
    const std::string path = SegmentPath(segment_id, suffix);
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      return SyscallError(errno, absl::StrCat("stat ", path));
    }
    const int64_t mtime_ms = st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    if (now_ms - mtime_ms < idle_ms) return false;
  }
  RETURN_IF_ERROR(DeleteLocked(segment_id));
  return true;
}

std::vector<ReplicaInfo> ReplicaStore::ListReplicas() const {
  std::vector<std::shared_ptr<Replica>> replicas;
  {
    absl::MutexLock lock(&mu_);
    replicas.reserve(replicas_.size());
    for (const auto& [id, replica] : replicas_) replicas.push_back(replica);
  }
  std::vector<ReplicaInfo> out;
  out.reserve(replicas.size());
  for (const auto& r : replicas) {
    absl::MutexLock lock(&r->mu);
    if (r->deleted) continue;
    ReplicaInfo info = r->Snapshot();
    info.corrupt = info.corrupt || !r->failure.ok();
    out.push_back(info);
  }
  return out;
}

absl::Status ReplicaStore::DeleteLocked(uint64_t segment_id) {
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
    r->deleted = true;  // first: an append in flight cannot note it again
  }
  {
    absl::MutexLock lock(&checkpoint_mu_);
    unsynced_.erase(segment_id);  // its descriptors close with the last holder
  }
  // State first: a crash in between leaves orphan data and .crc files,
  // which the next Open removes.
  for (const char* suffix : {kStateFileSuffix, kSegmentFileSuffix, kCrcFileSuffix}) {
    std::string path = SegmentPath(segment_id, suffix);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return SyscallError(errno, absl::StrCat("unlink ", path));
    }
  }
  return env::SyncDir(segments_dir_);
}

int ReplicaStore::SyncDirty() {
  absl::flat_hash_map<uint64_t, Dirty> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(dirty_);
  }
  if (batch.empty()) return 0;
  // Every append in the batch was journaled before it was noted in dirty_.
  absl::Status synced = journal_->Sync();
  for (const auto& [id, dirty] : batch) {
    Replica& r = *dirty.replica;
    absl::MutexLock lock(&r.mu);
    if (r.deleted) continue;
    if (!synced.ok()) {
      // Never retried: after a failed fdatasync the kernel may have dropped
      // the dirty pages, and a later success would prove nothing.
      if (r.failure.ok()) r.failure = synced;
      continue;
    }
    // A seal may have cut the file meanwhile; durable never exceeds length.
    r.durable_length = std::max(r.durable_length, std::min(dirty.end, r.length));
  }
  return 1;
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

uint64_t ReplicaStore::cluster_id() const {
  absl::MutexLock lock(&mu_);
  return cluster_id_;
}

absl::Status ReplicaStore::SetServerId(uint64_t server_id, uint64_t cluster_id) {
  absl::MutexLock files_lock(&files_mu_);
  std::string contents = cluster_id == 0 ? absl::StrCat(server_id, "\n")
                                         : absl::StrCat(server_id, " ", cluster_id, "\n");
  RETURN_IF_ERROR(
      env::WriteFileAtomically(absl::StrCat(data_dir_, "/", kServerIdFileName), contents));
  absl::MutexLock lock(&mu_);
  server_id_ = server_id;
  cluster_id_ = cluster_id;
  return absl::OkStatus();
}

}  // namespace logfs::segd
