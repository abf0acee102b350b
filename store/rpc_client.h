// A client connection to one logfs server (meta or segd). Requests are
// multiplexed on one TCP connection by request id; responses may arrive in
// any order, and each completes its own call. The connection is opened on
// first use and re-opened on the next call after it breaks.
//
// Thread-safe: any thread may call. Callbacks run on an io thread of the
// io_context given at construction and must not block.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <asio.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/frame.h"
#include "store/frame_buffer.h"
#include "store/outgoing_frame.h"

namespace logfs::store {

class RpcClient : public std::enable_shared_from_this<RpcClient> {
 public:
  // `status` is OK and `response` the response frame on success. Errors:
  // kUnavailable (cannot connect, connection lost), kDeadlineExceeded
  // (no response within the call's timeout), or the server's error.
  using Callback = std::function<void(absl::Status status, Frame response)>;

  // `io` must outlive the client. `address` is "host:port".
  static std::shared_ptr<RpcClient> Create(asio::io_context& io, std::string address);
  ~RpcClient();

  // Sends one request; `done` runs exactly once.
  void AsyncCall(MessageType type, const google::protobuf::MessageLite& request,
                 std::string data, absl::Duration timeout, Callback done);
  // The same with a data section shared with other calls (the fan-out of
  // one append to every replica): kept alive, never copied, until sent.
  void AsyncCallShared(MessageType type, const google::protobuf::MessageLite& request,
                       std::shared_ptr<const std::string> data, absl::Duration timeout,
                       Callback done);

  // Blocking call: sends `request` (+`data`) and parses the response into
  // `response`; returns the response frame's data in `*response_data` if
  // given. Must not be called from an io thread of this client's io_context.
  absl::Status Call(MessageType type, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, absl::Duration timeout,
                    std::string data = {}, std::string* response_data = nullptr);

  const std::string& address() const { return address_; }

  // Closes the connection and fails every pending call with kUnavailable.
  void Shutdown();
  // Whether Shutdown was called (its calls fail for good, not for a while).
  bool is_shut_down() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return shutdown_;
  }

 private:
  struct Pending {
    Callback done;
    absl::Time deadline;
  };
  enum class State { kDisconnected, kConnecting, kConnected };

  RpcClient(asio::io_context& io, std::string address);
  void Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnConnected(asio::error_code ec);
  void ReadMore();
  void Drain(uint64_t generation);
  // Completes the response in header_/message_/data_; false if it was bad
  // (the connection is failed).
  bool OnResponse();
  bool IsCurrent(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  void WriteNext();
  void Fail(const absl::Status& status);
  void ArmTimer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnTimer();
  void Complete(uint64_t request_id, absl::Status status, Frame frame);
  void Send(MessageType type, std::shared_ptr<OutgoingFrame> out, absl::Duration timeout,
            Callback done);

  // Immutable after construction.
  asio::io_context& io_;
  const std::string address_;
  asio::strand<asio::io_context::executor_type> strand_;

  // Used only on strand_, except AsyncCall's inline send on the fd while
  // mu_ holds state_ at kConnected and writing_ false.
  asio::ip::tcp::socket socket_;
  asio::steady_timer timer_;
  FrameBuffer buffer_;
  char header_[kFrameHeaderBytes];
  FrameHeader decoded_;
  std::string message_;
  std::string data_;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kDisconnected;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t connection_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<OutgoingFrame>> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

// Converts an ErrorResponse frame body to a Status.
absl::Status StatusFromErrorFrame(const Frame& frame);

}  // namespace logfs::store
