// ReplicaStore's open: the server id, a scan of the segments dir that
// removes what a crash left half made, the journal replay, and the load of
// each replica (its length, CRCs and one fdatasync).
#include <glog/logging.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "store/format/chunk_crc.h"
#include "store/segd/internal/replica.h"
#include "store/segd/replica_files.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {
namespace {

bool ParseSegmentFileName(absl::string_view name, absl::string_view suffix, uint64_t* id) {
  if (!absl::EndsWith(name, suffix)) return false;
  name.remove_suffix(suffix.size());
  return absl::SimpleAtoi(name, id);
}

}  // namespace

absl::Status ReplicaStore::LoadAll() {
  RETURN_IF_ERROR(LoadServerId());
  ASSIGN_OR_RETURN(DirScan scan, ScanSegmentsDir());
  for (const std::string& name : scan.stale) {
    LOG(WARNING) << "removing stale " << segments_dir_ << "/" << name;
    fs_.Remove(segments_dir_ + "/" + name).IgnoreError();  // the next open tries again
  }
  if (!scan.stale.empty()) RETURN_IF_ERROR(fs_.SyncDir(segments_dir_));
  // Appends acknowledged from the journal alone go back into their
  // replicas before those are loaded (and fdatasynced) below.
  RETURN_IF_ERROR(OpenJournal());
  for (uint64_t id : scan.data_ids) {
    if (scan.state_ids.contains(id)) RETURN_IF_ERROR(LoadOne(id));
  }
  RETURN_IF_ERROR(journal_->Restart());
  // LoadOne creates the .crc files of replicas written before checksums.
  bool created = false;
  for (uint64_t id : scan.data_ids) {
    created |= scan.state_ids.contains(id) && !scan.crc_ids.contains(id);
  }
  if (created) RETURN_IF_ERROR(fs_.SyncDir(segments_dir_));
  return absl::OkStatus();
}

absl::Status ReplicaStore::LoadServerId() {
  auto id_text = env::ReadSmallFile(fs_, data_dir_ + "/" + kServerIdFileName, 64);
  if (absl::IsNotFound(id_text.status())) return absl::OkStatus();
  if (!id_text.ok()) return id_text.status();
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
  return absl::OkStatus();
}

absl::StatusOr<ReplicaStore::DirScan> ReplicaStore::ScanSegmentsDir() {
  ASSIGN_OR_RETURN(std::vector<std::string> names, fs_.ListDir(segments_dir_));
  DirScan scan;
  for (const std::string& name : names) {
    uint64_t id = 0;
    if (ParseSegmentFileName(name, kSegmentFileSuffix, &id)) {
      scan.data_ids.insert(id);
    } else if (ParseSegmentFileName(name, kStateFileSuffix, &id)) {
      scan.state_ids.insert(id);
    } else if (ParseSegmentFileName(name, kCrcFileSuffix, &id)) {
      scan.crc_ids.insert(id);
    } else if (absl::EndsWith(name, ".tmp")) {
      scan.stale.push_back(name);
    }
  }
  // A data file without a state file is a Create that crashed, and a state
  // file without a data file a Delete that crashed: neither was acked.
  for (uint64_t id : scan.data_ids) {
    if (!scan.state_ids.contains(id)) scan.stale.push_back(absl::StrCat(id, kSegmentFileSuffix));
  }
  for (uint64_t id : scan.state_ids) {
    if (!scan.data_ids.contains(id)) scan.stale.push_back(absl::StrCat(id, kStateFileSuffix));
  }
  for (uint64_t id : scan.crc_ids) {
    if (!scan.data_ids.contains(id) || !scan.state_ids.contains(id)) {
      scan.stale.push_back(absl::StrCat(id, kCrcFileSuffix));
    }
  }
  return scan;
}

absl::Status ReplicaStore::OpenJournal() {
  ReplayFiles replay_files;  // closed when replay is done
  JournalOptions options{data_dir_, options_.journal_bytes, options_.journal_preallocate};
  options.file_system = &fs_;
  ASSIGN_OR_RETURN(journal_, Journal::Open(options, [&](const JournalRecord& record) {
                     return ReplayRecord(record, &replay_files);
                   }));
  journal_->SetCheckpoint([this] { return Checkpoint(); });
  return absl::OkStatus();
}

