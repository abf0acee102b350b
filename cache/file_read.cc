#include "cache/file_read.h"

#include <glog/logging.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/status/macros.h"
#include "store/format/limits.h"

namespace logfs::cache {

void ReadBuffer::AppendBlock(BlockHandle block, size_t offset, size_t length) {
  if (length == 0) return;
  block->AppendIov(offset, length, &iov_);
  pins_.push_back(std::move(block));
  size_ += length;
}

void ReadBuffer::AppendOwned(std::string data) {
  if (data.empty()) return;
  owned_.push_back(std::move(data));
  iov_.push_back({owned_.back().data(), owned_.back().size()});
  size_ += owned_.back().size();
}

std::string ReadBuffer::ToString() const {
  std::string out;
  out.reserve(size_);
  for (const iovec& v : iov_) out.append(static_cast<const char*>(v.iov_base), v.iov_len);
  return out;
}

namespace {

// Bytes [from, to) of sealed `segment` through the cache. Runs of missing
// blocks are read in one call (at most kReadBytesMax each) and split into
// blocks.
absl::Status ReadSealedSegment(BlockCache& cache, SegmentReader& reader,
                               const proto::Segment& segment, uint64_t from, uint64_t to,
                               const client::BadReplicaReporter& reporter, ReadMode mode,
                               ReadBuffer* out) {
  const uint64_t block_bytes = cache.block_bytes();
  const uint64_t first = from / block_bytes, last = (to - 1) / block_bytes;
  const uint64_t max_run = std::max<uint64_t>(1, format::kReadBytesMax / block_bytes);
  // A block holds min(block_bytes, what the segment has from its start).
  auto expected_size = [&](uint64_t b) {
    return std::min(block_bytes, segment.length() - b * block_bytes);
  };
  std::vector<BlockHandle> blocks(last - first + 1);
  // A segment's last block may have been cached while the segment was
  // shorter: a WAL file's last segment is continued when the file is
  // reopened for append, and sealed again longer. Its bytes never change,
  // only grow: a cached block longer than this view's serves it as is; a
  // shorter one is read again and replaces it.
  std::vector<bool> grown(last - first + 1, false);
  for (uint64_t b = first; b <= last; ++b) {
    BlockHandle cached = cache.Lookup({segment.id(), b});
    if (cached != nullptr && cached->size() < expected_size(b)) {
      cached = nullptr;
      grown[b - first] = true;
    }
    blocks[b - first] = std::move(cached);
  }
  for (uint64_t b = first; b <= last;) {
    if (blocks[b - first] != nullptr) {
      ++b;
      continue;
    }
    uint64_t run_end = b;  // last missing block of this run
    while (run_end < last && run_end + 1 - b < max_run && blocks[run_end + 1 - first] == nullptr) {
      ++run_end;
    }
    const uint64_t start = b * block_bytes;
    const uint64_t end = std::min(segment.length(), (run_end + 1) * block_bytes);
    // From a mapped local replica, a view: its bytes are copied once, into
    // the blocks.
    auto data = reader.ReadBytes(segment, start, end - start, reporter, mode);
    if (!data.ok()) return data.status();
    for (uint64_t m = b; m <= run_end; ++m) {
      const uint64_t at = (m - b) * block_bytes;
      const absl::string_view bytes =
          data->view().substr(at, std::min(block_bytes, end - start - at));
      BlockHandle block = grown[m - first] ? cache.Replace({segment.id(), m}, bytes)
                                           : cache.Insert({segment.id(), m}, bytes);
      // A racing read of a shorter view of the segment inserted it first.
      if (block->size() < bytes.size()) block = cache.Uncached(bytes);
      blocks[m - first] = std::move(block);
    }
    b = run_end + 1;
  }
  for (uint64_t b = first; b <= last; ++b) {
    const uint64_t block_start = b * block_bytes;
    const uint64_t lo = std::max(from, block_start);
    const uint64_t hi = std::min(to, block_start + block_bytes);
    if (block_start + blocks[b - first]->size() < hi) {  // never a short reply
      // (hi never passes this view's length, so a longer block is fine)
      return absl::InternalError(absl::StrCat("block ", b, " of segment ", segment.id(),
                                              " holds ", blocks[b - first]->size(), " bytes"));
    }
    out->AppendBlock(std::move(blocks[b - first]), lo - block_start, hi - lo);
  }
  return absl::OkStatus();
}

// Calls fn(segment, from, to) for each segment holding bytes of the file
// range [offset, end), with the segment-relative range [from, to) it holds,
// in file order; stops at the first non-OK status fn returns.
template <typename Fn>
absl::Status ForEachSegmentPiece(const std::vector<proto::Segment>& segments, uint64_t offset,
                                 uint64_t end, Fn fn) {
  uint64_t segment_start = 0;
  for (const auto& segment : segments) {
    const uint64_t segment_end = segment_start + segment.length();
    const uint64_t from = std::max(offset, segment_start);
    const uint64_t to = std::min(end, segment_end);
    if (from < to) RETURN_IF_ERROR(fn(segment, from - segment_start, to - segment_start));
    segment_start = segment_end;
    if (segment_start >= end) break;
  }
  return absl::OkStatus();
}

// Whether a kCachedOnly read of [offset, end) can be served without a
// segment server: every piece is in the block cache or in a replica the
// replica cache holds. Asked before any lookup, so that a read that would
// end in RemoteReadNeeded() and run again with kAny counts (and traces)
// each block-cache lookup once, not twice. The block cache (a shard lock
// per block) is asked first; the replica cache (one mutex for the mount)
// only for a segment with a block missing.
bool CachedOnlyReadPossible(const BlockCache* cache, SegmentReader& reader,
                            const std::vector<proto::Segment>& segments, uint64_t offset,
                            uint64_t end) {
  absl::Status possible = ForEachSegmentPiece(
      segments, offset, end,
      [&](const proto::Segment& segment, uint64_t from, uint64_t to) -> absl::Status {
        // Open segments are read from their servers.
        if (!segment.sealed()) return RemoteReadNeeded();
        bool all_cached = cache != nullptr;
        if (cache != nullptr) {
          const uint64_t block_bytes = cache->block_bytes();
          for (uint64_t b = from / block_bytes; all_cached && b <= (to - 1) / block_bytes; ++b) {
            all_cached = cache->Contains({segment.id(), b});
          }
        }
        if (!all_cached && !reader.HasCachedReplica(segment)) return RemoteReadNeeded();
        return absl::OkStatus();
      });
  return possible.ok();
}

}  // namespace

absl::Status ReadFile(BlockCache* cache, SegmentReader& reader,
                      const std::vector<proto::Segment>& segments, uint64_t file_length,
                      uint64_t offset, uint64_t size, const client::BadReplicaReporter& reporter,
                      ReadMode mode, ReadBuffer* out) {
  if (offset >= file_length) return absl::OkStatus();
  const uint64_t end = std::min(file_length, offset + size);
  if (mode == ReadMode::kCachedOnly &&
      !CachedOnlyReadPossible(cache, reader, segments, offset, end)) {
    return RemoteReadNeeded();
  }
  return ForEachSegmentPiece(
      segments, offset, end,
      [&](const proto::Segment& segment, uint64_t from, uint64_t to) -> absl::Status {
        if (cache != nullptr && segment.sealed()) {
          return ReadSealedSegment(*cache, reader, segment, from, to, reporter, mode, out);
        }
        auto piece = reader.Read(segment, from, to - from, reporter, mode);
        if (!piece.ok()) return piece.status();
        out->AppendOwned(std::move(*piece));
        return absl::OkStatus();
      });
}

}  // namespace logfs::cache
