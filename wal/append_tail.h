// The bytes a writer has accepted and the state of each on the way to the
// replicas of the open segment:
//
//   file offset:  0 ... segment_start ... segment_start + sent ... length
//                 [ sealed segments  ][ sent to the open one ][ buffered ]
//   acked <= segment_start + sent <= length; acked never decreases
//   (but Clear, for truncate(0), starts the file again at 0).
//
// The tail keeps the sent bytes of the open segment that are not yet both
// acked and durable on every live replica, from tail_start on: a roll
// away from a failed replica seals the segment at some length at or past
// the acked one and re-sends the rest (ResendFrom), and a replica that is
// short is brought up to that length from it (TailBytes). Offsets named
// "segment" are relative to segment_start; the others are file offsets.
//
// A value type: not thread-safe; FileWriter keeps it under its mu_. The
// invariants are CHECKed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace logfs::wal {

class AppendTail {
 public:
  // A file of `length` bytes, all in sealed segments (acked).
  explicit AppendTail(uint64_t length = 0);

  uint64_t length() const { return segment_start_ + sent_ + buffer_.size(); }
  uint64_t acked() const { return acked_; }
  uint64_t unacked() const { return length() - acked_; }
  // File offset of the open segment (of the next one when none is open).
  uint64_t segment_start() const { return segment_start_; }
  // Segment bytes sent to the replicas.
  uint64_t sent() const { return sent_; }
  size_t buffered() const { return buffer_.size(); }
  // Segment bytes sent or buffered: what the open segment will hold.
  uint64_t segment_used() const { return sent_ + buffer_.size(); }
  // Segment bytes acked (0 while the acked length is before the segment).
  uint64_t acked_in_segment() const {
    return acked_ > segment_start_ ? acked_ - segment_start_ : 0;
  }
  // Whether bytes sent to the open segment still wait for their ack.
  bool awaiting_acks() const { return acked_ < segment_start_ + sent_; }
  uint64_t tail_start() const { return tail_start_; }  // segment offset
  size_t tail_bytes() const { return tail_.size(); }

  // Accepts `data` at length().
  void Buffer(absl::string_view data) { buffer_.append(data.data(), data.size()); }
  // Moves the buffered bytes out to be sent; the caller hands each chunk
  // of them, in order, to MarkSent as it sends it.
  std::string TakeBuffered();
  // Records `chunk` as sent at segment offset sent() (returned), and keeps
  // it in the tail.
  uint64_t MarkSent(absl::string_view chunk);
  // The ack quorum holds the file's first `acked` bytes. A smaller value
  // than acked() is ignored. CHECK: acked <= segment_start + sent.
  void Ack(uint64_t acked);
  // Every live replica has the segment's first `durable_everywhere`
  // bytes: drops them from the tail once they are acked, too.
  void Trim(uint64_t durable_everywhere);
  // Segment bytes [from, to) from the tail. CHECK: tail_start <= from <=
  // to <= sent.
  std::string TailBytes(uint64_t from, uint64_t to) const;
  // The open segment ends at segment offset `offset` (tail_start <= offset
  // <= sent, and no acked byte past it): the bytes sent past it go back to
  // the front of the buffer, to be sent again to the next segment.
  void ResendFrom(uint64_t offset);
  // A shrinking truncate whose cut, file offset `length`, lies in bytes
  // not sent yet: the buffered bytes past it are dropped. CHECK:
  // segment_start + sent <= length <= length().
  void DropBufferedPast(uint64_t length);
  // A shrinking truncate whose cut, segment offset `offset`, lies in sent
  // bytes: the open segment is to end there (its replicas sealed at it),
  // and the bytes past it are gone, never re-sent; the acked length comes
  // back to the cut (the one place it decreases: those bytes were the
  // writer's alone, never seen by a reader, docs/POSIX.md). CHECK: nothing
  // buffered, offset <= sent.
  void CutSentTo(uint64_t offset);
  // The open segment is sealed at sent(): the next starts after it.
  void EndSegment();
  // The file's last `length` bytes, all acked in a sealed segment, are
  // that segment's, open again (continued): it becomes the open segment,
  // with them sent and durable everywhere (no re-send tail). CHECK: no
  // segment open (nothing sent), everything acked, length <= segment_start.
  void ContinueSegment(uint64_t length);
  // truncate(0): the file is empty, nothing is open.
  void Clear();

 private:
  void CheckInvariants() const;

  uint64_t segment_start_ = 0;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  std::string buffer_;  // accepted, not yet sent
  std::string tail_;    // segment bytes [tail_start_, sent_)
  uint64_t tail_start_ = 0;
};

}  // namespace logfs::wal
