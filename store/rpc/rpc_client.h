// A client connection to one logfs server (meta or segd). Requests are
// multiplexed on one connection by request id; responses may arrive in
// any order, and each completes its own call. The connection is opened on
// first use and re-opened on the next call after it breaks.
//
// The connection is TCP to the server's "host:port", or, when the client
// knows the server's Unix socket (a server on this host: Options::
// unix_socket_path, SetUnixSocketPath), a Unix stream socket with the same
// frames, handshake and timeouts. A Unix connect that fails, for any
// reason (no such file, refused, EACCES, ...), falls back to TCP for that
// connection, logged once per client; the next connection tries the Unix
// socket again.
//
// A call's frame is written by the connection's FrameWriter: from the
// caller's thread when the socket is idle (no io thread wake-up), with no
// lock held across the sendmsg; frames queued meanwhile by other callers
// leave in the same gathered write. Responses are read by a FrameReader.
//
// With a ClusterKey, each connection first runs the authentication
// handshake (store/rpc/handshake.h) and then tags and checks every frame
// (frame_auth.h); a failed handshake fails the waiting calls with
// kUnauthenticated (not retried by callers: it lasts until the
// configuration changes) and is logged.
//
// A connection that is not connected and authenticated within
// Options::connect_timeout (a peer black-holed after the TCP connect, or a
// SYN that gets no answer) fails its waiting calls with kUnavailable (or
// kDeadlineExceeded if theirs ran out first) and the next call opens a new
// one.
//
// Thread-safe: any thread may call. Callbacks run on an io thread of the
// io_context given at construction and must not block.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/format/frame.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/frame_reader.h"
#include "store/rpc/frame_writer.h"
#include "store/rpc/handshake.h"
#include "store/rpc/outgoing_frame.h"
#include "store/rpc/stream_socket.h"

namespace logfs::rpc {

class CallBatch;

class RpcClient : public std::enable_shared_from_this<RpcClient> {
 public:
  // `status` is OK and `response` the response frame on success. Errors:
  // kUnavailable (cannot connect, connection lost), kDeadlineExceeded
  // (no response within the call's timeout), or the server's error.
  using Callback = std::function<void(absl::Status status, format::Frame response)>;

  struct Options {
    // Null: connections are not authenticated (the peer must have no key
    // either).
    ClusterKeyPtr key;
    // How long one connection may take from its connect (Unix, then TCP
    // after a fallback) to the end of its authentication handshake (both,
    // without a key: the connect) before it is given up. Positive.
    absl::Duration connect_timeout = kAuthHandshakeTimeout;
    // The server's Unix stream socket on this host (RpcServer::ListenUnix),
    // tried before TCP at every connect; empty: TCP only.
    std::string unix_socket_path;
  };

  // `io` must outlive the client. `address` is "host:port" (SplitHostPort):
  // a host name is resolved again at every connect, within
  // connect_timeout, and each of its addresses tried in turn; one that
  // does not resolve fails the waiting calls with kUnavailable.
  static std::shared_ptr<RpcClient> Create(asio::io_context& io, std::string address,
                                           Options options);
  // The same with `key` and the default connect_timeout.
  static std::shared_ptr<RpcClient> Create(asio::io_context& io, std::string address,
                                           ClusterKeyPtr key);
  // The same with the process's key (ProcessClusterKey()).
  static std::shared_ptr<RpcClient> Create(asio::io_context& io, std::string address) {
    return Create(io, std::move(address), ProcessClusterKey());
  }
  ~RpcClient();

  // Sends one request; `done` runs exactly once. With a `batch`, the
  // request is queued in call order and this thread does not write it: the
  // batch's Flush does, unless another writer of this connection (another
  // caller's Flush, the io thread, a connect) takes it first. `done` may
  // still run before the Flush (shutdown, deadline).
  void AsyncCall(format::MessageType type, const google::protobuf::MessageLite& request,
                 std::string data, absl::Duration timeout, Callback done,
                 CallBatch* batch = nullptr);
  // The same with a data section shared with other calls (the fan-out of
  // one append to every replica): kept alive, never copied, until sent.
  void AsyncCallShared(format::MessageType type, const google::protobuf::MessageLite& request,
                       std::shared_ptr<const std::string> data, absl::Duration timeout,
                       Callback done, CallBatch* batch = nullptr);

  // Writes the queued requests unless another thread is writing them
  // (FrameWriter::Flush): gathered sendmsgs from this thread (no lock held
  // across them) until the queue is empty, the socket is full, or a few
  // passes are done; the io thread writes what is left. Any thread may
  // call, io threads included. Never blocks; a failed send fails the
  // connection, and the calls learn it through their callbacks
  // (kUnavailable). While a caller's sendmsg is in progress, a Fail() on
  // the io thread waits for it to return before it closes the socket.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocking call: sends `request` (+`data`) and parses the response into
  // `response`; returns the response frame's data in `*response_data` if
  // given. Must not be called from an io thread of this client's io_context.
  absl::Status Call(format::MessageType type, const google::protobuf::MessageLite& request,
                    google::protobuf::MessageLite* response, absl::Duration timeout,
                    std::string data = {}, std::string* response_data = nullptr);

