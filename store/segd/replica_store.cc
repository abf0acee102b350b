// ReplicaStore's namespace of replicas: open, create, delete, list, and the
// server id. Loading is in replica_store_load.cc, the write path in
// replica_store_write.cc, reads in replica_store_read.cc.
#include "store/segd/replica_store.h"

#include <glog/logging.h>

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/status_text.h"
#include "store/format/chunk_crc.h"
#include "store/segd/internal/replica.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {

// A maximal read starting on a chunk boundary ends on one: it verifies no
// chunk it does not return.
static_assert(format::kReadBytesMax % format::kCrcChunkBytes == 0, "reads end on chunk boundaries");

namespace {

absl::Status Unusable(const absl::Status& status) {
  return absl::FailedPreconditionError(absl::StrCat("data dir not usable: ", StatusText(status)));
}

constexpr env::WritableFileOptions kCreateNew{/*create=*/true, /*truncate=*/true};

}  // namespace

ReplicaStore::ReplicaStore(const ReplicaStoreOptions& options)
    : options_(options),
      fs_(*options.file_system),
      data_dir_(options.data_dir),
      segments_dir_(data_dir_ + "/" + kSegmentsDirName) {}

ReplicaStore::~ReplicaStore() = default;

absl::StatusOr<std::unique_ptr<ReplicaStore>> ReplicaStore::Open(
    const ReplicaStoreOptions& options) {
  std::unique_ptr<ReplicaStore> store(new ReplicaStore(options));
  absl::Status status = env::MakeDirs(store->fs_, store->segments_dir_);
  if (status.ok()) status = store->ProbeWritable();
  if (status.ok()) status = store->LoadAll();
  if (!status.ok()) return Unusable(status);
  return store;
}

absl::Status ReplicaStore::ProbeWritable() {
  const std::string probe = segments_dir_ + "/.probe";
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> file, fs_.NewWritableFile(probe, kCreateNew));
  file->Close().IgnoreError();      // nothing was written
  fs_.Remove(probe).IgnoreError();  // a leftover probe is harmless
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

