// ReplicaStore's read path: reads verified chunk by chunk against the .crc
// file, and read-only descriptors of sealed replicas for short-circuit
// readers.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/chunk_crc.h"
#include "store/segd/internal/replica.h"
#include "store/segd/replica_store.h"

namespace logfs::segd {

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
  // (appends only extend, a seal only cuts), so the reads need no lock; a
  // concurrent seal is told apart from damage by `cuts`. The last partial
  // chunk's CRC is the one taken with the snapshot: the file's may already
  // cover later appends.
  const uint64_t first_chunk = begin / format::kCrcChunkBytes;
  const uint64_t chunk_count = format::ChunkCount(end) - first_chunk;
  const uint64_t from = format::ChunkStart(first_chunk);
  const uint64_t to = std::min(snapshot.length, format::ChunkStart(first_chunk + chunk_count));
  const bool ends_in_tail = to == snapshot.length && to % format::kCrcChunkBytes != 0;
  ASSIGN_OR_RETURN(std::string data, env::ReadUpTo(*r.file, from, static_cast<size_t>(to - from)));
  auto crcs = format::ReadChunkCrcs(*r.crc_file, first_chunk, chunk_count - (ends_in_tail ? 1 : 0));
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
    return absl::UnavailableError(
        absl::StrCat("segment ", r.segment_id, " was cut by a seal during the read; retry"));
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
  // New read-only descriptors of the very files this replica has open,
  // whatever their paths are now.
  format::ReplicaFds files;
  ASSIGN_OR_RETURN(files.data, r->file->ReopenReadOnlyFd());
  ASSIGN_OR_RETURN(files.crc, r->crc_file->ReopenReadOnlyFd());
  files.length = r->length;
  return files;
}

}  // namespace logfs::segd
