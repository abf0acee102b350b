// Little-endian fixed-width integer coding, as LevelDB's util/coding.h.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <cstring>

namespace logfs::util {

inline void EncodeFixed16(char* dst, uint16_t v) { std::memcpy(dst, &v, 2); }
inline void EncodeFixed32(char* dst, uint32_t v) { std::memcpy(dst, &v, 4); }
inline void EncodeFixed64(char* dst, uint64_t v) { std::memcpy(dst, &v, 8); }
inline uint16_t DecodeFixed16(const char* p) { uint16_t v; std::memcpy(&v, p, 2); return v; }
inline uint32_t DecodeFixed32(const char* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t DecodeFixed64(const char* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }

// Big-endian 64-bit, so that encoded ids sort in numeric order as keys.
inline void EncodeBigEndian64(char* dst, uint64_t v) {
  for (int i = 7; i >= 0; --i) {
    dst[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
}
inline uint64_t DecodeBigEndian64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "logfs assumes a little-endian host");

}  // namespace logfs::util
