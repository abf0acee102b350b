#include "store/rpc/rpc_server.h"

#include <glog/logging.h>

#include <algorithm>
#include <deque>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "store/format/error_codec.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/frame_buffer.h"
#include "store/rpc/outgoing_frame.h"

namespace logfs::rpc {

namespace {
// The connections with responses held by this thread's ResponseBatch.
struct HeldResponses {
  int depth = 0;
  std::vector<std::shared_ptr<ServerConnection>> connections;
};
thread_local HeldResponses held_responses;
}  // namespace

// One accepted connection: a read loop and a queue of outgoing frames.
class ServerConnection : public std::enable_shared_from_this<ServerConnection> {
 public:
  ServerConnection(RpcServer* server, asio::ip::tcp::socket socket)
      : server_(server), id_(server->next_connection_id_.fetch_add(1)), socket_(std::move(socket)) {
    asio::error_code ec;
    auto remote = socket_.remote_endpoint(ec);
    peer_ = ec ? "?" : absl::StrCat(remote.address().to_string(), ":", remote.port());
    socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  }

  void Start() { ReadMore(); }

  void Send(uint8_t flags, format::MessageType type, uint64_t request_id, std::string message,
            std::string data) {
    auto out = std::make_shared<OutgoingFrame>();
    out->message = std::move(message);
    out->data = std::move(data);
    format::EncodeFrameHeader(flags, type, request_id, out->message, out->data, out->header);
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    server_->responses_.fetch_add(1, std::memory_order_relaxed);
    if (writing_) {
      queue_.push_back(std::move(out));
      return;
    }
    if (held_responses.depth > 0) {
      // Held for this thread's ResponseBatch; writing_ makes other senders
      // queue behind it until Flush.
      queue_.push_back(std::move(out));
      writing_ = true;
      held_responses.connections.push_back(shared_from_this());
      return;
    }
    // Idle socket: write inline from this thread (usually all of it), no
    // io thread wake-up.
    queue_.push_back(std::move(out));
    writing_ = true;
    FlushLocked();
  }

  // Writes the queued frames of a ResponseBatch.
  void Flush() {
    absl::MutexLock lock(&mu_);
    FlushLocked();
  }

  // Writes the queued frames (writing_ set by the caller, who owns the
  // socket's writes): as many as the socket takes now, gathered into one
  // sendmsg per kFramesPerSend (SendGathered), then the rest from the io thread. mu_ is
  // held across the non-blocking sendmsg, and Close() sets closed_ under
  // mu_ before it closes the socket, so the fd stays open meanwhile.
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closed_) return;
    while (!queue_.empty()) {
      server_->response_writes_.fetch_add(1, std::memory_order_relaxed);
      ssize_t n = SendGathered(socket_.native_handle(), queue_.begin(), queue_.end());
      if (n < 0) {
        mu_.Unlock();
        Close("");
        mu_.Lock();
        return;
      }
      while (!queue_.empty() && queue_.front()->sent == queue_.front()->size()) {
        queue_.pop_front();
      }
      if (n == 0) break;  // the socket is full
    }
    if (queue_.empty()) {
      writing_ = false;
      return;
    }
    // The socket is full: the io thread writes the rest as it drains.
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->WriteNext(); });
  }

  void Close(const std::string& reason) {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) return;
      closed_ = true;
      queue_.clear();
    }
    if (!reason.empty()) LOG(WARNING) << "closing connection from " << peer_ << ": " << reason;
    if (server_->connection_closed_) server_->connection_closed_(id_);
    asio::post(socket_.get_executor(), [self = shared_from_this()] {
      asio::error_code ec;
      self->socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
      self->socket_.close(ec);
    });
  }

 private:
  void ReadMore() {
    socket_.async_read_some(buffer_.Space(),
                            [self = shared_from_this()](asio::error_code ec, size_t n) {
                              if (ec) {
                                self->Close("");
                                return;
                              }
                              self->buffer_.Commit(n);
                              self->Drain();
                            });
  }

  // Serves every whole frame buffered, then reads again; a body bigger
  // than what is buffered is read straight into the frame.
  void Drain() {
    while (buffer_.TakeHeader(header_)) {
      auto decoded = format::DecodeFrameHeader(header_);
      if (!decoded.ok()) return BadFrame(decoded.status().message());
      decoded_ = *decoded;
      if ((decoded_.flags & format::kFlagResponse) != 0)
        return BadFrame("response frame sent to a server");
      if (!server_->filter_(decoded_.type)) {
        return BadFrame(absl::StrCat("unknown message type ", decoded_.type));
      }
      message_.resize(decoded_.message_bytes);
      data_.resize(decoded_.data_bytes);
      const size_t filled = buffer_.TakeBody(message_, data_, 0);
      if (filled < message_.size() + data_.size()) {
        asio::async_read(socket_, RemainingBody(message_, data_, filled),
                         [self = shared_from_this()](asio::error_code ec, size_t) {
                           if (ec) {
                             self->Close(ec == asio::error::eof ? "truncated frame body" : "");
                             return;
                           }
                           if (self->OnBody()) self->Drain();
                         });
        return;
      }
      if (!OnBody()) return;
    }
    ReadMore();
  }

  // Verifies and dispatches the frame; false if the connection closed.
  bool OnBody() {
    absl::Status crc = format::VerifyFrameChecksum(header_, decoded_, message_, data_);
    if (!crc.ok()) {
      BadFrame(crc.message());
      return false;
    }
    format::Frame frame;
    frame.flags = decoded_.flags;
    frame.type = static_cast<format::MessageType>(decoded_.type);
    frame.request_id = decoded_.request_id;
    frame.connection_id = id_;
    // A later request of this connection came in the same read, whole: the
    // handler sees it next, on this thread, in this loop.
    frame.more_buffered = buffer_.HasWholeFrame();
    frame.more_bytes_buffered = buffer_.buffered() > 0;
    frame.message = std::move(message_);
    frame.data = std::move(data_);
    message_.clear();
    data_.clear();
    Responder responder(shared_from_this(), frame.type, frame.request_id);
    server_->handler_(std::move(frame), std::move(responder));
    return true;
  }

  void BadFrame(absl::string_view reason) {
    server_->bad_frames_.fetch_add(1);
    Close(absl::StrCat("bad frame: ", reason));
  }

  void WriteNext() {
    std::shared_ptr<OutgoingFrame> out;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty() || closed_) {
        writing_ = false;
        return;
      }
      // Popped before the write: Close() may clear the queue meanwhile.
      out = std::move(queue_.front());
      queue_.pop_front();
    }
    server_->response_writes_.fetch_add(1, std::memory_order_relaxed);
    asio::async_write(socket_, out->Remaining(),
                      [self = shared_from_this(), out](asio::error_code ec, size_t) {
                        if (ec) {
                          self->Close("");
                          absl::MutexLock lock(&self->mu_);
                          self->writing_ = false;
                          return;
                        }
                        self->WriteNext();
                      });
  }

  RpcServer* server_;
  const uint64_t id_;
  asio::ip::tcp::socket socket_;
  std::string peer_;
  // Owned by the read loop (one read at a time).
  FrameBuffer buffer_;
  char header_[format::kFrameHeaderBytes];
  format::FrameHeader decoded_;
  std::string message_;
  std::string data_;

  absl::Mutex mu_;
  std::deque<std::shared_ptr<OutgoingFrame>> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