absl::StatusOr<ReplicaInfo> ReplicaStore::Create(uint64_t segment_id, uint64_t epoch) {
  // Serializes creates and deletes of the namespace; their file I/O runs
  // under it because both are rare and must not interleave for one id.
  absl::MutexLock files_lock(&files_mu_);
  if (auto existing = Find(segment_id); existing.ok()) {
    Replica& r = **existing;
    // A seal in flight writes the state file too: after it, not with it.
    absl::MutexLock seal_lock(&r.seal_mu);
    absl::MutexLock lock(&r.mu);
    RETURN_IF_ERROR(r.Usable());
    if (epoch < r.epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " exists at epoch ", r.epoch, " > ", epoch));
    }
    if (epoch > r.epoch) {
      RETURN_IF_ERROR(env::WriteFileAtomically(
          fs_, SegmentPath(segment_id, kStateFileSuffix),
          EncodeReplicaState(ReplicaState{epoch, r.sealed, r.sealed ? r.length : 0})));
      r.epoch = epoch;
    }
    return r.Snapshot();
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> replica, CreateFiles(segment_id));
  // The state file is written last; its directory fsync also makes the data
  // and .crc files' entries durable. Until then a crash leaves orphans.
  absl::Status status = env::WriteFileAtomically(fs_, SegmentPath(segment_id, kStateFileSuffix),
                                                 EncodeReplicaState(ReplicaState{epoch, false, 0}));
  if (!status.ok()) {
    fs_.Remove(SegmentPath(segment_id, kSegmentFileSuffix)).IgnoreError();  // orphans at worst
    fs_.Remove(SegmentPath(segment_id, kCrcFileSuffix)).IgnoreError();
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

absl::StatusOr<ReplicaInfo> ReplicaStore::Reopen(uint64_t segment_id, uint64_t epoch,
                                                 uint64_t length) {
  // Serialized with creates and deletes of the id, and with its seals (a
  // seal writes the state file too); the I/O below runs under both, not
  // under the replica's own lock, which readers and the sync thread take.
  absl::MutexLock files_lock(&files_mu_);
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> sealed, Find(segment_id));
  absl::MutexLock seal_lock(&sealed->seal_mu);
  uint32_t tail_crc = 0;
  {
    absl::MutexLock lock(&sealed->mu);
    RETURN_IF_ERROR(sealed->Servable());
    if (!sealed->sealed) {
      if (sealed->epoch == epoch && sealed->length >= length) return sealed->Snapshot();  // a retry
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " is open at epoch ", sealed->epoch));
    }
    if (sealed->length != length) {
      return absl::FailedPreconditionError(absl::StrCat(
          "segment ", segment_id, " is sealed at ", sealed->length, ", not ", length));
    }
    if (epoch <= sealed->epoch) {
      return absl::FailedPreconditionError(absl::StrCat("segment ", segment_id, " is at epoch ",
                                                        sealed->epoch, ", not below ", epoch));
    }
    if (sealed->cuts > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " was cut at its seal: not reopened"));
    }
  }
  if (length % format::kCrcChunkBytes != 0) {
    // The last partial chunk's CRC, which appends go on from: a sealed
    // replica's .crc holds it (its seal wrote it).
    ASSIGN_OR_RETURN(std::vector<uint32_t> last,
                     format::ReadChunkCrcs(*sealed->crc_file, length / format::kCrcChunkBytes, 1));
    tail_crc = last[0];
  }
  const std::string crc_path = SegmentPath(segment_id, kCrcFileSuffix);
  ASSIGN_OR_RETURN(std::string crcs,
                   env::ReadUpTo(*sealed->crc_file, 0, format::CrcFileBytes(length)));
  if (crcs.size() != format::CrcFileBytes(length)) {
    return absl::DataLossError(absl::StrCat("segment ", segment_id, ": its .crc holds ",
                                            crcs.size(), " bytes, not ",
                                            format::CrcFileBytes(length)));
  }
  // Everything that can fail without changing anything first: the data
  // file's new descriptor, the .crc copy (through the descriptor the
  // replica keeps, which stays valid across the rename) and the state,
  // each synced. Then the renames, copy first (a crash between them
  // leaves the replica sealed, with the same CRCs), and one directory
  // sync for both.
  constexpr env::WritableFileOptions kExisting{/*create=*/false, /*truncate=*/false};
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> data,
                   fs_.NewWritableFile(SegmentPath(segment_id, kSegmentFileSuffix), kExisting));
  const std::string crc_tmp = crc_path + ".tmp";
  const std::string state_path = SegmentPath(segment_id, kStateFileSuffix);
  const std::string state_tmp = state_path + ".tmp";
  auto staged = [&]() -> absl::StatusOr<std::unique_ptr<env::WritableFile>> {
    ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> crc,
                     fs_.NewWritableFile(crc_tmp, kCreateNew));
    RETURN_IF_ERROR(crc->WriteAt(0, crcs));
    RETURN_IF_ERROR(crc->Sync());
    ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> state,
                     fs_.NewWritableFile(state_tmp, kCreateNew));
    RETURN_IF_ERROR(state->WriteAt(0, EncodeReplicaState(ReplicaState{epoch, false, 0})));
    RETURN_IF_ERROR(state->Sync());
    RETURN_IF_ERROR(state->Close());
    RETURN_IF_ERROR(fs_.Rename(crc_tmp, crc_path));
    RETURN_IF_ERROR(fs_.Rename(state_tmp, state_path));
    return crc;
  }();
  if (!staged.ok()) {
    fs_.Remove(crc_tmp).IgnoreError();  // stale .tmp files are removed at start anyway
    fs_.Remove(state_tmp).IgnoreError();
    return staged.status();
  }
  if (absl::Status synced = fs_.SyncDir(segments_dir_); !synced.ok()) {
    // The new state may or may not be on disk (open, or sealed): the
    // replica no longer knows which it is, so it serves nothing more;
    // meta drops it and copies the segment elsewhere.
    absl::MutexLock lock(&sealed->mu);
    if (sealed->failure.ok()) {
      sealed->failure = absl::DataLossError(absl::StrCat(
          "segment ", segment_id, ": directory sync of its reopen failed: ", synced.message()));
    }
    return sealed->failure;
  }
  std::unique_ptr<env::WritableFile> crc = std::move(*staged);
  // A new Replica (a new incarnation) for the new files; holders of the
  // sealed one keep its descriptors.
  auto reopened = std::make_shared<Replica>(segment_id, std::move(data), std::move(crc));
  ReplicaInfo info;
  {
    absl::MutexLock lock(&reopened->mu);
    reopened->epoch = epoch;
    reopened->length = length;
    reopened->durable_length = length;  // fdatasynced by its seal
    reopened->tail_crc = length % format::kCrcChunkBytes != 0 ? tail_crc : 0;
    info = reopened->Snapshot();
  }
  absl::MutexLock lock(&mu_);
  replicas_[segment_id] = std::move(reopened);
  return info;
}

