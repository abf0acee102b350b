#include "store/format/chunk_crc.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/util/coding.h"
#include "src/util/crc32c.h"

namespace logfs::format {

ChunkCrcUpdate ExtendChunkCrcs(uint64_t length, uint32_t tail_crc, absl::string_view data) {
  ChunkCrcUpdate update;
  update.first_chunk = length / kCrcChunkBytes;
  uint64_t in_chunk = length % kCrcChunkBytes;
  uint32_t crc = in_chunk == 0 ? 0 : tail_crc;
  while (!data.empty()) {
    size_t piece = static_cast<size_t>(std::min<uint64_t>(kCrcChunkBytes - in_chunk, data.size()));
    crc = util::Crc32cExtend(crc, data.data(), piece);
    data.remove_prefix(piece);
    in_chunk += piece;
    update.crcs.push_back(crc);
    if (in_chunk == kCrcChunkBytes) {
      in_chunk = 0;
      crc = 0;
    }
  }
  update.tail_crc = in_chunk == 0 ? 0 : crc;
  return update;
}

std::vector<uint32_t> ComputeChunkCrcs(absl::string_view data) {
  return ExtendChunkCrcs(0, 0, data).crcs;
}

std::optional<uint64_t> FirstBadChunk(absl::string_view data, const std::vector<uint32_t>& crcs) {
  for (uint64_t chunk = 0; !data.empty(); ++chunk) {
    size_t piece = static_cast<size_t>(std::min<uint64_t>(kCrcChunkBytes, data.size()));
    if (chunk >= crcs.size() || util::Crc32c(data.data(), piece) != crcs[chunk]) return chunk;
    data.remove_prefix(piece);
  }
  return std::nullopt;
}

absl::Status WriteChunkCrcs(env::WritableFile& crc_file, uint64_t first_chunk,
                           const std::vector<uint32_t>& crcs) {
  if (crcs.empty()) return absl::OkStatus();
  std::string encoded(crcs.size() * kCrcBytes, '\0');
  for (size_t i = 0; i < crcs.size(); ++i) util::EncodeFixed32(&encoded[i * kCrcBytes], crcs[i]);
  return crc_file.WriteAt(first_chunk * kCrcBytes, encoded);
}

namespace {

absl::StatusOr<std::vector<uint32_t>> DecodeChunkCrcs(const std::string& encoded,
                                                      uint64_t first_chunk, uint64_t count) {
  if (encoded.size() != count * kCrcBytes) {
    return absl::DataLossError(absl::StrCat("crc file ends before chunk ",
                                            first_chunk + encoded.size() / kCrcBytes));
  }
  std::vector<uint32_t> crcs(count);
  for (uint64_t i = 0; i < count; ++i) crcs[i] = util::DecodeFixed32(&encoded[i * kCrcBytes]);
  return crcs;
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> ReadChunkCrcs(const env::RandomAccessFile& crc_file,
                                                    uint64_t first_chunk, uint64_t count) {
  ASSIGN_OR_RETURN(std::string encoded,
                   env::ReadUpTo(crc_file, first_chunk * kCrcBytes, count * kCrcBytes));
  return DecodeChunkCrcs(encoded, first_chunk, count);
}

absl::StatusOr<std::vector<uint32_t>> ReadChunkCrcs(int crc_fd, uint64_t first_chunk,
                                                    uint64_t count) {
  ASSIGN_OR_RETURN(std::string encoded,
                   env::PreadUpTo(crc_fd, first_chunk * kCrcBytes, count * kCrcBytes));
  return DecodeChunkCrcs(encoded, first_chunk, count);
}

namespace {

// Chunks recomputed per read in RebuildChunkCrcs (bounds its buffer).
constexpr uint64_t kRebuildChunksPerRead = 64;

// Returns how many of `fresh` differ from (or are missing in) the stored
// CRCs of chunks first_chunk, ...; rewrites those that differ.
absl::StatusOr<uint64_t> RewriteChangedCrcs(env::WritableFile& crc_file, uint64_t first_chunk,
                                            const std::vector<uint32_t>& fresh) {
  ASSIGN_OR_RETURN(std::string encoded,
                   env::ReadUpTo(crc_file, first_chunk * kCrcBytes, fresh.size() * kCrcBytes));
  uint64_t changed = 0;
  for (size_t i = 0; i < fresh.size(); ++i) {
    bool stored = (i + 1) * kCrcBytes <= encoded.size();
    if (stored && util::DecodeFixed32(&encoded[i * kCrcBytes]) == fresh[i]) continue;
    ++changed;
  }
  if (changed > 0) RETURN_IF_ERROR(WriteChunkCrcs(crc_file, first_chunk, fresh));
  return changed;
}

}  // namespace

absl::StatusOr<RebuildResult> RebuildChunkCrcs(const env::RandomAccessFile& data_file,
                                               env::WritableFile& crc_file, uint64_t length) {
  RebuildResult result;
  const uint64_t chunks = ChunkCount(length);
  for (uint64_t first = 0; first < chunks; first += kRebuildChunksPerRead) {
    uint64_t from = ChunkStart(first);
    uint64_t to = std::min(length, ChunkStart(first + kRebuildChunksPerRead));
    ASSIGN_OR_RETURN(std::string data,
                     env::ReadUpTo(data_file, from, static_cast<size_t>(to - from)));
    if (data.size() != to - from) {
      return absl::DataLossError(absl::StrCat("data file ends at ", from + data.size(),
                                              " before its length ", length));
    }
    ChunkCrcUpdate update = ExtendChunkCrcs(0, 0, data);
    ASSIGN_OR_RETURN(uint64_t changed, RewriteChangedCrcs(crc_file, first, update.crcs));
    result.chunks_changed += changed;
    if (to == length) result.tail_crc = update.tail_crc;
  }
  RETURN_IF_ERROR(crc_file.Truncate(CrcFileBytes(length)));
  return result;
}

}  // namespace logfs::format
