#include "cache/block_trace.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "src/status/macros.h"
#include "src/status/posix_error.h"
#include "src/util/coding.h"

namespace logfs::cache {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kBufferBytes = 64 << 10;  // a whole number of records

}  // namespace

absl::StatusOr<std::unique_ptr<BlockTraceWriter>> BlockTraceWriter::Create(
    const std::string& path, uint64_t block_bytes, uint64_t max_records) {
  env::WritableFileOptions options;
  options.create = true;
  options.truncate = true;
  ASSIGN_OR_RETURN(std::unique_ptr<env::WritableFile> file,
                   env::FileSystem::Default()->NewWritableFile(path, options));
  char header[kBlockTraceHeaderBytes];
  std::memcpy(header, kBlockTraceMagic, kMagicBytes);
  util::EncodeFixed64(header + kMagicBytes, block_bytes);
  RETURN_IF_ERROR(file->WriteAt(0, absl::string_view(header, sizeof(header))));
  return std::unique_ptr<BlockTraceWriter>(new BlockTraceWriter(std::move(file), max_records));
}

BlockTraceWriter::BlockTraceWriter(std::unique_ptr<env::WritableFile> file, uint64_t max_records)
    : max_records_(max_records), file_(std::move(file)) {
  absl::MutexLock lock(&mu_);
  buffer_.reserve(kBufferBytes);
}

BlockTraceWriter::~BlockTraceWriter() {
  absl::Status flushed = Flush();
  if (flushed.ok()) flushed = file_->Close();
  LOG_IF(WARNING, !flushed.ok()) << "block-cache trace " << file_->path() << ": " << flushed;
}

void BlockTraceWriter::OnLookup(const BlockKey& key) {
  absl::MutexLock lock(&mu_);
  if (failed_ || recorded_ >= max_records_) {
    ++dropped_;
    return;
  }
  char record[kBlockTraceRecordBytes];
  util::EncodeFixed64(record, key.segment_id);
  util::EncodeFixed64(record + 8, key.index);
  buffer_.append(record, sizeof(record));
  ++recorded_;
  if (buffer_.size() + kBlockTraceRecordBytes > kBufferBytes) {
    absl::Status flushed = FlushLocked();
    if (!flushed.ok()) LOG(WARNING) << "block-cache trace " << file_->path() << " stops: " << flushed;
  }
}

absl::Status BlockTraceWriter::Flush() {
  absl::MutexLock lock(&mu_);
  return FlushLocked();
}

absl::Status BlockTraceWriter::FlushLocked() {
  if (failed_) return absl::OkStatus();  // reported when it failed
  absl::Status written = file_->WriteAt(end_, buffer_);
  end_ += buffer_.size();
  buffer_.clear();
  if (!written.ok()) failed_ = true;
  return written;
}

uint64_t BlockTraceWriter::recorded() const {
  absl::MutexLock lock(&mu_);
  return recorded_;
}

uint64_t BlockTraceWriter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

absl::StatusOr<BlockTrace> ReadBlockTrace(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<env::RandomAccessFile> file,
                   env::FileSystem::Default()->NewRandomAccessFile(path));
  char header[kBlockTraceHeaderBytes];
  ASSIGN_OR_RETURN(size_t header_bytes, file->ReadAt(0, sizeof(header), header));
  if (header_bytes < sizeof(header) || std::memcmp(header, kBlockTraceMagic, kMagicBytes) != 0) {
    return PosixError(EINVAL, absl::StrCat(path, " is not a block-cache trace (no ",
                                           kBlockTraceMagic, " header)"));
  }
  BlockTrace trace;
  trace.block_bytes = util::DecodeFixed64(header + kMagicBytes);
  if (trace.block_bytes == 0) {
    return PosixError(EINVAL, absl::StrCat(path, ": a block-cache trace with block size 0"));
  }
  std::vector<char> buf(kBufferBytes);
  for (uint64_t at = sizeof(header);;) {
    ASSIGN_OR_RETURN(size_t got, file->ReadAt(at, buf.size(), buf.data()));
    for (size_t i = 0; i + kBlockTraceRecordBytes <= got; i += kBlockTraceRecordBytes) {
      trace.keys.push_back(BlockKey{util::DecodeFixed64(&buf[i]), util::DecodeFixed64(&buf[i + 8])});
    }
    at += got;
    if (got % kBlockTraceRecordBytes != 0) {
      return PosixError(EINVAL, absl::StrCat(path, " ends in a partial record (",
                                             at - sizeof(header), " bytes of records)"));
    }
    if (got < buf.size()) break;  // the end of the file
  }
  return trace;
}

