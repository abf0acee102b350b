// Journal files for the fuzz targets that feed segd a journal
// (docs/segd_layout.md "Journal": records of a 40-byte header, then
// `length` data bytes). Random bytes fail the checksums at the first
// record, so a target lets its input ask for them to be fixed first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace logfs::fuzz {

// Little-endian fields of `s` at byte `at` (which must fit).
template <typename T>
T GetLe(const std::string& s, size_t at) {
  T v;
  std::memcpy(&v, s.data() + at, sizeof(v));
  return v;
}
template <typename T>
void PutLe(std::string& s, size_t at, T v) {
  std::memcpy(s.data() + at, &v, sizeof(v));
}

// Walks the records of `file` and makes them pass the checks `mode`
// names: bit 0 writes each record's magic and header CRC, bit 1 its data
// CRC (over the data bytes there are), bit 2 gives every record the first
// one's generation. Stops at a record whose data runs past the end.
void FixJournalRecords(uint8_t mode, std::string& file);

// A record's bytes with these fields; magic and CRCs left zero (fix them
// with FixJournalRecords).
std::string JournalRecordBytes(uint64_t generation, uint64_t segment_id, uint64_t offset,
                               const std::string& data);

}  // namespace logfs::fuzz
