// A server for logfs frames (docs/wire_format.md) on a TCP port and,
// optionally, a Unix stream socket next to it (ListenUnix: for clients on
// the same host; the same frames, handshake, limits and handlers). Each accepted
// connection reads frames in order and hands each request to the handler on
// the connection's io thread; the handler replies through a Responder,
// immediately or later from any thread. Responses may go out in any order.
//
// Bad frames (wrong magic, version, flags, oversized length, bad checksum,
// unknown type, truncated body) close that connection with a logged reason;
// other connections keep being served.
//
// With a ClusterKey, each accepted connection must pass the authentication
// handshake (store/rpc/handshake.h) within HandshakeLimits::timeout before
// any of its frames is read, and every frame must carry a good tag
// (frame_auth.h); otherwise it is closed with a logged reason (rate
// limited), and no request of it reaches the handler. A peer without a key
// gets one error frame (kUnauthenticated) that says so.
//
// Peers that have not authenticated cannot use up the server: handshakes
// in progress are capped in all and per peer address (HandshakeLimits; a
// connection past a cap is closed as soon as it is accepted), such a
// connection holds no read buffer yet, and when accept runs out of
// descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the server waits
// kAcceptBackoff before it accepts again instead of spinning.
#pragma once

#include <sys/types.h>

#include <asio.hpp>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/format/frame.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/handshake.h"
#include "store/rpc/stream_socket.h"

namespace logfs::rpc {

// How long accept waits after it failed for want of descriptors or memory.
inline constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);
// How long Stop waits for request handlers still running (they must not
// block for long: RequestHandler) before it gives up on them, logging.
inline constexpr absl::Duration kStopHandlersWait = absl::Seconds(10);

// The bounds on connections that have not authenticated yet.
struct HandshakeLimits {
  int in_progress_max = 64;                        // handshakes in progress, from all peers
  int per_peer_max = 8;  // from one IP address (TCP) or one process (Unix, SO_PEERCRED pid)
  absl::Duration timeout = kAuthHandshakeTimeout;  // for one handshake
};

class ServerConnection;

// Sends the one response to one request. Copyable handle; thread-safe.
// Replying twice is a bug (CHECK). A Responder dropped without a reply
// sends kInternal so the caller is never left waiting.
class Responder {
 public:
  Responder(std::shared_ptr<ServerConnection> conn, format::MessageType type, uint64_t request_id);

  // Where the frames of a Responder without a connection go: its one
  // response (flags has kFlagResponse, and kFlagError for an error body
  // from format::EncodeErrorBody). Called once, on the replying thread.
  using Sink = std::function<void(uint8_t flags, std::string message, std::string data)>;
  // A Responder that hands its response to `sink` instead of a socket: for
  // tests and fuzz targets (fuzz/) that call a request handler directly.
  Responder(Sink sink, format::MessageType type, uint64_t request_id);

  void Reply(const google::protobuf::MessageLite& response, std::string data = {}) const;
  void ReplyError(const absl::Status& status) const;

  uint64_t request_id() const { return state_->request_id; }

 private:
  struct State {
    void Send(uint8_t flags, std::string message, std::string data);
    std::shared_ptr<ServerConnection> conn;
    Sink sink;  // used when conn is null
    format::MessageType type;
    uint64_t request_id;
    std::atomic<bool> replied{false};
    ~State();
  };
  std::shared_ptr<State> state_;
};

// Holds back the responses this thread sends while it is in scope and, when
// the outermost one ends, writes each connection's held responses with one
// sendmsg: a group commit round that answers 8 appends of one client then
// costs one send (and one wake-up of the client) instead of 8. The reply
// side of group commit, as BookKeeper's journal hands a batch of acks to
// the network at once. Nests. Responses other threads send meanwhile on a
// connection with held responses queue behind them and go out in the same
// write, in order.
//
// Use only where the thread does not then wait for a peer: held responses
// are not on the wire until the scope ends.
class ResponseBatch {
 public:
  ResponseBatch();
  ~ResponseBatch();  // flushes if outermost
  ResponseBatch(const ResponseBatch&) = delete;
  ResponseBatch& operator=(const ResponseBatch&) = delete;
};

