// The pure chunk-CRC arithmetic of store/format/chunk_crc.h.
#include "store/format/chunk_crc.h"

#include <gtest/gtest.h>

#include <string>

#include "src/util/crc32c.h"

namespace logfs::format {
namespace {

std::string Bytes(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(i * 131 + i / 977);
  return out;
}

TEST(ChunkCrcTest, AppendsInAnySizesGiveTheSameCrcsAsOneWrite) {
  // Goal: the running CRC of a growing last chunk ends where a one-shot
  // computation does. Method: grow by uneven pieces, keep every update.
  const std::string data = Bytes(3 * kCrcChunkBytes + 1234);
  const std::vector<uint32_t> expected = ComputeChunkCrcs(data);
  ASSERT_EQ(4u, expected.size());
  std::vector<uint32_t> crcs;
  uint32_t tail_crc = 0;
  uint64_t length = 0;
  for (size_t piece : {1u, 70000u, 65535u, 3u, 100000u}) {
    piece = std::min<size_t>(piece, data.size() - length);
    ChunkCrcUpdate update = ExtendChunkCrcs(length, tail_crc, {data.data() + length, piece});
    crcs.resize(update.first_chunk);
    crcs.insert(crcs.end(), update.crcs.begin(), update.crcs.end());
    tail_crc = update.tail_crc;
    length += piece;
  }
  ASSERT_EQ(data.size(), length);
  EXPECT_EQ(expected, crcs);
  EXPECT_EQ(expected.back(), tail_crc);
  EXPECT_EQ(util::Crc32c(data.data(), kCrcChunkBytes), expected[0]);
}

TEST(ChunkCrcTest, ExactChunkEndLeavesNoTail) {
  ChunkCrcUpdate update = ExtendChunkCrcs(0, 0, Bytes(2 * kCrcChunkBytes));
  EXPECT_EQ(2u, update.crcs.size());
  EXPECT_EQ(0u, update.tail_crc);
  EXPECT_EQ(2u, ChunkCount(2 * kCrcChunkBytes));
  EXPECT_EQ(3u, ChunkCount(2 * kCrcChunkBytes + 1));
  EXPECT_EQ(0u, ChunkCount(0));
}

TEST(ChunkCrcTest, FirstBadChunkFindsTheFlippedChunk) {
  std::string data = Bytes(2 * kCrcChunkBytes + 10);
  const std::vector<uint32_t> crcs = ComputeChunkCrcs(data);
  EXPECT_FALSE(FirstBadChunk(data, crcs).has_value());
  data[kCrcChunkBytes + 5] ^= 1;
  EXPECT_EQ(1u, FirstBadChunk(data, crcs).value());
  EXPECT_EQ(0u, FirstBadChunk(data, {}).value());  // no CRC: bad
}

}  // namespace
}  // namespace logfs::format