ResponseBatch::ResponseBatch() { ++held_responses.depth; }

ResponseBatch::~ResponseBatch() {
  if (--held_responses.depth > 0) return;
  // Take the list first: a Flush that closes its connection runs the
  // server's close handler, which may send (and hold) again.
  std::vector<std::shared_ptr<ServerConnection>> connections;
  connections.swap(held_responses.connections);
  // Each connection is listed once: its first held response sets writing_,
  // and later ones queue behind it without listing it again.
  for (const auto& connection : connections) connection->Flush();
}

Responder::Responder(std::shared_ptr<ServerConnection> conn, format::MessageType type,
                     uint64_t request_id)
    : state_(std::make_shared<State>()) {
  state_->conn = std::move(conn);
  state_->type = type;
  state_->request_id = request_id;
}

Responder::State::~State() {
  if (!replied.load()) {
    conn->Send(format::kFlagResponse | format::kFlagError, type, request_id,
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
  state_->conn->Send(format::kFlagResponse, state_->type, state_->request_id,
                     response.SerializeAsString(), std::move(data));
}

void Responder::ReplyError(const absl::Status& status) const {
  CHECK(!status.ok());
  CHECK(!state_->replied.exchange(true)) << "replied twice";
  state_->conn->Send(format::kFlagResponse | format::kFlagError, state_->type, state_->request_id,
                     format::EncodeErrorBody(status), {});
}

RpcServer::RpcServer(asio::io_context& io, RequestHandler handler, TypeFilter filter)
    : io_(io), handler_(std::move(handler)), filter_(std::move(filter)), acceptor_(io) {}

RpcServer::~RpcServer() { Stop(); }

absl::Status RpcServer::Listen(const std::string& address) {
  auto endpoint = ParseEndpoint(address);
  if (!endpoint.ok()) return endpoint.status();
  asio::error_code ec;
  acceptor_.open(endpoint->protocol(), ec);
  if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(*endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address, ": ", ec.message()));
  }
  Accept();
  return absl::OkStatus();
}

std::string RpcServer::bound_address() const {
  asio::error_code ec;
  auto ep = acceptor_.local_endpoint(ec);
  if (ec) return "";
  return absl::StrCat(ep.address().to_string(), ":", ep.port());
}

void RpcServer::Stop() {
  std::vector<std::weak_ptr<ServerConnection>> connections;
  {
    absl::MutexLock lock(&connections_mu_);
    if (stopped_) return;
    stopped_ = true;
    connections.swap(connections_);
  }
  // The acceptor is closed on its own executor so it never races the accept
  // handler; if the io threads are already gone, close it here.
  // Shared, not on this stack: if the wait times out the post may run later.
  auto closed = std::make_shared<absl::Notification>();
  asio::post(io_, [this, closed] {
    asio::error_code ec;
    acceptor_.close(ec);
    closed->Notify();
  });
  if (!closed->WaitForNotificationWithTimeout(absl::Seconds(2))) {
    asio::error_code ec;
    acceptor_.close(ec);
  }
  for (auto& weak : connections) {
    if (auto conn = weak.lock()) conn->Close("");  // a normal shutdown: nothing to log
  }
}

void RpcServer::Accept() {
  // Each connection's socket runs on its own strand, so its read loop, write
  // loop and close never run at once even with many io threads.
  acceptor_.async_accept(asio::make_strand(io_), [this](asio::error_code ec,
                                                        asio::ip::tcp::socket socket) {
    if (ec) {
      if (ec != asio::error::operation_aborted) {
        LOG(WARNING) << "accept failed: " << ec.message();
        if (acceptor_.is_open()) Accept();
      }
      return;
    }
    auto conn = std::make_shared<ServerConnection>(this, std::move(socket));
    {
      absl::MutexLock lock(&connections_mu_);
      // Drop entries of closed connections so the list stays bounded.
      connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                        [](const auto& w) { return w.expired(); }),
                         connections_.end());
      if (stopped_) {
        conn->Close("");
        return;
      }
      connections_.push_back(conn);
    }
    conn->Start();
    Accept();
  });
}

}  // namespace logfs::rpc
