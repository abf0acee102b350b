// FrameWriter: the write half shared by RpcClient and RpcServer, over a
// socketpair (its descriptor assigned to the tcp::socket the writer takes;
// the writer only sends on it). The peer end is read with a FrameReader, so
// every test also checks that what arrives is whole, checked frames.
#include "store/rpc/frame_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "store/format/frame.h"
#include "store/rpc/frame_reader.h"

namespace logfs::rpc {
namespace {

constexpr absl::Duration kWaitDeadline = absl::Seconds(20);

std::shared_ptr<OutgoingFrame> MakeFrame(uint64_t request_id, std::string message,
                                         std::string data = {}) {
  auto frame = std::make_shared<OutgoingFrame>();
  frame->message = std::move(message);
  frame->data = std::move(data);
  format::EncodeFrameHeader(0, format::MessageType::kAppend, request_id, frame->message,
                            frame->data, frame->header);
  return frame;
}

class FrameWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
    // A small send buffer, so that a few frames fill the socket.
    const int bytes = 16 << 10;
    ASSERT_EQ(0, ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes)));
    socket_.assign(asio::generic::stream_protocol(AF_UNIX, 0), fds[0]);
    peer_ = fds[1];
    io_thread_ = std::thread([this] { io_.run(); });
  }

  void TearDown() override {
    if (writer_ != nullptr) writer_->Close();
    asio::post(io_, [this] {
      asio::error_code ignored;
      socket_.close(ignored);
      work_.reset();
    });
    io_thread_.join();
    if (peer_ >= 0) ::close(peer_);
  }

  // Makes the writer and opens it.
  void Open(FrameWriter::Options options = {}) {
    if (!options.on_error) {
      options.on_error = [this](const absl::Status& status) {
        errors_.fetch_add(1);
        error_ = status;
        error_seen_.Notify();
      };
    }
    writer_ = std::make_unique<FrameWriter>(socket_, std::move(options));
    absl::Notification opened;
    asio::post(io_, [&] {
      writer_->Open(owner_);
      opened.Notify();
    });
    ASSERT_TRUE(opened.WaitForNotificationWithTimeout(kWaitDeadline));
  }

  // Reads from the peer end until `count` frames arrived (or the deadline).
  std::vector<format::Frame> ReadFrames(size_t count) {
    std::vector<format::Frame> frames;
    const absl::Time deadline = absl::Now() + kWaitDeadline;
    while (frames.size() < count && absl::Now() < deadline) {
      pollfd p = {peer_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      std::array<asio::mutable_buffer, 2> space = reader_.ReadSpace();
      iovec iov[2] = {{space[0].data(), space[0].size()}, {space[1].data(), space[1].size()}};
      ssize_t n = ::readv(peer_, iov, 2);
      if (n <= 0) break;
      reader_.Commit(static_cast<size_t>(n));
      for (;;) {
        auto frame = reader_.Next();
        EXPECT_TRUE(frame.ok()) << frame.status();
        if (!frame.ok() || !frame->has_value()) break;
        frames.push_back(std::move(**frame));
      }
    }
    return frames;
  }

  // Whether the peer has a byte to read right now.
  bool PeerReadable() {
    pollfd p = {peer_, POLLIN, 0};
    return ::poll(&p, 1, 0) == 1;
  }

  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{
      asio::make_work_guard(io_)};
  StreamSocket socket_{io_};
  int peer_ = -1;
  std::thread io_thread_;
  std::shared_ptr<int> owner_ = std::make_shared<int>(0);  // what io handlers keep alive
  std::unique_ptr<FrameWriter> writer_;
  FrameReader reader_{[](const format::FrameHeader&) { return absl::OkStatus(); }};
  std::atomic<int> errors_{0};
  absl::Status error_;
  absl::Notification error_seen_;
};

TEST_F(FrameWriterTest, ManyThreadsKeepTheirOrderAndTheIoThreadWritesWhatIsLeft) {
  // Goal: frames of one thread arrive in the order it queued them, however
  // the threads interleave, and none is lost when the socket is full.
  // Method: 8 threads queue 200 frames each of up to 8 KiB (12 MiB, far
  // more than the socket holds) while nobody reads, so inline senders find
  // the socket full and hand the queue to the io thread; the senders are
  // all done before the peer reads a byte, so only the io thread can write
  // the rest.
  std::atomic<uint64_t> writes{0};
  FrameWriter::Options options;
  options.writes = &writes;
  Open(std::move(options));
  constexpr int kThreads = 8;
  constexpr int kFramesPerThread = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kFramesPerThread; ++i) {
        std::string data(static_cast<size_t>((i * 997 + t * 131) % 8192), static_cast<char>(t));
        auto queued = writer_->Enqueue(MakeFrame(t * 1000 + i, absl::StrCat(t, " ", i), data),
                                       FrameWriter::Mode::kNow);
        EXPECT_NE(FrameWriter::Queued::kDropped, queued);
      }
    });
  }
  for (auto& t : threads) t.join();

  std::vector<format::Frame> frames = ReadFrames(kThreads * kFramesPerThread);
  ASSERT_EQ(static_cast<size_t>(kThreads * kFramesPerThread), frames.size());
  std::vector<int> next(kThreads, 0);
  for (const format::Frame& frame : frames) {
    std::vector<std::string> parts = absl::StrSplit(frame.message, ' ');
    ASSERT_EQ(2u, parts.size());
    int t = 0, i = 0;
    ASSERT_TRUE(absl::SimpleAtoi(parts[0], &t) && absl::SimpleAtoi(parts[1], &i));
    ASSERT_EQ(next[t], i) << "thread " << t;
    ++next[t];
    EXPECT_EQ(static_cast<uint64_t>(t * 1000 + i), frame.request_id);
    EXPECT_EQ(static_cast<size_t>((i * 997 + t * 131) % 8192), frame.data.size());
  }
  EXPECT_GT(writes.load(), 0u);
  EXPECT_LT(writes.load(), static_cast<uint64_t>(kThreads * kFramesPerThread));
  EXPECT_EQ(0, errors_.load());
}

