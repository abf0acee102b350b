#include "fuzz/journal_bytes.h"

#include <algorithm>

#include "src/util/crc32c.h"
#include "store/segd/journal.h"

namespace logfs::fuzz {
namespace {
constexpr uint32_t kRecordMagic = 0x314a474c;  // "LGJ1", docs/segd_layout.md
}  // namespace

void FixJournalRecords(uint8_t mode, std::string& file) {
  uint64_t generation = 0;
  for (size_t at = 0; at + segd::kJournalHeaderBytes <= file.size();) {
    const uint32_t length = GetLe<uint32_t>(file, at + 32);
    const size_t body = at + segd::kJournalHeaderBytes;
    const size_t have = std::min<size_t>(length, file.size() - body);
    if (mode & 4) {
      if (generation == 0) generation = GetLe<uint64_t>(file, at + 8);
      PutLe<uint64_t>(file, at + 8, generation);
    }
    if (mode & 2) PutLe<uint32_t>(file, at + 36, util::Crc32c(file.data() + body, have));
    if (mode & 1) {
      PutLe<uint32_t>(file, at, kRecordMagic);
      PutLe<uint32_t>(file, at + 4,
                      util::Crc32c(file.data() + at + 8, segd::kJournalHeaderBytes - 8));
    }
    if (have < length) break;
    at = body + length;
  }
}

std::string JournalRecordBytes(uint64_t generation, uint64_t segment_id, uint64_t offset,
                               const std::string& data) {
  std::string r(segd::kJournalHeaderBytes, '\0');
  PutLe<uint64_t>(r, 8, generation);
  PutLe<uint64_t>(r, 16, segment_id);
  PutLe<uint64_t>(r, 24, offset);
  PutLe<uint32_t>(r, 32, static_cast<uint32_t>(data.size()));
  return r + data;
}

}  // namespace logfs::fuzz