std::vector<BlockKey> ScanWithHotSetTrace(uint64_t lookups, uint64_t hot_blocks,
                                          uint64_t scan_blocks, double scan_share,
                                          uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> coin(0, 1);
  std::uniform_int_distribution<uint64_t> hot(0, std::max<uint64_t>(hot_blocks, 1) - 1);
  // Hot blocks live in segment 1; each scan reads a fresh segment from 2 on.
  uint64_t scan_segment = 2, scan_next = 0;
  std::vector<BlockKey> trace;
  trace.reserve(lookups);
  while (trace.size() < lookups) {
    if (scan_blocks > 0 && coin(rng) < scan_share) {
      trace.push_back({scan_segment, scan_next});
      if (++scan_next == scan_blocks) {
        ++scan_segment;
        scan_next = 0;
      }
    } else {
      trace.push_back({1, hot(rng)});
    }
  }
  return trace;
}

ReplayResult ReplayBlockTrace(const std::vector<BlockKey>& trace, EvictionPolicy policy,
                              uint64_t capacity_blocks, int shards) {
  BlockCacheOptions options;
  options.block_bytes = ChunkPool::kChunkBytes;
  options.capacity_bytes = capacity_blocks * ChunkPool::kChunkBytes;
  options.shards = shards;
  options.policy = policy;
  BlockCache cache(options);
  const std::string block(ChunkPool::kChunkBytes, 'b');
  ReplayResult result;
  for (const BlockKey& key : trace) {
    ++result.lookups;
    if (cache.Lookup(key) != nullptr) {
      ++result.hits;
    } else {
      cache.Insert(key, block);
    }
  }
  return result;
}

ReplayResult ReplayBeladyOpt(const std::vector<BlockKey>& trace, uint64_t capacity_blocks) {
  constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
  // next[i]: the position of the next lookup of trace[i]'s key, or kNever.
  std::vector<uint64_t> next(trace.size(), kNever);
  absl::flat_hash_map<BlockKey, uint64_t> seen;
  for (size_t i = trace.size(); i-- > 0;) {
    auto [it, inserted] = seen.try_emplace(trace[i], i);
    if (!inserted) {
      next[i] = it->second;
      it->second = i;
    }
  }
  // Cached keys by the position of their next use, furthest last.
  std::set<std::pair<uint64_t, size_t>> by_next_use;  // (next use, trace index of the key)
  absl::flat_hash_map<BlockKey, std::set<std::pair<uint64_t, size_t>>::iterator> cached;
  ReplayResult result;
  for (size_t i = 0; i < trace.size(); ++i) {
    ++result.lookups;
    auto found = cached.find(trace[i]);
    if (found != cached.end()) {
      ++result.hits;
      by_next_use.erase(found->second);
      found->second = by_next_use.insert({next[i], i}).first;
      continue;
    }
    if (capacity_blocks == 0 || next[i] == kNever) continue;  // OPT never keeps a dead block
    if (cached.size() == capacity_blocks) {
      auto furthest = std::prev(by_next_use.end());
      if (furthest->first < next[i]) continue;  // the newcomer is needed last: skip it
      cached.erase(trace[furthest->second]);
      by_next_use.erase(furthest);
    }
    cached[trace[i]] = by_next_use.insert({next[i], i}).first;
  }
  return result;
}

}  // namespace logfs::cache
