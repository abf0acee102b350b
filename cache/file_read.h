// Reads a byte range of a file through the block cache: sealed segments are
// served from cached blocks and their misses fetched through the
// SegmentReader (short-circuit or TCP) a whole block at a time; the open
// segment (which still grows) is read from a replica and not cached. The result is a scatter-gather list over pinned
// blocks, replied to FUSE without copying (fuse_reply_iov).
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cache/block_cache.h"
#include "cache/segment_reader.h"
#include "store/format/logfs.pb.h"
#include "store/client/replica_reader.h"

namespace logfs::cache {

// The bytes of one read, in order: slices of pinned cache blocks and of
// buffers it owns. Not thread-safe; movable, not copyable.
class ReadBuffer {
 public:
  ReadBuffer() = default;
  ReadBuffer(ReadBuffer&&) = default;
  ReadBuffer& operator=(ReadBuffer&&) = default;

  // Bytes [offset, offset + length) of `block`, which stays pinned.
  void AppendBlock(BlockHandle block, size_t offset, size_t length);
  void AppendOwned(std::string data);

  // Valid while this buffer lives and is not appended to.
  const std::vector<iovec>& iov() const { return iov_; }
  size_t size() const { return size_; }
  // A contiguous copy, for callers that need one (tests, small replies).
  std::string ToString() const;

 private:
  std::vector<BlockHandle> pins_;
  std::deque<std::string> owned_;  // a deque never moves its elements
  std::vector<iovec> iov_;
  size_t size_ = 0;
};

// Appends bytes [offset, offset + size) of a file made of `segments` (in
// file order, each with its readable `length`), cut at `file_length`, to
// `out`: fewer at end of file. `cache` may be null (no caching). Misses of
// neighbouring blocks are fetched in one `reader` call. kUnavailable (EIO)
// when no replica of a needed segment can serve it. Thread-safe; blocks the
// caller for the replica reads, unless `mode` is kCachedOnly: then a read
// that needs a segment server returns RemoteReadNeeded() before it looks
// anything up (so the kAny read that follows counts each block-cache
// lookup once; a block evicted in between still ends it there, `out`
// then holding a prefix).
absl::Status ReadFile(BlockCache* cache, SegmentReader& reader,
                      const std::vector<proto::Segment>& segments, uint64_t file_length,
                      uint64_t offset, uint64_t size, const client::BadReplicaReporter& reporter,
                      ReadMode mode, ReadBuffer* out);

}  // namespace logfs::cache
