// ReplicaStore's write path: appends (replica file, then journal), seals,
// the sync round and the journal's checkpoint.
#include <glog/logging.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/util/crc32c.h"
#include "store/segd/internal/replica.h"
#include "store/segd/replica_files.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

absl::StatusOr<ReplicaInfo> ReplicaStore::Append(uint64_t segment_id, uint64_t epoch,
                                                 uint64_t offset, absl::string_view data,
                                                 uint32_t crc32c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
  if (util::Crc32c(data.data(), data.size()) != crc32c) {
    return absl::DataLossError(
        absl::StrCat("crc32c mismatch in append to segment ", segment_id, " at ", offset));
  }
  if (offset > std::numeric_limits<uint64_t>::max() - data.size()) {
    return absl::OutOfRangeError("append offset overflows");
  }
  const uint64_t end = offset + data.size();
  absl::MutexLock lock(&r->mu);
  RETURN_IF_ERROR(r->Servable());
  if (r->sealed || r->sealing) {
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", segment_id, r->sealed ? " is sealed at " : " is being sealed at ", r->length));
  }
  if (epoch < r->epoch) {
    return absl::FailedPreconditionError(
        absl::StrCat("segment ", segment_id, " is fenced: epoch ", epoch, " < ", r->epoch));
  }
  if (offset != r->length) {
    if (end <= r->length) {
      // A resend (the writer lost our answer) is fine if it is the same bytes.
      ASSIGN_OR_RETURN(std::string old, env::ReadUpTo(*r->file, offset, data.size()));
      if (old == data) return r->Snapshot();
    }
    return absl::OutOfRangeError(absl::StrCat("append to segment ", segment_id, " at ", offset,
                                              " but its length is ", r->length));
  }
  if (data.empty()) return r->Snapshot();
  RETURN_IF_ERROR(WriteAndJournal(r, offset, data));
  // Under the replica's lock, so a Delete (which marks it deleted under
  // that lock first) never sees it noted again afterwards.
  MarkDirty(r, end);
  return r->Snapshot();
}

absl::Status ReplicaStore::WriteAndJournal(const std::shared_ptr<Replica>& r, uint64_t offset,
                                           absl::string_view data) {
  r->mu.AssertHeld();
  const uint64_t old_length = r->length;
  const uint32_t old_tail_crc = r->tail_crc;
  RETURN_IF_ERROR(r->WriteAtEnd(data));
  // Written to the replica before it is journaled and noted for the next
  // checkpoint before that: a checkpoint (at a wrap) that overwrites this
  // record has synced these bytes in the replica.
  {
    absl::MutexLock lock(&checkpoint_mu_);
    unsynced_.emplace(r->segment_id, r);
  }
  if (absl::Status journaled = journal_->Add(r->segment_id, offset, data); !journaled.ok()) {
    r->RollBackTo(old_length, old_tail_crc);
    return journaled;
  }
  return absl::OkStatus();
}

void ReplicaStore::MarkDirty(const std::shared_ptr<Replica>& replica, uint64_t end) {
  absl::MutexLock lock(&mu_);
  Dirty& dirty = dirty_[replica->segment_id];
  if (dirty.replica != replica) dirty = Dirty{replica, 0};  // a new incarnation of the id
  dirty.end = std::max(dirty.end, end);
}

absl::StatusOr<ReplicaInfo> ReplicaStore::Seal(uint64_t segment_id, uint64_t epoch,
                                               uint64_t length) {
  // A Reopen replaces the replica's object while holding the old one's
  // seal_mu: a seal that waited for it must seal the new one.
  constexpr int kAttempts = 4;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    ASSIGN_OR_RETURN(std::shared_ptr<Replica> r, Find(segment_id));
    // One seal of this replica at a time; a second one waits, then finds
    // it sealed (or the first one's failure).
    absl::MutexLock seal_lock(&r->seal_mu);
    if (absl::StatusOr<std::shared_ptr<Replica>> now = Find(segment_id); now.ok() && *now != r) {
      continue;  // reopened meanwhile
    }
    return SealHeld(r, epoch, length);
  }
  return absl::UnavailableError(
      absl::StrCat("segment ", segment_id, " was reopened again and again during its seal"));
}

absl::StatusOr<ReplicaInfo> ReplicaStore::SealHeld(const std::shared_ptr<Replica>& r,
                                                   uint64_t epoch, uint64_t length) {
  r->seal_mu.AssertHeld();
  const uint64_t segment_id = r->segment_id;
  const uint64_t server = server_id();
  {
    absl::MutexLock lock(&r->mu);
    RETURN_IF_ERROR(r->Servable());
    if (epoch < r->epoch) {
      return absl::FailedPreconditionError(
          absl::StrCat("segment ", segment_id, " is fenced: epoch ", epoch, " < ", r->epoch));
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
      r->failure = absl::DataLossError(
          absl::StrCat("segment ", segment_id, ": cannot write its last CRC: ", tail.message()));
      LOG(ERROR) << r->failure;
      return r->failure;
    }
    // From here on appends are refused, and the files no longer change.
    r->sealing = true;
  }
  // The four fdatasyncs run without the replica's lock: on a slow disk
  // they take a while, and the sync thread's round (which takes every
  // dirty replica's lock) must not wait for them.
  fdatasync_count_.fetch_add(2);
  absl::Status persisted = r->SyncFiles();
  if (!persisted.ok()) {
    persisted = absl::DataLossError(
        absl::StrCat("fdatasync of segment ", segment_id, " failed: ", persisted.message()));
  } else {
    persisted = env::WriteFileAtomically(fs_, SegmentPath(segment_id, kStateFileSuffix),
                                         EncodeReplicaState(ReplicaState{epoch, true, length}));
  }
  absl::MutexLock lock(&r->mu);
  if (!persisted.ok()) {
    // `sealing` stays: the replica was cut, so appends at the cut stay
    // refused until a seal (a retry) succeeds.
    if (absl::IsDataLoss(persisted)) {
      // Never retried: after a failed fdatasync the kernel may have dropped
      // the dirty pages.
      if (r->failure.ok()) r->failure = persisted;
      LOG(ERROR) << persisted;
    }
    return persisted;
  }
  r->sealing = false;
  r->durable_length = std::max(r->durable_length, length);
  r->epoch = std::max(r->epoch, epoch);
  r->sealed = true;
  return r->Snapshot();
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

absl::Status ReplicaStore::Checkpoint() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<Replica>> batch;
  {
    absl::MutexLock lock(&checkpoint_mu_);
    batch.swap(unsynced_);
  }
  for (const auto& [id, r] : batch) {
    fdatasync_count_.fetch_add(2);
    if (absl::Status synced = r->SyncFiles(); !synced.ok()) {
      return absl::Status(synced.code(), absl::StrCat("fdatasync of segment ", id,
                                                      " at checkpoint: ", synced.message()));
    }
  }
  return absl::OkStatus();
}

uint64_t ReplicaStore::fdatasync_count() const {
  return fdatasync_count_.load() + (journal_ ? journal_->syncs() : 0);
}

uint64_t ReplicaStore::journal_wraps() const { return journal_ ? journal_->wraps() : 0; }

}  // namespace logfs::segd
