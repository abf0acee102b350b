#include "store/rpc/rpc_server.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "src/util/log_rate_limit.h"
#include "store/format/error_codec.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/frame_reader.h"
#include "store/rpc/frame_writer.h"
#include "store/rpc/handshake.h"
#include "store/rpc/outgoing_frame.h"
#include "store/rpc/unix_socket.h"

namespace logfs::rpc {

namespace {
// The connections with responses held by this thread's ResponseBatch.
struct HeldResponses {
  int depth = 0;
  std::vector<std::shared_ptr<ServerConnection>> connections;
};
thread_local HeldResponses held_responses;
}  // namespace

// One accepted connection: a FrameReader loop and a FrameWriter.
class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(std::shared_ptr<RpcServer::Core> core, StreamSocket socket, std::string peer)
      : core_(std::move(core)),
        id_(core_->next_connection_id.fetch_add(1)),
        socket_(std::move(socket)),
        transport_(TransportOf(socket_)),
        peer_(std::move(peer)),
        reader_([core = core_.get()](const format::FrameHeader& h) {
          return CheckRequest(*core, h);
        }),
        writer_(socket_, WriterOptions()) {
    if (transport_ == Transport::kTcp) {
      asio::error_code ec;
      socket_.set_option(asio::ip::tcp::no_delay(true), ec);
    }
  }

  // Call on the socket's executor, once. With a key, the caller took a
  // handshake slot for `peer_ip`, which this gives back when the
  // handshake ends.
  void Start(std::string peer_ip) {
    if (core_->key == nullptr) return Serve(AuthSession());
    AsyncServerHandshake(socket_, core_->key, peer_, core_->limits.timeout,
                         [self = shared_from_this(), peer_ip](absl::StatusOr<AuthSession> session) {
                           self->core_->EndHandshake(peer_ip);
                           if (!session.ok()) {
                             self->core_->auth_failures.fetch_add(1);
                             // Rate limited: unauthenticated peers choose how often this is.
                             LOGFS_LOG_EVERY_MS(WARNING, 1000)
                                 << "closing connection from " << self->peer_ << ": "
                                 << session.status().message();
                             self->Close("");
                             return;
                           }
                           self->Serve(std::move(*session));
                         });
  }

  // Sends a response from any thread: inline if the socket is idle (usually
  // all of it, with no io thread wake-up), held for this thread's
  // ResponseBatch if one is in scope, else behind the current writer.
  void Send(uint8_t flags, format::MessageType type, uint64_t request_id, std::string message,
            std::string data) {
    auto out = std::make_shared<OutgoingFrame>();
    out->message = std::move(message);
    out->data = std::move(data);
    format::EncodeFrameHeader(flags, type, request_id, out->message, out->data, out->header);
    if (closed_.load()) return;
    // Counted before it leaves: a peer that has the answer sees it counted.
    core_->responses.fetch_add(1, std::memory_order_relaxed);
    const bool hold = held_responses.depth > 0;
    const FrameWriter::Queued queued =
        writer_.Enqueue(std::move(out), hold ? FrameWriter::Mode::kHold : FrameWriter::Mode::kNow);
    // Held: other senders queue behind it until the batch flushes.
    if (queued == FrameWriter::Queued::kFlushNeeded) {
      held_responses.connections.push_back(shared_from_this());
    }
  }

  // Writes the responses held by a ResponseBatch.
  void Flush() { writer_.Flush(); }