  const std::string& address() const { return address_; }

  // Sets the Unix socket that connections from now on try first (empty:
  // TCP only). A connection open already keeps its transport until it
  // breaks. Thread-safe.
  void SetUnixSocketPath(std::string path) ABSL_LOCKS_EXCLUDED(mu_);

  // Connections made (connected, before any handshake) on `transport`,
  // and Unix connects that failed and fell back to TCP. Thread-safe.
  uint64_t connects(Transport transport) const {
    return transport == Transport::kUnix ? unix_connects_.load() : tcp_connects_.load();
  }
  uint64_t unix_fallbacks() const { return unix_fallbacks_.load(); }

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

  RpcClient(asio::io_context& io, std::string address, Options options);
  FrameWriter::Options WriterOptions();
  void Connect() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts connection `generation`'s connect timer and its connect: to
  // the Unix socket if one is set, else over TCP. On strand_.
  void StartConnect(uint64_t generation);
  // Connects connection `generation` over TCP (resolving a host name).
  // On strand_.
  void ConnectTcp(uint64_t generation);
  // The Unix connect ended: go on, or fall back to TCP. On strand_.
  void OnUnixConnected(asio::error_code ec, const std::string& path, uint64_t generation);
  void OnConnected(asio::error_code ec, uint64_t generation);
  // Fails connection `generation` if it is still connecting. On strand_.
  void OnConnectTimeout(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // The connection is usable (authenticated if `session` is set): opens
  // the writer and starts reading. On strand_.
  void StartConnection(uint64_t generation, AuthSession session);
  // The read loop of connection `generation`, on strand_.
  void ReadMore(uint64_t generation);
  void Drain(uint64_t generation);
  bool IsCurrent(uint64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the connection: every pending call gets `status`. On strand_.
  void Fail(const absl::Status& status) ABSL_LOCKS_EXCLUDED(mu_);
  void ArmTimer() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnTimer();
  void Complete(uint64_t request_id, absl::Status status, format::Frame frame);
  void Send(format::MessageType type, std::shared_ptr<OutgoingFrame> out, absl::Duration timeout,
            Callback done, CallBatch* batch);

  // Immutable after construction.
  asio::io_context& io_;
  const std::string address_;
  const ClusterKeyPtr key_;  // null: not authenticated
  const absl::Duration connect_timeout_;
  asio::strand<asio::io_context::executor_type> strand_;

  // Used only on strand_, except the writer's inline sendmsgs on its
  // descriptor from callers' threads (Fail() closes the writer, which waits
  // for them, before it closes the socket).
  StreamSocket socket_;
  asio::steady_timer timer_;
  asio::steady_timer connect_timer_;  // the connection in kConnecting
  asio::ip::tcp::resolver resolver_;  // a host name's lookup in kConnecting
  bool resolving_ = false;            // a lookup is in flight; on strand_
  uint64_t resolve_for_ = 0;          // the connection it is for; on strand_
  FrameReader reader_;

  // Counters (connects, unix_fallbacks); the flag makes the fallback's log
  // line a once-per-client one.
  std::atomic<uint64_t> tcp_connects_{0};
  std::atomic<uint64_t> unix_connects_{0};
  std::atomic<uint64_t> unix_fallbacks_{0};
  std::atomic<bool> fallback_logged_{false};

  // Internally synchronized; locked after mu_ (requests queue under mu_).
  FrameWriter writer_;

  absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kDisconnected;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t connection_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool timer_armed_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::string unix_socket_path_ ABSL_GUARDED_BY(mu_);  // empty: TCP only
};

// Requests queued under a caller's own lock, so that they keep its order,
// and written once the caller has released it: Flush (or the destructor)
// calls RpcClient::Flush on each connection the batch queued a request on,
// so requests queued together leave in gathered writes. A FileWriter fans
// an append out to its replicas this way, so that neither the io thread
// (answers) nor other writers wait on its lock during the sends. The owner
// must flush before it waits for an answer to a request of the batch.
// Not thread-safe: owned by one thread, usually on its stack.
class CallBatch {
 public:
  CallBatch() = default;
  CallBatch(const CallBatch&) = delete;
  CallBatch& operator=(const CallBatch&) = delete;
  ~CallBatch();

  // Flushes every connection the batch queued a request on since the last
  // Flush.
  void Flush();

 private:
  friend class RpcClient;
  // Remembers a connection with a queued request of this batch.
  void Add(std::shared_ptr<RpcClient> client);

  std::vector<std::shared_ptr<RpcClient>> clients_;
};

// Converts an ErrorResponse frame body to a Status, marked as the
// server's answer (IsServerAnswer).
absl::Status StatusFromErrorFrame(const format::Frame& frame);

// Whether a failed call's status is the server's own answer (an error
// frame), as opposed to a failure of the transport (kUnavailable: cannot
// connect, connection lost, client shut down; kDeadlineExceeded: no answer
// in time), after which the request may or may not have been applied.
// Survives copies of the status, not a rewrap into a new one.
bool IsServerAnswer(const absl::Status& status);

}  // namespace logfs::rpc