absl::StatusOr<std::shared_ptr<ReplicaStore::Replica>> ReplicaStore::CreateFiles(
    uint64_t segment_id) {
  const std::string path = SegmentPath(segment_id, kSegmentFileSuffix);
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> file, fs_.NewWritableFile(path, kCreateNew));
  auto crc_file = fs_.NewWritableFile(SegmentPath(segment_id, kCrcFileSuffix), kCreateNew);
  if (!crc_file.ok()) {
    file.reset();
    fs_.Remove(path).IgnoreError();  // an orphan at worst, removed by the next Open
    return crc_file.status();
  }
  return std::make_shared<Replica>(segment_id, std::move(file), std::move(*crc_file));
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Info(uint64_t segment_id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Usable());
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
  const absl::Time now = absl::Now();
  for (const char* suffix : {kStateFileSuffix, kSegmentFileSuffix, kCrcFileSuffix}) {
    absl::StatusOr<env::FileAttributes> attributes = fs_.Stat(SegmentPath(segment_id, suffix));
    if (absl::IsNotFound(attributes.status())) continue;
    if (!attributes.ok()) return attributes.status();
    if (now - attributes->modified < absl::Milliseconds(idle_ms)) return false;
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
    // After a seal in flight, which could write the state file again.
    absl::MutexLock seal_lock(&r->seal_mu);
    absl::MutexLock lock(&r->mu);
    r->deleted = true;  // first: an append in flight cannot note it again
  }
  {
    absl::MutexLock lock(&checkpoint_mu_);
    unsynced_.erase(segment_id);  // its files close with the last holder
  }
  // State first: a crash in between leaves orphan data and .crc files,
  // which the next Open removes.
  for (const char* suffix : {kStateFileSuffix, kSegmentFileSuffix, kCrcFileSuffix}) {
    absl::Status removed = fs_.Remove(SegmentPath(segment_id, suffix));
    if (!removed.ok() && !absl::IsNotFound(removed)) return removed;
  }
  return fs_.SyncDir(segments_dir_);
}

std::vector<uint64_t> ReplicaStore::SegmentIds() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids;
  ids.reserve(replicas_.size());
  for (const auto& [id, replica] : replicas_) ids.push_back(id);
  return ids;
}

absl::Status ReplicaStore::Health() const {
  return journal_ != nullptr ? journal_->failure() : absl::OkStatus();
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
      env::WriteFileAtomically(fs_, absl::StrCat(data_dir_, "/", kServerIdFileName), contents));
  absl::MutexLock lock(&mu_);
  server_id_ = server_id;
  cluster_id_ = cluster_id;
  return absl::OkStatus();
}

}  // namespace logfs::segd
