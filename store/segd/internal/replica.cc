#include "store/segd/internal/replica.h"

#include <glog/logging.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/util/crc32c.h"
#include "store/format/chunk_crc.h"
#include "store/segd/replica_files.h"

namespace logfs::segd {

absl::Status ReplicaStore::Replica::Usable() const {
  if (deleted) return absl::NotFoundError(absl::StrCat("segment ", segment_id, " not found"));
  return failure;
}

absl::Status ReplicaStore::Replica::Servable() const {
  RETURN_IF_ERROR(Usable());
  return corruption;
}

absl::Status ReplicaStore::Replica::WriteAtEnd(absl::string_view data) {
  format::ChunkCrcUpdate update = format::ExtendChunkCrcs(length, tail_crc, data);
  // Only whole chunks' CRCs go to the file now; the partial last chunk's
  // stays in tail_crc until a seal writes it (an open replica's CRCs are
  // rebuilt from its data on restart anyway). Most small appends so cost
  // no write to the .crc file.
  if (!update.crcs.empty() && (length + data.size()) % format::kCrcChunkBytes != 0) {
    update.crcs.pop_back();
  }
  absl::Status status = file->WriteAt(length, data);
  if (status.ok() && !update.crcs.empty()) {
    status = format::WriteChunkCrcs(*crc_file, update.first_chunk, update.crcs);
  }
  if (!status.ok()) {
    // Cut off whatever part of the write landed, so a retry starts clean.
    RollBackTo(length, tail_crc);
    return status;
  }
  length += data.size();
  tail_crc = update.tail_crc;
  return absl::OkStatus();
}

void ReplicaStore::Replica::RollBackTo(uint64_t old_length, uint32_t old_tail_crc) {
  bool rolled_back =
      file->Truncate(old_length).ok() && crc_file->Truncate(format::CrcFileBytes(old_length)).ok();
  // The write may have replaced the CRC of the partial chunk it extended.
  if (rolled_back && old_length % format::kCrcChunkBytes != 0) {
    rolled_back =
        format::WriteChunkCrcs(*crc_file, old_length / format::kCrcChunkBytes, {old_tail_crc}).ok();
  }
  if (!rolled_back) {
    failure = absl::DataLossError(
        absl::StrCat("segment ", segment_id, ": cannot roll back a failed write"));
    LOG(ERROR) << failure;
  }
  length = std::min(length, old_length);
  tail_crc = old_tail_crc;
}

absl::Status ReplicaStore::Replica::WriteTailCrc() {
  if (length % format::kCrcChunkBytes == 0) return absl::OkStatus();
  return format::WriteChunkCrcs(*crc_file, length / format::kCrcChunkBytes, {tail_crc});
}

absl::Status ReplicaStore::Replica::CutTo(uint64_t new_length, uint64_t server_id) {
  const uint64_t chunk = new_length / format::kCrcChunkBytes;
  uint32_t new_tail_crc = 0;
  if (new_length % format::kCrcChunkBytes != 0) {
    const uint64_t start = format::ChunkStart(chunk);
    const uint64_t end = std::min(length, format::ChunkStart(chunk + 1));
    ASSIGN_OR_RETURN(std::string bytes,
                     env::ReadUpTo(*file, start, static_cast<size_t>(end - start)));
    uint32_t expected = tail_crc;
    if (end % format::kCrcChunkBytes == 0) {  // a full chunk: its CRC is in the file
      auto stored = format::ReadChunkCrcs(*crc_file, chunk, 1);
      if (!stored.ok()) return SetCorrupt(server_id, chunk);
      expected = (*stored)[0];
    }
    if (bytes.size() != end - start || util::Crc32c(bytes.data(), bytes.size()) != expected) {
      return SetCorrupt(server_id, chunk);
    }
    new_tail_crc = util::Crc32c(bytes.data(), static_cast<size_t>(new_length - start));
  }
  RETURN_IF_ERROR(file->Truncate(new_length));
  absl::Status status = crc_file->Truncate(format::CrcFileBytes(new_length));
  if (status.ok() && new_length % format::kCrcChunkBytes != 0) {
    status = format::WriteChunkCrcs(*crc_file, chunk, {new_tail_crc});
  }
  length = new_length;
  durable_length = std::min(durable_length, new_length);
  tail_crc = new_tail_crc;
  ++cuts;
  if (!status.ok()) {
    // The data file is cut but its CRCs are not: never serve it again.
    failure = absl::DataLossError(
        absl::StrCat("segment ", segment_id, ": cut data but not its CRCs: ", status.message()));
    LOG(ERROR) << failure;
    return failure;
  }
  return absl::OkStatus();
}

absl::Status ReplicaStore::Replica::SetCorrupt(uint64_t server_id, uint64_t chunk) {
  if (!corrupt) {
    corrupt = true;
    corruption = absl::DataLossError(absl::StrCat("replica ", server_id, " of segment ", segment_id,
                                                  " is corrupt at chunk ", chunk));
    LOG(ERROR) << corruption;
  }
  return corruption;
}

absl::Status ReplicaStore::Replica::SyncFiles() const {
  RETURN_IF_ERROR(file->Sync());
  return crc_file->Sync();
}

}  // namespace logfs::segd
