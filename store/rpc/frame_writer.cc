#include "store/rpc/frame_writer.h"

#include <sys/socket.h>
#include <sys/types.h>

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace logfs::rpc {
namespace {

// One non-blocking (MSG_DONTWAIT) gathered sendmsg of the frames, each from
// its `sent`; advances `sent` by what the socket took. Returns the bytes
// written (> 0), 0 if the socket is full (EAGAIN), or -errno of a failed
// send.
ssize_t SendGathered(int fd, const std::vector<std::shared_ptr<OutgoingFrame>>& frames) {
  struct iovec iov[4 * kFramesPerSend];
  int count = 0;
  CHECK_LE(frames.size(), kFramesPerSend);
  for (const auto& frame : frames) {
    for (const auto& b : frame->Remaining()) {
      if (b.size() > 0) iov[count++] = {const_cast<void*>(b.data()), b.size()};
    }
  }
  struct msghdr msg = {};
  msg.msg_iov = iov;
  msg.msg_iovlen = count;
  ssize_t n;
  do {
    n = ::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
  size_t left = static_cast<size_t>(n);
  for (auto it = frames.begin(); left > 0; ++it) {
    OutgoingFrame& frame = **it;
    const size_t take = std::min(left, frame.size() - frame.sent);
    frame.sent += take;
    left -= take;
  }
  return n;
}

}  // namespace

FrameWriter::FrameWriter(StreamSocket& socket, Options options)
    : socket_(socket), options_(std::move(options)) {
  CHECK(options_.on_error);
}

FrameWriter::Queued FrameWriter::Enqueue(std::shared_ptr<OutgoingFrame> frame, Mode mode) {
  Frames frames;
  int fd;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kClosed || state_ == State::kFailed) return Queued::kDropped;
    queue_.push_back(std::move(frame));
    // While queueing, Open hands the queue to the io thread.
    if (state_ != State::kOpen || owner_ != Owner::kNone) return Queued::kTaken;
    if (mode == Mode::kDefer) return Queued::kFlushNeeded;
    if (mode == Mode::kHold) {
      owner_ = Owner::kHeld;
      return Queued::kFlushNeeded;
    }
    owner_ = Owner::kCaller;
    fd = fd_;
    generation = generation_;
    TakeLocked(&frames);
  }
  SendInline(std::move(frames), fd, generation);
  return Queued::kTaken;
}

void FrameWriter::Flush() {
  Frames frames;
  int fd;
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kOpen) return;
    // A held queue is flushed by its holder; a batch's Flush on another
    // thread may take it over, which only sends the held frames sooner.
    if (owner_ != Owner::kNone && owner_ != Owner::kHeld) return;
    if (queue_.empty()) {
      owner_ = Owner::kNone;
      return;
    }
    owner_ = Owner::kCaller;
    fd = fd_;
    generation = generation_;
    TakeLocked(&frames);
  }
  SendInline(std::move(frames), fd, generation);
}

void FrameWriter::SendInline(Frames frames, int fd, uint64_t generation) {
  for (int pass = 1;; ++pass) {
    if (options_.TEST_before_inline_send) options_.TEST_before_inline_send();
    // No lock held: other threads queue behind owner_, and Close waits for
    // this thread before the descriptor is closed.
    if (options_.writes != nullptr) options_.writes->fetch_add(1, std::memory_order_relaxed);
    const ssize_t result = SendGathered(fd, frames);
    absl::MutexLock lock(&mu_);
    if (generation != generation_) {
      // Close ran meanwhile: it dropped the queue and waits for this.
      owner_ = Owner::kNone;
      return;
    }
    const bool socket_full = PutBackLocked(&frames);
    if (result < 0) {
      FailLocked();
      const absl::Status status = absl::UnavailableError(std::strerror(static_cast<int>(-result)));
      auto keepalive = keepalive_.lock();
      if (keepalive == nullptr) return;  // the owner is going away
      // Not from this thread: the owner's handler closes the writer, and
      // Close must not wait for its own caller.
      asio::post(socket_.get_executor(), [this, keepalive, generation, status] {
        {
          absl::MutexLock lock(&mu_);
          if (generation != generation_) return;
        }
        options_.on_error(status);
      });
      return;
    }
    if (queue_.empty()) {
      owner_ = Owner::kNone;
      return;
    }
    if (socket_full || pass == kInlineSendPasses) {
      PostWriteLocked();
      return;
    }
    TakeLocked(&frames);
  }
}

