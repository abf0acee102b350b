#include "store/format/frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "src/util/coding.h"
#include "src/util/crc32c.h"

namespace logfs::format {
namespace {
constexpr size_t kChecksummedHeaderBytes = 24;

uint32_t FrameChecksum(const char* header, absl::string_view message, absl::string_view data) {
  uint32_t crc = util::Crc32c(header, kChecksummedHeaderBytes);
  crc = util::Crc32cExtend(crc, message.data(), message.size());
  return util::Crc32cExtend(crc, data.data(), data.size());
}
}  // namespace

void EncodeFrameHeader(uint8_t flags, MessageType type, uint64_t request_id,
                       absl::string_view message, absl::string_view data,
                       char out[kFrameHeaderBytes]) {
  util::EncodeFixed32(out, kFrameMagic);
  out[4] = static_cast<char>(kFrameVersion);
  out[5] = static_cast<char>(flags);
  util::EncodeFixed16(out + 6, static_cast<uint16_t>(type));
  util::EncodeFixed64(out + 8, request_id);
  util::EncodeFixed32(out + 16, static_cast<uint32_t>(message.size()));
  util::EncodeFixed32(out + 20, static_cast<uint32_t>(data.size()));
  util::EncodeFixed32(out + 24, FrameChecksum(out, message, data));
}

absl::StatusOr<FrameHeader> DecodeFrameHeader(const char in[kFrameHeaderBytes]) {
  uint32_t magic = util::DecodeFixed32(in);
  if (magic == kAuthHelloMagic) {
    return absl::UnauthenticatedError(
        "the peer opened an authentication handshake, but this process has no cluster secret: "
        "check --cluster_secret_file");
  }
  if (magic != kFrameMagic) {
    return absl::InvalidArgumentError(absl::StrCat("bad frame magic 0x", absl::Hex(magic)));
  }
  uint8_t version = static_cast<uint8_t>(in[4]);
  if (version != kFrameVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported frame version ", version));
  }
  FrameHeader h;
  h.flags = static_cast<uint8_t>(in[5]);
  if ((h.flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown frame flags ", h.flags));
  }
  h.type = util::DecodeFixed16(in + 6);
  h.request_id = util::DecodeFixed64(in + 8);
  h.message_bytes = util::DecodeFixed32(in + 16);
  h.data_bytes = util::DecodeFixed32(in + 20);
  h.crc32c = util::DecodeFixed32(in + 24);
  if (h.message_bytes > kMaxMessageBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("oversized frame message: ", h.message_bytes, " bytes"));
  }
  if (h.data_bytes > kMaxDataBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("oversized frame data: ", h.data_bytes, " bytes"));
  }
  return h;
}

absl::Status VerifyFrameChecksum(const char header[kFrameHeaderBytes],
                                 const FrameHeader& decoded, const std::string& message,
                                 const std::string& data) {
  uint32_t actual = FrameChecksum(header, message, data);
  if (actual != decoded.crc32c) {
    return absl::DataLossError(absl::StrCat("frame checksum mismatch: header says 0x",
                                            absl::Hex(decoded.crc32c), ", body has 0x",
                                            absl::Hex(actual)));
  }
  return absl::OkStatus();
}

std::string EncodeFrame(uint8_t flags, MessageType type, uint64_t request_id,
                        const std::string& message, const std::string& data) {
  char header[kFrameHeaderBytes];
  EncodeFrameHeader(flags, type, request_id, message, data, header);
  std::string out(header, kFrameHeaderBytes);
  out += message;
  out += data;
  return out;
}

}  // namespace logfs::format
