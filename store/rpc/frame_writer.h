// The write half of one RPC connection (RpcClient and RpcServer): a queue
// of frames and one rule for who writes them.
//
// A frame queued while nobody writes is written from the caller's thread
// (an inline sender): gathered, non-blocking sendmsgs, with no lock held
// across them, so other threads queue meanwhile and their frames leave in
// the sender's next write; a reply or a request then costs no wake-up of an
// io thread (the HBase RPC lesson: do not hand every call to another
// thread). When the socket is full, or the sender has written a few rounds
// for others, the rest goes to an io thread, which writes with async_write
// until the queue is empty. Frames leave in queue order.
//
// Close waits for an inline sender to leave its sendmsg, so that when it
// returns nobody writes to the descriptor and the owner may close it.
//
// Thread-safe: any thread may queue, flush or close. Lock order: an owner's
// lock before FrameWriter::mu_ (RpcClient queues under its own lock);
// nothing is called back under mu_.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/outgoing_frame.h"
#include "store/rpc/stream_socket.h"

namespace logfs::rpc {

// Frames one gathered write carries at most (4 iovecs each).
inline constexpr size_t kFramesPerSend = 64;
// Gathered writes an inline sender makes before it hands the rest of the
// queue (other threads' frames) to the io thread.
inline constexpr int kInlineSendPasses = 4;

class FrameWriter {
 public:
  struct Options {
    // Called at most once per Open, on the socket's executor, when a write
    // fails (kUnavailable with the reason), unless Close ran since. The
    // stream may then end inside a frame: the writer drops what is queued
    // and every later frame, and the owner closes the connection.
    std::function<void(const absl::Status& status)> on_error;
    // Counts socket writes (each sendmsg and each io-thread write), if set.
    // Not owned; must outlive the writer.
    std::atomic<uint64_t>* writes = nullptr;
    // Tests: runs on an inline sender's thread right before each sendmsg,
    // with no lock held.
    std::function<void()> TEST_before_inline_send;
  };

  // What Enqueue did with a frame.
  enum class Queued {
    kDropped,      // closed or failed: the frame is gone
    kTaken,        // a writer has it (written already, or queued behind one)
    kFlushNeeded,  // queued, and this caller must call Flush (kDefer, kHold)
  };
  enum class Mode {
    kNow,    // write inline now if nobody writes
    kDefer,  // queue only; if nobody writes, the caller flushes later
    kHold,   // as kDefer, and until that Flush other frames queue behind it
  };

  // `socket` is the owner's; it must outlive the writer. Starts closed to
  // writes: frames queue until Open.
  FrameWriter(StreamSocket& socket, Options options);
  FrameWriter(const FrameWriter&) = delete;
  FrameWriter& operator=(const FrameWriter&) = delete;

  // Queues `frame` (its header encoded, `sent` 0) behind every frame queued
  // before it, and writes it as `mode` says. Never blocks on the network.
  Queued Enqueue(std::shared_ptr<OutgoingFrame> frame, Mode mode) ABSL_LOCKS_EXCLUDED(mu_);

  // Writes the queue from this thread unless another thread writes it (a
  // Flush after kDefer or kHold). Never blocks on the network.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // The socket is connected: start writing what is queued (from an io
  // thread). `owner` keeps the writer and the socket alive in io-thread
  // handlers. Call on the socket's executor, or before anything else uses
  // the socket. Does nothing after a Close (until Reset). With `mac` (an
  // authenticated connection), every frame written from now on, queued
  // ones included, is tagged in the order it goes on the wire.
  void Open(std::weak_ptr<void> owner, std::unique_ptr<FrameMac> mac = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Stops writing: drops what is queued and every later frame, and returns
  // once no inline sender is in a sendmsg (an io-thread write may still be
  // pending; closing the socket cancels it). The owner then closes the
  // socket. Must not be called by an inline sender (on_error is posted).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // After Close: frames queue again until the next Open (a reconnect).
  void Reset() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Frames = std::vector<std::shared_ptr<OutgoingFrame>>;
  enum class State { kQueueing, kOpen, kFailed, kClosed };
  // Who writes the queue; others only append to it.
  enum class Owner { kNone, kCaller, kHeld, kIoThread };

  // The inline sender's loop, entered with owner_ == kCaller.
  void SendInline(Frames frames, int fd, uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // Moves up to kFramesPerSend frames from the queue's front to `frames`,
  // tagging each not tagged yet. The tags are made here, under mu_, as
  // frames leave the queue in wire order: a tag covers its frame's place in
  // the stream (the sequence number). Costs a GMAC pass over the frame
  // under the lock (about 0.25 us for a 512-byte append, 0.1 us per KiB).
  void TakeLocked(Frames* frames) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts the frames of `frames` not fully sent back at the queue's front,
  // in order; returns whether there were any.
  bool PutBackLocked(Frames* frames) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the queue to the io thread (owner_ = kIoThread).
  void PostWriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Io thread: writes the next frames of the queue with async_write.
  void WriteAsync(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // A write failed: stop writing and drop the queue (the caller tells the
  // owner, after releasing mu_).
  void FailLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Immutable after construction.
  StreamSocket& socket_;
  const Options options_;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kQueueing;
  Owner owner_ ABSL_GUARDED_BY(mu_) = Owner::kNone;
  // Bumped by Close: a sender or handler of an older one stops.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::weak_ptr<void> keepalive_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<OutgoingFrame>> queue_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<FrameMac> mac_ ABSL_GUARDED_BY(mu_);  // null: not authenticated
};

}  // namespace logfs::rpc