  void Close(const std::string& reason) {
    if (closed_.exchange(true)) return;
    writer_.Close();  // returns once no thread is in a sendmsg on the socket
    if (!reason.empty()) LOG(WARNING) << "closing connection from " << peer_ << ": " << reason;
    if (core_->connection_closed) core_->WhileServing([this] { core_->connection_closed(id_); });
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      asio::error_code ec;
      self->socket_.shutdown(StreamSocket::shutdown_both, ec);
      self->socket_.close(ec);
    });
  }

 private:
  FrameWriter::Options WriterOptions() {
    FrameWriter::Options options;
    // A failed send may have cut a frame: the stream is done for.
    options.on_error = [this](const absl::Status&) { Close(""); };
    options.writes = &core_->response_writes;
    return options;
  }

  // Starts the read loop, and the writer, tagging frames if `session` is
  // set (an authenticated connection).
  void Serve(AuthSession session) {
    writer_.Open(weak_from_this(), std::move(session.send));
    reader_.SetMac(std::move(session.receive));
    ReadMore();
  }

  static absl::Status CheckRequest(const RpcServer::Core& core, const format::FrameHeader& header) {
    if ((header.flags & format::kFlagResponse) != 0) {
      return absl::InvalidArgumentError("response frame sent to a server");
    }
    if (!core.filter(header.type)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown message type ", header.type));
    }
    return absl::OkStatus();
  }

  void ReadMore() {
    reader_.AsyncRead(socket_, [self = shared_from_this()](asio::error_code ec) {
      if (ec) {
        const bool truncated = ec == asio::error::eof && self->reader_.in_body();
        self->Close(truncated ? "truncated frame body" : "");
        return;
      }
      self->Drain();
    });
  }

  // Serves every whole frame read, then reads again.
  void Drain() {
    for (;;) {
      if (closed_.load()) return;  // the server stopped, or the peer broke a frame
      auto frame = reader_.Next();
      if (!frame.ok()) return BadFrame(frame.status());
      if (!frame->has_value()) break;
      Dispatch(std::move(**frame));
    }
    ReadMore();
  }

  void Dispatch(format::Frame frame) {
    (transport_ == Transport::kUnix ? core_->unix_requests : core_->tcp_requests)
        .fetch_add(1, std::memory_order_relaxed);
    frame.connection_id = id_;
    // A later request of this connection came in the same read, whole: the
    // handler sees it next, on this thread, in this loop.
    frame.more_buffered = reader_.HasWholeFrame();
    frame.more_bytes_buffered = reader_.HasBufferedBytes();
    Responder responder(shared_from_this(), frame.type, frame.request_id);
    // Not served once the server stopped: the Responder, dropped, answers
    // kInternal (on a closed connection: nowhere).
    core_->WhileServing([&] { core_->handler(std::move(frame), std::move(responder)); });
  }

  void BadFrame(const absl::Status& reason) {
    core_->bad_frames.fetch_add(1);
    if (absl::IsUnauthenticated(reason) && core_->key == nullptr) {
      // A hello: the peer has a secret and this server none. Answer with a
      // plain frame, so that its handshake fails saying so.
      Send(format::kFlagResponse | format::kFlagError, format::MessageType::kInvalid, 0,
           format::EncodeErrorBody(reason), {});
    }
    Close(absl::StrCat("bad frame: ", reason.message()));
  }

  // Immutable after construction.
  const std::shared_ptr<RpcServer::Core> core_;
  const uint64_t id_;
  // Used on the connection's strand, except the writer's inline sendmsgs
  // on its descriptor (Close waits for them before the socket closes).
  StreamSocket socket_;
  const Transport transport_;
  const std::string peer_;
  // Owned by the read loop (one read at a time).
  FrameReader reader_;
  // Internally synchronized.
  FrameWriter writer_;
  std::atomic<bool> closed_{false};
};

ResponseBatch::ResponseBatch() { ++held_responses.depth; }

ResponseBatch::~ResponseBatch() {
  if (--held_responses.depth > 0) return;
  // Take the list first: a Flush that closes its connection runs the
  // server's close handler, which may send (and hold) again.
  std::vector<std::shared_ptr<ServerConnection>> connections;
  connections.swap(held_responses.connections);
  // Each connection is listed once: its first held response holds its
  // writer, and later ones queue behind it without listing it again.
  for (const auto& connection : connections) connection->Flush();
}

