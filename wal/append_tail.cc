#include "wal/append_tail.h"

#include <glog/logging.h>

#include <algorithm>

namespace logfs::wal {

AppendTail::AppendTail(uint64_t length) : segment_start_(length), acked_(length) {}

void AppendTail::CheckInvariants() const {
  CHECK_LE(acked_, segment_start_ + sent_) << "acked bytes that were never sent";
  CHECK_LE(tail_start_, sent_);
  CHECK_EQ(tail_start_ + tail_.size(), sent_) << "the tail must end where the sent bytes end";
}

std::string AppendTail::TakeBuffered() {
  std::string out;
  out.swap(buffer_);
  return out;
}

uint64_t AppendTail::MarkSent(absl::string_view chunk) {
  const uint64_t at = sent_;
  tail_.append(chunk.data(), chunk.size());
  sent_ += chunk.size();
  return at;
}

void AppendTail::Ack(uint64_t acked) {
  if (acked <= acked_) return;
  CHECK_LE(acked, segment_start_ + sent_) << "acked length past the bytes sent (segment at "
                                          << segment_start_ << ", sent " << sent_ << ")";
  acked_ = acked;
}

void AppendTail::Trim(uint64_t durable_everywhere) {
  const uint64_t drop_to = std::min({durable_everywhere, sent_, acked_in_segment()});
  if (drop_to <= tail_start_) return;
  tail_.erase(0, static_cast<size_t>(drop_to - tail_start_));
  tail_start_ = drop_to;
}

std::string AppendTail::TailBytes(uint64_t from, uint64_t to) const {
  CHECK_LE(tail_start_, from) << "the tail no longer holds those bytes";
  CHECK_LE(from, to);
  CHECK_LE(to, sent_);
  return tail_.substr(static_cast<size_t>(from - tail_start_), static_cast<size_t>(to - from));
}

void AppendTail::ResendFrom(uint64_t offset) {
  CHECK_GE(offset, tail_start_) << "the tail lost bytes the roll must re-send";
  CHECK_LE(offset, sent_);
  CHECK_LE(acked_, segment_start_ + offset) << "acked bytes past the end of the segment";
  const size_t keep = static_cast<size_t>(offset - tail_start_);
  buffer_.insert(0, tail_, keep, std::string::npos);
  tail_.resize(keep);
  sent_ = offset;
  CheckInvariants();
}

void AppendTail::DropBufferedPast(uint64_t length) {
  CHECK_LE(segment_start_ + sent_, length) << "the cut lies in sent bytes";
  CHECK_LE(length, this->length());
  buffer_.resize(static_cast<size_t>(length - segment_start_ - sent_));
}

void AppendTail::CutSentTo(uint64_t offset) {
  CHECK(buffer_.empty()) << "bytes past the cut are still buffered";
  CHECK_LE(offset, sent_);
  sent_ = offset;
  if (tail_start_ > offset) tail_start_ = offset;
  tail_.resize(static_cast<size_t>(offset - tail_start_));
  acked_ = std::min(acked_, segment_start_ + offset);
  CheckInvariants();
}

void AppendTail::EndSegment() {
  CheckInvariants();
  segment_start_ += sent_;
  sent_ = 0;
  tail_.clear();
  tail_start_ = 0;
}

void AppendTail::ContinueSegment(uint64_t length) {
  CHECK_EQ(0u, sent_) << "a segment is open";
  CHECK_EQ(acked_, segment_start_) << "a continued segment's bytes are all acked";
  CHECK_LE(length, segment_start_);
  segment_start_ -= length;
  sent_ = length;
  tail_start_ = length;
  tail_.clear();
  CheckInvariants();
}

void AppendTail::Clear() {
  segment_start_ = sent_ = acked_ = tail_start_ = 0;
  buffer_.clear();
  tail_.clear();
}

}  // namespace logfs::wal