absl::Status ReplicaStore::ReplayRecord(const JournalRecord& record, ReplayFiles* files) const {
  auto it = files->find(record.segment_id);
  if (it == files->end()) {
    std::unique_ptr<env::WritableFile> file;
    // Deleted segments have no state file; sealed ones were fdatasynced at
    // their final length by the seal, and must not grow back.
    auto text = env::ReadSmallFile(fs_, SegmentPath(record.segment_id, kStateFileSuffix),
                                   kStateFileBytesMax);
    if (text.ok()) {
      auto state = DecodeReplicaState(*text);
      if (state.ok() && !state->sealed) {
        auto opened = fs_.NewWritableFile(SegmentPath(record.segment_id, kSegmentFileSuffix),
                                          env::WritableFileOptions{});
        if (!opened.ok() && !absl::IsNotFound(opened.status())) return opened.status();
        if (opened.ok()) file = std::move(*opened);
      }
    } else if (!absl::IsNotFound(text.status())) {
      return text.status();
    }
    it = files->emplace(record.segment_id, std::move(file)).first;
  }
  env::WritableFile* file = it->second.get();
  if (file == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(uint64_t size, file->Size());
  if (record.offset > size) {
    // Records of one replica are journaled in order, so this cannot happen
    // unless the file was cut from outside; never leave a hole.
    LOG(ERROR) << "journal: segment " << record.segment_id << " has " << size
               << " bytes, record at " << record.offset << " skipped";
    return absl::OkStatus();
  }
  return file->WriteAt(record.offset, record.data);
}

absl::Status ReplicaStore::LoadOne(uint64_t segment_id) {
  const std::string state_path = SegmentPath(segment_id, kStateFileSuffix);
  ASSIGN_OR_RETURN(std::string text, env::ReadSmallFile(fs_, state_path, kStateFileBytesMax));
  auto state = DecodeReplicaState(text);
  if (!state.ok()) {
    return absl::DataLossError(absl::StrCat(state_path, ": ", state.status().message()));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<env::WritableFile> file,
      fs_.NewWritableFile(SegmentPath(segment_id, kSegmentFileSuffix), env::WritableFileOptions{}));
  const std::string crc_path = SegmentPath(segment_id, kCrcFileSuffix);
  auto crc_file = fs_.NewWritableFile(crc_path, env::WritableFileOptions{});
  const bool crc_file_existed = crc_file.ok();
  if (absl::IsNotFound(crc_file.status())) {
    crc_file = fs_.NewWritableFile(crc_path, env::WritableFileOptions{/*create=*/true});
  }
  if (!crc_file.ok()) return crc_file.status();
  auto replica = std::make_shared<Replica>(segment_id, std::move(file), std::move(*crc_file));
  ASSIGN_OR_RETURN(uint64_t size, replica->file->Size());
  absl::Status failure;
  absl::Status corruption;
  const uint32_t tail_crc =
      CheckLoadedReplica(*replica, size, *state, crc_file_existed, &failure, &corruption);
  // Bytes written before the restart may not have been synced; sync once so
  // that durable_length = length is true.
  if (absl::Status synced = failure.ok() ? replica->SyncFiles() : absl::OkStatus(); !synced.ok()) {
    failure = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", synced.message()));
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

uint32_t ReplicaStore::CheckLoadedReplica(Replica& replica, uint64_t size,
                                          const ReplicaState& state, bool crc_file_existed,
                                          absl::Status* failure, absl::Status* corruption) {
  const uint64_t segment_id = replica.segment_id;
  if (state.sealed && size != state.sealed_length) {
    // Seal truncates and syncs before it persists the state, so this is
    // damage from outside: never serve it.
    *failure = absl::DataLossError(absl::StrCat("segment ", segment_id, " is sealed at ",
                                                state.sealed_length, " but has ", size, " bytes"));
    LOG(ERROR) << *failure;
    return 0;
  }
  auto loaded = LoadChunkCrcs(replica, size, state.sealed, crc_file_existed);
  if (loaded.ok()) return *loaded;
  if (absl::IsDataLoss(loaded.status())) {
    *corruption = absl::DataLossError(absl::StrCat("replica ", server_id(), " of segment ",
                                                   segment_id, ": ", loaded.status().message()));
    LOG(ERROR) << *corruption;
  } else {
    *failure = loaded.status();
    LOG(ERROR) << "segment " << segment_id << ": " << *failure;
  }
  return 0;
}

absl::StatusOr<uint32_t> ReplicaStore::LoadChunkCrcs(Replica& replica, uint64_t length, bool sealed,
                                                     bool crc_file_existed) {
  if (sealed && crc_file_existed) {
    // Seal synced both files before it persisted sealed=1: they must agree.
    ASSIGN_OR_RETURN(uint64_t crc_bytes, replica.crc_file->Size());
    if (crc_bytes != format::CrcFileBytes(length)) {
      return absl::DataLossError(
          absl::StrCat("crc file has ", crc_bytes, " bytes for ", length, " bytes of data"));
    }
    if (length % format::kCrcChunkBytes == 0) return 0u;
    ASSIGN_OR_RETURN(std::vector<uint32_t> tail,
                     format::ReadChunkCrcs(*replica.crc_file, length / format::kCrcChunkBytes, 1));
    return tail[0];
  }
  // An open replica's bytes past its last sync may have reached the disk
  // without their CRCs or the reverse (the two files are written back
  // independently), so its CRCs are rebuilt from the data. Its final
  // content is decided by the writer's seal or meta's recovery. A replica
  // from before checksums (no .crc file) is adopted the same way.
  ASSIGN_OR_RETURN(format::RebuildResult rebuilt,
                   format::RebuildChunkCrcs(*replica.file, *replica.crc_file, length));
  if (rebuilt.chunks_changed > 0) {
    LOG(WARNING) << "segment " << replica.segment_id << ": rebuilt " << rebuilt.chunks_changed
                 << " chunk CRCs of "
                 << (crc_file_existed ? "an open replica" : "a replica without a .crc file");
  }
  return rebuilt.tail_crc;
}

}  // namespace logfs::segd
