// The logfs frame: a fixed 28-byte little-endian header followed by a
// protobuf message and raw data bytes. See docs/wire_format.md.
//
//   offset size field
//        0    4 magic          kFrameMagic
//        4    1 version        kFrameVersion
//        5    1 flags          kFlagResponse | kFlagError
//        6    2 type           MessageType
//        8    8 request_id     echoed in the response
//       16    4 message_bytes  <= kMaxMessageBytes
//       20    4 data_bytes     <= kMaxDataBytes
//       24    4 crc32c         of header bytes [0,24), message, data
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/format/message_type.h"

namespace logfs::format {

inline constexpr uint32_t kFrameMagic = 0x5346474C;  // "LGFS"
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 28;
inline constexpr uint32_t kMaxMessageBytes = 4u << 20;
inline constexpr uint32_t kMaxDataBytes = 16u << 20;
inline constexpr uint8_t kFlagResponse = 1;
inline constexpr uint8_t kFlagError = 2;
inline constexpr uint8_t kKnownFlags = kFlagResponse | kFlagError;
// Authenticated connections (docs/wire_format.md "Authentication"): they
// open with hellos of this magic, and every frame after them carries a
// tag of kAuthTagBytes after its data (not counted in the header's sizes).
inline constexpr uint32_t kAuthHelloMagic = 0x4146474C;  // "LGFA"
inline constexpr size_t kAuthTagBytes = 16;

struct FrameHeader {
  uint8_t flags = 0;
  uint16_t type = 0;
  uint64_t request_id = 0;
  uint32_t message_bytes = 0;
  uint32_t data_bytes = 0;
  uint32_t crc32c = 0;
};

// A decoded frame. Owns its bytes.
struct Frame {
  uint8_t flags = 0;
  MessageType type = MessageType::kInvalid;
  uint64_t request_id = 0;
  std::string message;
  std::string data;
  uint64_t connection_id = 0;  // servers: which accepted connection sent it
  // Servers: a whole later request of the same connection came in the
  // read that brought this frame (store/rpc/frame_buffer.h). The handler is
  // called for it next, on the same thread, before the connection reads
  // again (unless that frame turns out bad: then the connection is
  // closed); so work owed to a burst of requests can wait for the last.
  bool more_buffered = false;
  // Servers: any byte of a later request is buffered (perhaps not a whole
  // frame yet): the connection has more to read, so a handler should not
  // block its reads.
  bool more_bytes_buffered = false;
};

// Writes the 28-byte header for a frame with these fields and body into
// `out`, computing the checksum over header, message and data.
void EncodeFrameHeader(uint8_t flags, MessageType type, uint64_t request_id,
                       absl::string_view message, absl::string_view data,
                       char out[kFrameHeaderBytes]);

// Parses and validates a header: magic, version, flags, sizes, and (when
// `known_type` is given) the type. Returns kInvalidArgument with the reason
// for a bad header; it never trusts a size it has not bounded.
absl::StatusOr<FrameHeader> DecodeFrameHeader(const char in[kFrameHeaderBytes]);

// Checks the header's checksum against the body. kDataLoss on mismatch.
absl::Status VerifyFrameChecksum(const char header[kFrameHeaderBytes],
                                 const FrameHeader& decoded, const std::string& message,
                                 const std::string& data);

// Encodes a whole frame into one string (header + message + data); for
// tests and tools. Servers and clients send the parts without copying.
std::string EncodeFrame(uint8_t flags, MessageType type, uint64_t request_id,
                        const std::string& message, const std::string& data);

}  // namespace logfs::format