TEST_F(FrameWriterTest, DeferredAndHeldFramesWaitForTheFlush) {
  // (a) kDefer queues without writing; the caller's Flush writes it.
  Open();
  EXPECT_EQ(FrameWriter::Queued::kFlushNeeded,
            writer_->Enqueue(MakeFrame(1, "deferred"), FrameWriter::Mode::kDefer));
  EXPECT_FALSE(PeerReadable());
  writer_->Flush();
  std::vector<format::Frame> frames = ReadFrames(1);
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ("deferred", frames[0].message);

  // (b) kHold also makes later frames, even kNow ones, queue behind it: a
  // ResponseBatch's replies and others' leave together, in order, at its
  // Flush.
  EXPECT_EQ(FrameWriter::Queued::kFlushNeeded,
            writer_->Enqueue(MakeFrame(2, "held"), FrameWriter::Mode::kHold));
  EXPECT_EQ(FrameWriter::Queued::kTaken,
            writer_->Enqueue(MakeFrame(3, "behind"), FrameWriter::Mode::kNow));
  EXPECT_EQ(FrameWriter::Queued::kTaken,
            writer_->Enqueue(MakeFrame(4, "held too"), FrameWriter::Mode::kHold));
  EXPECT_FALSE(PeerReadable());
  writer_->Flush();
  frames = ReadFrames(3);
  ASSERT_EQ(3u, frames.size());
  EXPECT_EQ("held", frames[0].message);
  EXPECT_EQ("behind", frames[1].message);
  EXPECT_EQ("held too", frames[2].message);
}

TEST_F(FrameWriterTest, FramesQueuedBeforeOpenLeaveAtOpen) {
  // A client queues requests while it connects; Open hands them to the io
  // thread.
  writer_ = std::make_unique<FrameWriter>(
      socket_, FrameWriter::Options{[](const absl::Status&) {}, nullptr, nullptr});
  EXPECT_EQ(FrameWriter::Queued::kTaken,
            writer_->Enqueue(MakeFrame(1, "early"), FrameWriter::Mode::kDefer));
  writer_->Flush();  // not open: nothing to do
  EXPECT_FALSE(PeerReadable());
  asio::post(io_, [this] { writer_->Open(owner_); });
  std::vector<format::Frame> frames = ReadFrames(1);
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ("early", frames[0].message);
}