void FrameWriter::TakeLocked(Frames* frames) {
  frames->clear();
  const size_t n = std::min(queue_.size(), kFramesPerSend);
  for (size_t i = 0; i < n; ++i) {
    OutgoingFrame& frame = *queue_.front();
    if (mac_ != nullptr && !frame.tagged) {
      mac_->Sign(frame.header, frame.message, frame.payload(), frame.tag);
      frame.tag_bytes = kAuthTagBytes;
      frame.tagged = true;
    }
    frames->push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
}

bool FrameWriter::PutBackLocked(Frames* frames) {
  auto unsent = std::find_if(frames->begin(), frames->end(),
                             [](const auto& f) { return f->sent < f->size(); });
  const bool any = unsent != frames->end();
  queue_.insert(queue_.begin(), std::make_move_iterator(unsent),
                std::make_move_iterator(frames->end()));
  frames->clear();
  return any;
}

void FrameWriter::PostWriteLocked() {
  auto keepalive = keepalive_.lock();
  if (keepalive == nullptr) {  // the owner is going away: nobody to write for
    owner_ = Owner::kNone;
    return;
  }
  owner_ = Owner::kIoThread;
  asio::post(socket_.get_executor(),
             [this, keepalive, generation = generation_] { WriteAsync(generation); });
}

void FrameWriter::WriteAsync(uint64_t generation) {
  auto frames = std::make_shared<Frames>();
  std::shared_ptr<void> keepalive;
  {
    absl::MutexLock lock(&mu_);
    if (generation != generation_) return;  // Close ran; owner_ is not ours
    if (queue_.empty()) {
      owner_ = Owner::kNone;
      return;
    }
    keepalive = keepalive_.lock();
    if (keepalive == nullptr) {
      owner_ = Owner::kNone;
      return;
    }
    TakeLocked(frames.get());
  }
  std::vector<asio::const_buffer> buffers;
  buffers.reserve(4 * frames->size());
  for (const auto& frame : *frames) {
    for (const auto& b : frame->Remaining()) {
      if (b.size() > 0) buffers.push_back(b);
    }
  }
  if (options_.writes != nullptr) options_.writes->fetch_add(1, std::memory_order_relaxed);
  // `frames` keeps the bytes alive until the write completes.
  asio::async_write(socket_, buffers,
                    [this, keepalive, frames, generation](asio::error_code ec, size_t) {
                      if (!ec) {
                        WriteAsync(generation);
                        return;
                      }
                      {
                        absl::MutexLock lock(&mu_);
                        if (generation != generation_) return;
                        FailLocked();
                      }
                      options_.on_error(absl::UnavailableError(ec.message()));
                    });
}

void FrameWriter::FailLocked() {
  state_ = State::kFailed;
  owner_ = Owner::kNone;
  queue_.clear();
}

void FrameWriter::Open(std::weak_ptr<void> owner, std::unique_ptr<FrameMac> mac) {
  absl::MutexLock lock(&mu_);
  // A Close that came first wins (a server stopping as it accepts).
  if (state_ == State::kClosed) return;
  CHECK(state_ == State::kQueueing) << "Open of an open writer";
  state_ = State::kOpen;
  fd_ = socket_.native_handle();
  keepalive_ = std::move(owner);
  mac_ = std::move(mac);
  if (!queue_.empty() && owner_ == Owner::kNone) PostWriteLocked();
}

void FrameWriter::Close() {
  absl::MutexLock lock(&mu_);
  ++generation_;
  state_ = State::kClosed;
  queue_.clear();
  fd_ = -1;
  // An inline sender may be in sendmsg on the descriptor: the owner closes
  // it only after this returns.
  auto no_inline_sender = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return owner_ != Owner::kCaller;
  };
  mu_.Await(absl::Condition(&no_inline_sender));
  owner_ = Owner::kNone;
}

void FrameWriter::Reset() {
  absl::MutexLock lock(&mu_);
  CHECK(state_ != State::kOpen) << "Reset of an open writer";
  state_ = State::kQueueing;
  owner_ = Owner::kNone;
  queue_.clear();
  mac_.reset();
}

}  // namespace logfs::rpc
