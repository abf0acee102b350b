#include "store/rpc/frame_reader.h"

#include <glog/logging.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace logfs::rpc {

FrameReader::FrameReader(HeaderCheck check) : check_(std::move(check)) {}

std::array<asio::mutable_buffer, 2> FrameReader::ReadSpace() {
  if (state_ == State::kBody) return RemainingBody(message_, data_, filled_);
  return {buffer_.Space(), asio::mutable_buffer()};
}

void FrameReader::Commit(size_t n) {
  if (state_ == State::kBody) {
    filled_ += n;
    CHECK_LE(filled_, body_bytes());
  } else {
    buffer_.Commit(n);
  }
}

absl::StatusOr<std::optional<format::Frame>> FrameReader::Next() {
  if (state_ == State::kBody) {
    if (filled_ < body_bytes()) return std::nullopt;
    return Finish();
  }
  if (!buffer_.TakeHeader(header_)) return std::nullopt;
  auto decoded = format::DecodeFrameHeader(header_);
  if (!decoded.ok()) return decoded.status();
  absl::Status accepted = check_(*decoded);
  if (!accepted.ok()) return absl::InvalidArgumentError(accepted.message());
  decoded_ = *decoded;
  message_.resize(decoded_.message_bytes);
  data_.resize(decoded_.data_bytes + tag_bytes());
  filled_ = buffer_.TakeBody(message_, data_, 0);
  if (filled_ < body_bytes()) {
    state_ = State::kBody;  // the rest goes straight into message_/data_
    return std::nullopt;
  }
  return Finish();
}

absl::StatusOr<std::optional<format::Frame>> FrameReader::Finish() {
  state_ = State::kHeader;
  if (mac_ != nullptr) {
    char tag[kAuthTagBytes];
    std::memcpy(tag, data_.data() + decoded_.data_bytes, kAuthTagBytes);
    data_.resize(decoded_.data_bytes);
    if (!mac_->Verify(header_, message_, data_, tag)) {
      return absl::UnauthenticatedError(absl::StrCat(
          "frame ", mac_->sequence() - 1, " (type ", decoded_.type, ", request ",
          decoded_.request_id, ") fails its authentication tag: tampered, replayed, reordered ",
          "or not from the authenticated peer"));
    }
  }
  absl::Status crc = format::VerifyFrameChecksum(header_, decoded_, message_, data_);
  if (!crc.ok()) return crc;
  format::Frame frame;
  frame.flags = decoded_.flags;
  frame.type = static_cast<format::MessageType>(decoded_.type);
  frame.request_id = decoded_.request_id;
  frame.message = std::move(message_);
  frame.data = std::move(data_);
  message_.clear();
  data_.clear();
  filled_ = 0;
  return frame;
}

void FrameReader::Reset() {
  buffer_.Reset();
  state_ = State::kHeader;
  ++generation_;
  message_.clear();
  data_.clear();
  filled_ = 0;
  mac_.reset();
}

}  // namespace logfs::rpc