Responder::Responder(std::shared_ptr<ServerConnection> conn, format::MessageType type,
                     uint64_t request_id)
    : state_(std::make_shared<State>()) {
  state_->conn = std::move(conn);
  state_->type = type;
  state_->request_id = request_id;
}

Responder::Responder(Sink sink, format::MessageType type, uint64_t request_id)
    : state_(std::make_shared<State>()) {
  state_->sink = std::move(sink);
  state_->type = type;
  state_->request_id = request_id;
}

void Responder::State::Send(uint8_t flags, std::string message, std::string data) {
  if (conn != nullptr) {
    conn->Send(flags, type, request_id, std::move(message), std::move(data));
  } else {
    sink(flags, std::move(message), std::move(data));
  }
}

Responder::State::~State() {
  if (!replied.load()) {
    Send(format::kFlagResponse | format::kFlagError,
         format::EncodeErrorBody(absl::InternalError("request dropped without a reply")), {});
  }
}

void Responder::Reply(const google::protobuf::MessageLite& response, std::string data) const {
  const size_t message_bytes = response.ByteSizeLong();
  if (message_bytes > format::kMaxMessageBytes || data.size() > format::kMaxDataBytes) {
    // The peer would close the connection on such a frame, failing every
    // call on it; fail only this one. A bound in store/format/limits.h is missing.
    absl::Status too_big = absl::InternalError(
        absl::StrCat("response to message type ", static_cast<int>(state_->type), " of ",
                     message_bytes, " + ", data.size(), " bytes exceeds the frame limit"));
    LOG(ERROR) << too_big;
    ReplyError(too_big);
    return;
  }
  CHECK(!state_->replied.exchange(true)) << "replied twice";
  state_->Send(format::kFlagResponse, response.SerializeAsString(), std::move(data));
}

void Responder::ReplyError(const absl::Status& status) const {
  CHECK(!status.ok());
  CHECK(!state_->replied.exchange(true)) << "replied twice";
  state_->Send(format::kFlagResponse | format::kFlagError, format::EncodeErrorBody(status), {});
}

RpcServer::RpcServer(asio::io_context& io, RequestHandler handler, TypeFilter filter)
    : io_(io), tcp_(io), unix_(io) {
  core_->handler = std::move(handler);
  core_->filter = std::move(filter);
  core_->key = ProcessClusterKey();
}

RpcServer::~RpcServer() { Stop(); }

absl::Status RpcServer::Listen(const std::string& address) {
  auto endpoint = ParseEndpoint(address);
  if (!endpoint.ok()) return endpoint.status();
  const StreamEndpoint generic(*endpoint);
  asio::error_code ec;
  tcp_.acceptor.open(generic.protocol(), ec);
  if (!ec) tcp_.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) tcp_.acceptor.bind(generic, ec);
  if (!ec) tcp_.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", ec.message()));
  }
  Accept(&tcp_);
  return absl::OkStatus();
}

absl::Status RpcServer::ListenUnix(const std::string& path, uint32_t mode) {
  CHECK(unix_path_.empty()) << "ListenUnix twice";
  auto endpoint = UnixEndpoint(path);
  if (!endpoint.ok()) return endpoint.status();
  // A socket file left by a process that died is in the way of bind and
  // goes. Anything else at the path stays and the listen fails, as on a
  // busy TCP port: a file that is not a socket (a mistyped path), or a
  // socket a live server accepts on (two servers given one path would
  // otherwise both name it, and calls meant for one would reach the other).
  if (struct stat existing; ::lstat(path.c_str(), &existing) == 0) {
    if (!S_ISSOCK(existing.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot listen on ", path, ": a file that is not a socket is there"));
    }
    if (ConnectUnix(path, absl::Seconds(1)).ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot listen on ", path, ": another server listens there"));
    }
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::UnavailableError(
          absl::StrCat("cannot remove stale socket ", path, ": ", std::strerror(errno)));
    }
  }
  asio::error_code ec;
  unix_.acceptor.open(endpoint->protocol(), ec);
  if (!ec) unix_.acceptor.bind(*endpoint, ec);
  // chmod follows the path: the directory must not be writable by others
  // (a data or run dir), as for the short-circuit socket.
  if (!ec && ::chmod(path.c_str(), mode) != 0) ec.assign(errno, asio::error::get_system_category());
  if (!ec) unix_.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    asio::error_code ignored;
    unix_.acceptor.close(ignored);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", ec.message()));
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) unix_file_ = {st.st_dev, st.st_ino};
  unix_path_ = path;
  Accept(&unix_);
  return absl::OkStatus();
}