TEST_F(FrameWriterTest, OpenAfterCloseStaysClosed) {
  // A server that stops as it accepts may close a connection before it
  // starts: the Close wins.
  writer_ = std::make_unique<FrameWriter>(
      socket_, FrameWriter::Options{[](const absl::Status&) {}, nullptr, nullptr});
  writer_->Enqueue(MakeFrame(1, "queued"), FrameWriter::Mode::kNow);
  writer_->Close();
  absl::Notification opened;
  asio::post(io_, [&] {
    writer_->Open(owner_);
    opened.Notify();
  });
  ASSERT_TRUE(opened.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(FrameWriter::Queued::kDropped,
            writer_->Enqueue(MakeFrame(2, "late"), FrameWriter::Mode::kNow));
  // A round trip through the io thread: nothing was handed to it either.
  absl::Notification drained;
  asio::post(io_, [&] { drained.Notify(); });
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_FALSE(PeerReadable());
}

TEST_F(FrameWriterTest, CloseWaitsForAnInlineSender) {
  // Goal: when Close returns, no thread is in a sendmsg on the descriptor,
  // so the owner may close it. Method: park an inline sender right before
  // its sendmsg; Close must not return until it is let go; its frame is
  // then whole on the wire, and later frames are dropped.
  absl::Notification parked, release;
  std::atomic<int> calls{0};
  FrameWriter::Options options;
  options.TEST_before_inline_send = [&] {
    if (calls.fetch_add(1) == 0) {
      parked.Notify();
      release.WaitForNotification();
    }
  };
  Open(std::move(options));
  std::thread sender([&] {
    EXPECT_EQ(FrameWriter::Queued::kTaken,
              writer_->Enqueue(MakeFrame(1, "in flight", std::string(1000, 'x')),
                               FrameWriter::Mode::kNow));
  });
  ASSERT_TRUE(parked.WaitForNotificationWithTimeout(kWaitDeadline));
  absl::Notification closed;
  std::thread closer([&] {
    writer_->Close();
    closed.Notify();
  });
  // A bounded look for a wrong early return; the release below ends it.
  EXPECT_FALSE(closed.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  release.Notify();
  ASSERT_TRUE(closed.WaitForNotificationWithTimeout(kWaitDeadline));
  sender.join();
  closer.join();
  EXPECT_EQ(FrameWriter::Queued::kDropped,
            writer_->Enqueue(MakeFrame(2, "late"), FrameWriter::Mode::kNow));
  std::vector<format::Frame> frames = ReadFrames(1);
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ("in flight", frames[0].message);
  EXPECT_FALSE(PeerReadable());
  EXPECT_EQ(0, errors_.load());
}

TEST_F(FrameWriterTest, NothingIsWrittenToTheDescriptorAfterClose) {
  // Goal: Close while threads keep sending. Method: 4 threads send until
  // told to stop; Close, then close the descriptor and put a file on its
  // number, as a reused fd would be; the senders go on for a while. Not a
  // byte may reach the file.
  Open();
  std::atomic<bool> stop{false};
  std::atomic<int> sent{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        writer_->Enqueue(MakeFrame(i, absl::StrCat(t, " ", i), std::string(512, 'w')),
                         FrameWriter::Mode::kNow);
        sent.fetch_add(1);
      }
    });
  }
  // The peer drains, so inline sends keep succeeding.
  std::thread drain([&] {
    char buf[65536];
    while (::read(peer_, buf, sizeof(buf)) > 0) {
    }
  });
  const absl::Time deadline = absl::Now() + kWaitDeadline;
  while (sent.load() < 2000 && absl::Now() < deadline) std::this_thread::yield();
  writer_->Close();
  // The owner closes the socket now, on its executor (which also cancels
  // an io-thread write still pending).
  int fd = -1;
  absl::Notification released;
  asio::post(io_, [&] {
    fd = socket_.release();
    released.Notify();
  });
  ASSERT_TRUE(released.WaitForNotificationWithTimeout(kWaitDeadline));
  ASSERT_EQ(0, ::close(fd));
  char path[] = "/tmp/frame_writer_test.XXXXXX";
  const int file = ::mkstemp(path);
  ASSERT_GE(file, 0);
  ::unlink(path);
  if (file != fd) {
    ASSERT_EQ(fd, ::dup2(file, fd));
  }
  const int before = sent.load();
  while (sent.load() < before + 2000 && absl::Now() < deadline) std::this_thread::yield();
  stop.store(true);
  for (auto& t : threads) t.join();
  struct stat st;
  ASSERT_EQ(0, ::fstat(fd, &st));
  EXPECT_EQ(0, st.st_size);
  ::close(fd);
  if (file != fd) ::close(file);
  ::shutdown(peer_, SHUT_RDWR);
  drain.join();
  EXPECT_EQ(0, errors_.load());
}

TEST_F(FrameWriterTest, FailedSendIsReportedOnceAndLaterFramesAreDropped) {
  Open();
  ::close(peer_);  // the peer is gone: the next sendmsg fails (EPIPE)
  peer_ = -1;
  EXPECT_EQ(FrameWriter::Queued::kTaken,
            writer_->Enqueue(MakeFrame(1, "lost"), FrameWriter::Mode::kNow));
  ASSERT_TRUE(error_seen_.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(absl::StatusCode::kUnavailable, error_.code());
  EXPECT_EQ(FrameWriter::Queued::kDropped,
            writer_->Enqueue(MakeFrame(2, "later"), FrameWriter::Mode::kNow));
  // A round trip through the io thread: no second report is queued.
  absl::Notification flushed;
  asio::post(io_, [&] { flushed.Notify(); });
  ASSERT_TRUE(flushed.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(1, errors_.load());
}

TEST_F(FrameWriterTest, ResetThenOpenServesANewConnection) {
  // A client's reconnect: Close, Reset (frames queue again), a new socket
  // on the same object, Open.
  Open();
  writer_->Close();
  absl::Notification swapped;
  int fds[2];
  ASSERT_EQ(0, ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
  asio::post(io_, [&] {
    asio::error_code ignored;
    socket_.close(ignored);
    socket_.assign(asio::generic::stream_protocol(AF_UNIX, 0), fds[0]);
    swapped.Notify();
  });
  ASSERT_TRUE(swapped.WaitForNotificationWithTimeout(kWaitDeadline));
  ::close(peer_);
  peer_ = fds[1];
  writer_->Reset();
  EXPECT_EQ(FrameWriter::Queued::kTaken,
            writer_->Enqueue(MakeFrame(1, "again"), FrameWriter::Mode::kDefer));
  asio::post(io_, [this] { writer_->Open(owner_); });
  std::vector<format::Frame> frames = ReadFrames(1);
  ASSERT_EQ(1u, frames.size());
  EXPECT_EQ("again", frames[0].message);
  EXPECT_EQ(0, errors_.load());
}

}  // namespace
}  // namespace logfs::rpc