// Decides what to do with one request. Runs on an io thread; must not block
// for long (disk writes of one request are fine, waits on peers are not).
using RequestHandler = std::function<void(format::Frame request, Responder responder)>;

// Returns true for the request types this server serves; others close the
// connection as garbage.
using TypeFilter = std::function<bool(uint16_t type)>;

class RpcServer {
 public:
  // Does not take ownership of `io`, which must outlive the server.
  // Authenticates with the process's key (ProcessClusterKey()) unless
  // SetClusterKey says otherwise.
  RpcServer(asio::io_context& io, RequestHandler handler, TypeFilter filter);
  ~RpcServer();

  // Binds and listens on "host:port" (port 0 picks a free one).
  // kUnavailable with the reason when the address is busy or invalid.
  absl::Status Listen(const std::string& address);

  // Also listens on a Unix stream socket at `path`, served like the TCP
  // port (same handler, filter, key and HandshakeLimits). A stale socket
  // file at `path` is replaced; the new one gets mode `mode` (0600: only
  // this process's user and root may connect; a refused peer's connect
  // fails with EACCES, so a client falls back to TCP). Call after Listen,
  // at most once. kInvalidArgument for a path that does not fit a
  // sockaddr_un; kUnavailable with the reason when the file cannot be
  // made. Stop removes the file.
  absl::Status ListenUnix(const std::string& path, uint32_t mode = 0600);

  // "host:port" actually bound. Valid after Listen.
  std::string bound_address() const;
  // The Unix socket's path; empty without ListenUnix.
  const std::string& unix_path() const { return unix_path_; }

  // Stops accepting, closes every connection, waits for the handlers
  // running (at most kStopHandlersWait; never for one on the calling
  // thread) and calls none after it, and removes the Unix socket file if
  // ListenUnix made one and it is still that file (not one a newer server
  // made at the path since). Connections the io threads still hold touch
  // only state they share with the server, so it may be destroyed while
  // its io threads run. Idempotent.
  void Stop();

  // Called once, on an io thread, when an accepted connection closes, with
  // the id its requests carried in Frame::connection_id. Set before Listen.
  void SetConnectionClosedHandler(std::function<void(uint64_t connection_id)> handler) {
    core_->connection_closed = std::move(handler);
  }

  // The key connections must authenticate with (null: none). Set before
  // Listen.
  void SetClusterKey(ClusterKeyPtr key) { core_->key = std::move(key); }
  // The bounds on handshakes in progress (HandshakeLimits' defaults
  // unless set). Set before Listen; every field positive.
  void SetHandshakeLimits(HandshakeLimits limits);

  // Counters for tests and metrics.
  uint64_t bad_frames() const { return core_->bad_frames.load(); }
  // Connections closed for a failed handshake.
  uint64_t auth_failures() const { return core_->auth_failures.load(); }
  // Connections closed at accept because a HandshakeLimits cap was full.
  uint64_t handshakes_refused() const { return core_->handshakes_refused.load(); }
  // Handshakes in progress now. Thread-safe.
  int handshakes_in_progress();
  // Failed accepts (each logged, rate limited).
  uint64_t accept_errors() const { return core_->accept_errors.load(); }
  uint64_t responses() const { return core_->responses.load(); }
  // Connections accepted, and request frames read, on each transport.
  uint64_t connections_accepted(Transport transport) const {
    return transport == Transport::kUnix ? core_->unix_connections.load()
                                         : core_->tcp_connections.load();
  }
  uint64_t requests_read(Transport transport) const {
    return transport == Transport::kUnix ? core_->unix_requests.load()
                                         : core_->tcp_requests.load();
  }
  // Socket writes that carried responses: fewer than responses() when
  // ResponseBatch or a busy socket put several in one write.
  uint64_t response_writes() const { return core_->response_writes.load(); }
  // Test hook: what the server shares with its connections; it expires
  // once the server and every connection it accepted are gone.
  std::weak_ptr<const void> TEST_SharedState() const { return core_; }