std::string RpcServer::bound_address() const {
  asio::error_code ec;
  const StreamEndpoint ep = tcp_.acceptor.local_endpoint(ec);
  if (ec) return "";
  asio::ip::tcp::endpoint tcp;
  if (ep.size() > tcp.capacity()) return "";
  std::memcpy(tcp.data(), ep.data(), ep.size());
  tcp.resize(ep.size());
  return absl::StrCat(tcp.address().to_string(), ":", tcp.port());
}

void RpcServer::Stop() {
  std::vector<std::weak_ptr<ServerConnection>> connections;
  {
    absl::MutexLock lock(&core_->mu);
    if (core_->stopped) return;
    core_->stopped = true;
    connections.swap(core_->connections);
  }
  // The acceptor is closed on its own executor so it never races the accept
  // handler; if the io threads are already gone, close it here.
  // Shared, not on this stack: if the wait times out the post may run later.
  auto closed = std::make_shared<absl::Notification>();
  auto close_listeners = [this] {
    for (Listener* listener : {&tcp_, &unix_}) {
      asio::error_code ec;
      listener->acceptor.close(ec);
      listener->backoff.cancel();
    }
  };
  asio::post(io_, [close_listeners, closed] {
    close_listeners();
    closed->Notify();
  });
  if (!closed->WaitForNotificationWithTimeout(absl::Seconds(2))) close_listeners();
  // Only the file this server made: a server started since on the same
  // path (a restart that overlapped this stop) keeps its socket.
  struct stat st;
  if (!unix_path_.empty() && ::stat(unix_path_.c_str(), &st) == 0 &&
      std::make_pair(st.st_dev, st.st_ino) == unix_file_) {
    ::unlink(unix_path_.c_str());
  }
  for (auto& weak : connections) {
    if (auto conn = weak.lock()) conn->Close("");  // a normal shutdown: nothing to log
  }
  core_->StopDispatch();
}

void RpcServer::SetHandshakeLimits(HandshakeLimits limits) {
  CHECK_GT(limits.in_progress_max, 0);
  CHECK_GT(limits.per_peer_max, 0);
  CHECK_GT(limits.timeout, absl::ZeroDuration());
  core_->limits = limits;
}

int RpcServer::handshakes_in_progress() {
  absl::MutexLock lock(&core_->mu);
  return core_->handshakes;
}

bool RpcServer::Core::TakeHandshakeSlotLocked(const std::string& ip) {
  if (handshakes >= limits.in_progress_max) return false;
  int& from_peer = handshakes_by_peer[ip];  // per_peer_max > 0: never left at 0
  if (from_peer >= limits.per_peer_max) return false;
  ++from_peer;
  ++handshakes;
  return true;
}

void RpcServer::Core::EndHandshake(const std::string& ip) {
  absl::MutexLock lock(&mu);
  auto it = handshakes_by_peer.find(ip);
  CHECK(it != handshakes_by_peer.end() && it->second > 0) << ip;
  if (--it->second == 0) handshakes_by_peer.erase(it);
  CHECK_GT(handshakes--, 0);
}

namespace {
// The server whose handler this thread is running (null: none), so that a
// handler that stops its own server does not wait for itself.
thread_local const void* t_dispatching_core = nullptr;
}  // namespace

bool RpcServer::Core::WhileServing(const std::function<void()>& fn) {
  {
    absl::MutexLock lock(&dispatch_mu);
    if (!serving) return false;
    ++dispatching;
  }
  const void* outer = t_dispatching_core;
  t_dispatching_core = this;
  fn();
  t_dispatching_core = outer;
  absl::MutexLock lock(&dispatch_mu);
  --dispatching;
  return true;
}

void RpcServer::Core::StopDispatch() {
  absl::MutexLock lock(&dispatch_mu);
  serving = false;
  const int own = t_dispatching_core == this ? 1 : 0;
  auto idle = [this, own]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(dispatch_mu) {
    return dispatching <= own;
  };
  if (!dispatch_mu.AwaitWithTimeout(absl::Condition(&idle), kStopHandlersWait)) {
    LOG(ERROR) << dispatching - own << " request handlers still running "
               << absl::FormatDuration(kStopHandlersWait) << " after the server stopped";
  }
}

void RpcServer::Accept(Listener* listener) {
  // Each connection's socket runs on its own strand, so its read loop, write
  // loop and close never run at once even with many io threads.
  listener->acceptor.async_accept(asio::make_strand(io_),
                                  [this, listener](asio::error_code ec, StreamSocket socket) {
                                    if (ec == asio::error::operation_aborted) return;  // stopped
                                    if (ec) return OnAcceptError(listener, ec);
                                    Admit(std::move(socket));
                                    Accept(listener);
                                  });
}

void RpcServer::OnAcceptError(Listener* listener, asio::error_code ec) {
  core_->accept_errors.fetch_add(1);
  LOGFS_LOG_EVERY_MS(WARNING, 1000)
      << "accept on " << (listener == &unix_ ? unix_path_ : bound_address())
      << " failed: " << ec.message();
  if (!listener->acceptor.is_open()) return;
  const int error = ec.category() == asio::error::get_system_category() ? ec.value() : 0;
  if (error != EMFILE && error != ENFILE && error != ENOBUFS && error != ENOMEM) {
    return Accept(listener);
  }
  // Accepting again at once would fail again at once: the connection stays
  // in the listen queue until descriptors or memory free up.
  listener->backoff.expires_after(absl::ToChronoMilliseconds(kAcceptBackoff));
  listener->backoff.async_wait(
      [this, listener, alive = std::weak_ptr<char>(alive_)](asio::error_code ec) {
        if (ec || alive.expired()) return;  // cancelled by Stop, or the server is gone
        if (listener->acceptor.is_open()) Accept(listener);
      });
}

void RpcServer::Admit(StreamSocket socket) {
  const Transport transport = TransportOf(socket);
  (transport == Transport::kUnix ? core_->unix_connections : core_->tcp_connections).fetch_add(1);
  PeerName peer = PeerNameOf(socket);
  const std::string& ip = peer.ip;
  Core& core = *core_;
  const bool handshake = core.key != nullptr;
  std::shared_ptr<ServerConnection> conn;
  {
    absl::MutexLock lock(&core.mu);
    // Drop entries of closed connections so the list stays bounded.
    core.connections.erase(std::remove_if(core.connections.begin(), core.connections.end(),
                                          [](const auto& w) { return w.expired(); }),
                           core.connections.end());
    if (core.stopped) return;  // `socket` closes as it goes
    if (handshake && !core.TakeHandshakeSlotLocked(ip)) {
      core.handshakes_refused.fetch_add(1);
      const auto from_peer = core.handshakes_by_peer.find(ip);
      LOGFS_LOG_EVERY_MS(WARNING, 1000)
          << "closing connection from " << ip << " at once: " << core.handshakes
          << " authentication handshakes in progress, "
          << (from_peer == core.handshakes_by_peer.end() ? 0 : from_peer->second)
          << " from it (caps " << core.limits.in_progress_max << ", " << core.limits.per_peer_max
          << ")";
      return;  // `socket` closes as it goes
    }
    conn = std::make_shared<ServerConnection>(core_, std::move(socket), peer.name);
    core.connections.push_back(conn);
  }
  conn->Start(ip);
}

}  // namespace logfs::rpc