 private:
  // One listening socket (the TCP port, the Unix socket) and its accept
  // loop's backoff timer.
  struct Listener {
    explicit Listener(asio::io_context& io) : acceptor(io), backoff(io) {}
    StreamAcceptor acceptor;
    asio::steady_timer backoff;
  };

  // What the server's connections use, shared with them: an io thread
  // may still run a closed connection's handlers (a handshake ending, a
  // read completing) after the server is gone, and they must then touch
  // nothing of it. Set up before Listen, then read-only but for the
  // counters, the handshake slots and the dispatch gate.
  struct Core {
    RequestHandler handler;
    TypeFilter filter;
    ClusterKeyPtr key;
    HandshakeLimits limits;
    std::function<void(uint64_t)> connection_closed;
    std::atomic<uint64_t> bad_frames{0};
    std::atomic<uint64_t> auth_failures{0};
    std::atomic<uint64_t> handshakes_refused{0};
    std::atomic<uint64_t> accept_errors{0};
    std::atomic<uint64_t> responses{0};
    std::atomic<uint64_t> response_writes{0};
    std::atomic<uint64_t> tcp_connections{0};
    std::atomic<uint64_t> unix_connections{0};
    std::atomic<uint64_t> tcp_requests{0};
    std::atomic<uint64_t> unix_requests{0};
    std::atomic<uint64_t> next_connection_id{1};

    absl::Mutex mu;
    std::vector<std::weak_ptr<ServerConnection>> connections ABSL_GUARDED_BY(mu);
    bool stopped ABSL_GUARDED_BY(mu) = false;
    int handshakes ABSL_GUARDED_BY(mu) = 0;
    // Handshakes in progress by peer IP address; no zero entries.
    absl::flat_hash_map<std::string, int> handshakes_by_peer ABSL_GUARDED_BY(mu);

    // Requests go to `handler`, and closes to `connection_closed`, only
    // while serving; Stop ends that and waits for those running
    // (StopDispatch).
    absl::Mutex dispatch_mu ABSL_ACQUIRED_AFTER(mu);
    bool serving ABSL_GUARDED_BY(dispatch_mu) = true;
    int dispatching ABSL_GUARDED_BY(dispatch_mu) = 0;

    // Takes a handshake slot for a peer at `ip`; false if a cap is full.
    bool TakeHandshakeSlotLocked(const std::string& ip) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
    // Gives back the slot of a handshake that ended.
    void EndHandshake(const std::string& ip) ABSL_LOCKS_EXCLUDED(mu);
    // Runs `fn` (a call of `handler` or `connection_closed`, which reach
    // the server's owner) unless the server stopped; false then.
    bool WhileServing(const std::function<void()>& fn) ABSL_LOCKS_EXCLUDED(dispatch_mu);
    // No handler runs from here on: waits (bounded) for those running,
    // but one on the calling thread (a handler that stops its server).
    void StopDispatch() ABSL_LOCKS_EXCLUDED(dispatch_mu);
  };

  void Accept(Listener* listener);
  // A failed accept: accepts again, after kAcceptBackoff if the process
  // is out of descriptors or memory.
  void OnAcceptError(Listener* listener, asio::error_code ec);
  // Serves an accepted socket, or closes it if the server stopped or a
  // handshake cap is full.
  void Admit(StreamSocket socket);

  asio::io_context& io_;
  const std::shared_ptr<Core> core_ = std::make_shared<Core>();
  Listener tcp_;
  Listener unix_;                            // open after ListenUnix
  std::string unix_path_;                    // set by ListenUnix
  std::pair<dev_t, ino_t> unix_file_{0, 0};  // the socket file ListenUnix made
  // Expires with the server: a backoff wait that fired just before Stop
  // closed the acceptor finds it gone and does not touch the server.
  std::shared_ptr<char> alive_ = std::make_shared<char>();
  friend class ServerConnection;
};

}  // namespace logfs::rpc
