#include "store/rpc/rpc_client.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "src/util/log_rate_limit.h"
#include "store/format/error_codec.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/handshake.h"
#include "store/rpc/outgoing_frame.h"

namespace logfs::rpc {
namespace {
// How often pending calls are checked against their deadlines.
constexpr auto kTimerTickMs = std::chrono::milliseconds(20);
// Payload that marks a status as the server's answer (IsServerAnswer).
constexpr char kServerAnswerUrl[] = "logfs/server_answer";
}  // namespace

absl::Status StatusFromErrorFrame(const format::Frame& frame) {
  absl::Status status = format::DecodeErrorBody(frame.message);
  status.SetPayload(kServerAnswerUrl, absl::Cord("1"));
  return status;
}

bool IsServerAnswer(const absl::Status& status) {
  return status.GetPayload(kServerAnswerUrl).has_value();
}

std::shared_ptr<RpcClient> RpcClient::Create(asio::io_context& io, std::string address,
                                             Options options) {
  CHECK_GT(options.connect_timeout, absl::ZeroDuration());
  return std::shared_ptr<RpcClient>(new RpcClient(io, std::move(address), std::move(options)));
}

std::shared_ptr<RpcClient> RpcClient::Create(asio::io_context& io, std::string address,
                                             ClusterKeyPtr key) {
  Options options;
  options.key = std::move(key);
  return Create(io, std::move(address), std::move(options));
}

RpcClient::RpcClient(asio::io_context& io, std::string address, Options options)
    : io_(io),
      address_(std::move(address)),
      key_(std::move(options.key)),
      connect_timeout_(options.connect_timeout),
      strand_(asio::make_strand(io)),
      socket_(strand_),
      timer_(strand_),
      connect_timer_(strand_),
      resolver_(strand_),
      reader_([](const format::FrameHeader& header) {
        if ((header.flags & format::kFlagResponse) != 0) return absl::OkStatus();
        return absl::InvalidArgumentError("not a response");
      }),
      writer_(socket_, WriterOptions()),
      unix_socket_path_(std::move(options.unix_socket_path)) {}

FrameWriter::Options RpcClient::WriterOptions() {
  FrameWriter::Options options;
  // Runs on strand_, only for the current connection (the writer drops an
  // error of a connection it was closed for).
  options.on_error = [this](const absl::Status& status) {
    Fail(absl::UnavailableError(absl::StrCat("send to ", address_, " failed: ", status.message())));
  };
  return options;
}

RpcClient::~RpcClient() = default;

void RpcClient::AsyncCall(format::MessageType type, const google::protobuf::MessageLite& request,
                          std::string data, absl::Duration timeout, Callback done,
                          CallBatch* batch) {
  auto out = std::make_shared<OutgoingFrame>();
  out->message = request.SerializeAsString();
  out->data = std::move(data);
  Send(type, std::move(out), timeout, std::move(done), batch);
}

void RpcClient::AsyncCallShared(format::MessageType type,
                                const google::protobuf::MessageLite& request,
                                std::shared_ptr<const std::string> data, absl::Duration timeout,
                                Callback done, CallBatch* batch) {
  auto out = std::make_shared<OutgoingFrame>();
  out->message = request.SerializeAsString();
  out->shared_data = std::move(data);
  Send(type, std::move(out), timeout, std::move(done), batch);
}

void RpcClient::Send(format::MessageType type, std::shared_ptr<OutgoingFrame> out,
                     absl::Duration timeout, Callback done, CallBatch* batch) {
  {
    absl::MutexLock lock(&mu_);
    if (shutdown_) {
      // Never run `done` inline: the caller may hold a lock that `done` takes.
      asio::post(io_, [done = std::move(done), address = address_] {
        done(absl::UnavailableError(absl::StrCat("client for ", address, " is shut down")), {});
      });
      return;
    }
    uint64_t id = next_id_++;
    format::EncodeFrameHeader(0, type, id, out->message, out->payload(), out->header);
    pending_.emplace(id, Pending{std::move(done), absl::Now() + timeout});
    ArmTimer();
    if (state_ == State::kDisconnected) Connect();  // OnConnected writes the queue
    // Queued under mu_, so that a Fail() either answers this call and drops
    // its frame or comes after both.
    if (writer_.Enqueue(std::move(out), FrameWriter::Mode::kDefer) !=
        FrameWriter::Queued::kFlushNeeded) {
      return;  // the current writer (or the connect) takes it
    }
  }
  if (batch != nullptr) {
    batch->Add(shared_from_this());
  } else {
    writer_.Flush();
  }
}

void RpcClient::Flush() { writer_.Flush(); }

void RpcClient::SetUnixSocketPath(std::string path) {
  absl::MutexLock lock(&mu_);
  unix_socket_path_ = std::move(path);
}

CallBatch::~CallBatch() { Flush(); }

void CallBatch::Add(std::shared_ptr<RpcClient> client) {
  for (const auto& c : clients_) {
    if (c == client) return;
  }
  clients_.push_back(std::move(client));
}

void CallBatch::Flush() {
  for (const auto& c : clients_) c->Flush();
  clients_.clear();
}

absl::Status RpcClient::Call(format::MessageType type, const google::protobuf::MessageLite& request,
                             google::protobuf::MessageLite* response, absl::Duration timeout,
                             std::string data, std::string* response_data) {
  absl::Notification done;
  absl::Status status;
  format::Frame frame;
  AsyncCall(type, request, std::move(data), timeout, [&](absl::Status s, format::Frame f) {
    status = std::move(s);
    frame = std::move(f);
    done.Notify();
  });
  done.WaitForNotification();
  if (!status.ok()) return status;
  if (response != nullptr && !response->ParseFromString(frame.message)) {
    return absl::InternalError(absl::StrCat("unparseable response from ", address_));
  }
  if (response_data != nullptr) *response_data = std::move(frame.data);
  return absl::OkStatus();
}

void RpcClient::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutdown_ = true;
  }
  asio::post(strand_, [self = shared_from_this()] {
    self->Fail(absl::UnavailableError(absl::StrCat("client for ", self->address_,
                                                   " is shut down")));
  });
}

void RpcClient::Connect() {
  state_ = State::kConnecting;
  writer_.Reset();  // requests queue until OnConnected opens it
  uint64_t gen = ++connection_generation_;
  asio::post(strand_, [self = shared_from_this(), gen] { self->StartConnect(gen); });
}

void RpcClient::StartConnect(uint64_t gen) {
  std::string unix_path;
  {
    absl::MutexLock lock(&mu_);
    if (gen != connection_generation_) return;  // failed (shut down) before it started
    unix_path = unix_socket_path_;
  }
  asio::error_code ignored;
  socket_.close(ignored);
  // One deadline for the name lookup, the connect (Unix, then TCP on a
  // fallback) and the handshake.
  connect_timer_.expires_after(absl::ToChronoMilliseconds(connect_timeout_));
  connect_timer_.async_wait([self = shared_from_this(), gen](asio::error_code ec) {
    if (!ec) self->OnConnectTimeout(gen);  // else cancelled: connected or failed
  });
  if (unix_path.empty()) return ConnectTcp(gen);
  auto endpoint = UnixEndpoint(unix_path);
  if (!endpoint.ok()) {
    return OnUnixConnected(asio::error::invalid_argument, unix_path, gen);
  }
  socket_.async_connect(*endpoint,
                        [self = shared_from_this(), unix_path, gen](asio::error_code ec) {
                          if (!self->IsCurrent(gen)) return;
                          self->OnUnixConnected(ec, unix_path, gen);
                        });
}

void RpcClient::OnUnixConnected(asio::error_code ec, const std::string& path, uint64_t gen) {
  if (!ec) {
    unix_connects_.fetch_add(1);
    return OnConnected(ec, gen);
  }
  // The server went away, moved its socket, or this user may not connect
  // to it: TCP reaches the same server, as it would from another host.
  unix_fallbacks_.fetch_add(1);
  if (!fallback_logged_.exchange(true)) {
    LOG(WARNING) << "cannot connect to " << address_ << " over its Unix socket " << path << " ("
                 << ec.message() << "); using TCP (logged once)";
  }
  asio::error_code ignored;
  socket_.close(ignored);
  ConnectTcp(gen);
}

void RpcClient::ConnectTcp(uint64_t gen) {
  auto target = SplitHostPort(address_);
  if (!target.ok()) {
    Fail(absl::UnavailableError(target.status().message()));
    return;
  }
  if (target->numeric) {
    const asio::ip::tcp::endpoint endpoint(asio::ip::make_address(target->host), target->port);
    socket_.async_connect(endpoint, [self = shared_from_this(), gen](asio::error_code ec) {
      if (!self->IsCurrent(gen)) return;
      if (!ec) self->tcp_connects_.fetch_add(1);
      self->OnConnected(ec, gen);
    });
    return;
  }
  // A host name: resolved at every connect (getaddrinfo, on asio's resolver
  // thread), so a moved host is found again, and each of its addresses is
  // tried in turn (asio::async_connect), as a browser or gRPC does. One
  // lookup at a time: getaddrinfo cannot be cancelled, so a connect that
  // timed out during a slow lookup leaves it running, and the next connect
  // takes its result instead of queuing another behind it.
  resolve_for_ = gen;
  if (resolving_) return;
  resolving_ = true;
  resolver_.async_resolve(
      target->host, std::to_string(target->port), asio::ip::resolver_base::numeric_service,
      [self = shared_from_this()](asio::error_code ec,
                                  asio::ip::tcp::resolver::results_type results) {
        self->resolving_ = false;
        const uint64_t gen = self->resolve_for_;
        if (!self->IsCurrent(gen)) return;
        if (ec) {
          self->Fail(absl::UnavailableError(
              absl::StrCat("cannot resolve ", self->address_, ": ", ec.message())));
          return;
        }
        std::vector<StreamEndpoint> endpoints;
        for (const auto& entry : results) endpoints.emplace_back(entry.endpoint());
        asio::async_connect(self->socket_, endpoints,
                            [self, gen](asio::error_code ec, const StreamEndpoint&) {
                              if (!self->IsCurrent(gen)) return;
                              if (!ec) self->tcp_connects_.fetch_add(1);
                              self->OnConnected(ec, gen);
                            });
      });
}

void RpcClient::OnConnectTimeout(uint64_t gen) {
  {
    absl::MutexLock lock(&mu_);
    if (gen != connection_generation_ || state_ != State::kConnecting) return;
  }
  // Closing the socket ends the connect or the handshake step in progress;
  // their handlers see a stale generation and drop out.
  Fail(absl::UnavailableError(absl::StrCat(
      "no connection to ", address_, " within ", absl::FormatDuration(connect_timeout_),
      key_ != nullptr ? " (connect and authentication handshake)" : " (connect)")));
}

void RpcClient::OnConnected(asio::error_code ec, uint64_t gen) {
  if (ec) {
    Fail(absl::UnavailableError(absl::StrCat("cannot connect to ", address_, ": ", ec.message())));
    return;
  }
  if (TransportOf(socket_) == Transport::kTcp) {
    asio::error_code ignored;
    socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  }
  if (key_ == nullptr) return StartConnection(gen, AuthSession());
  // The socket is reused by the next connection: a step of this one that
  // completes after it failed must not read or write that one's bytes.
  auto current = [weak = weak_from_this(), gen] {
    auto self = weak.lock();
    return self != nullptr && self->IsCurrent(gen);
  };
  AsyncClientHandshake(socket_, key_, address_, std::move(current),
                       [self = shared_from_this(), gen](absl::StatusOr<AuthSession> session) {
                         if (!self->IsCurrent(gen)) return;
                         if (!session.ok()) {
                           LOGFS_LOG_EVERY_MS(WARNING, 1000) << session.status().message();
                           self->Fail(session.status());
                           return;
                         }
                         self->StartConnection(gen, std::move(*session));
                       });
}

void RpcClient::StartConnection(uint64_t gen, AuthSession session) {
  connect_timer_.cancel();
  {
    absl::MutexLock lock(&mu_);
    state_ = State::kConnected;
    // The io thread writes what was queued.
    writer_.Open(weak_from_this(), std::move(session.send));
  }
  reader_.Reset();  // nothing of an earlier connection is read as this one's
  reader_.SetMac(std::move(session.receive));
  ReadMore(gen);
}

void RpcClient::ReadMore(uint64_t gen) {
  reader_.AsyncRead(socket_, [self = shared_from_this(), gen](asio::error_code ec) {
    if (!self->IsCurrent(gen)) return;
    if (ec) {
      self->Fail(absl::UnavailableError(
          absl::StrCat("connection to ", self->address_, " lost: ", ec.message())));
      return;
    }
    self->Drain(gen);
  });
}

bool RpcClient::IsCurrent(uint64_t gen) {
  absl::MutexLock lock(&mu_);
  return gen == connection_generation_;
}

// Completes every whole response read, then reads again.
void RpcClient::Drain(uint64_t gen) {
  for (;;) {
    auto frame = reader_.Next();
    if (!frame.ok()) {
      Fail(absl::UnavailableError(
          absl::StrCat("bad response frame from ", address_, ": ", frame.status().message())));
      return;
    }
    if (!frame->has_value()) break;
    format::Frame& response = **frame;
    absl::Status status =
        (response.flags & format::kFlagError) ? StatusFromErrorFrame(response) : absl::OkStatus();
    if (key_ == nullptr && absl::IsUnauthenticated(status)) {
      // A server that authenticates refused this plain connection and is
      // closing it: every call on it, also one sent since, gets the
      // refusal, and the next call dials again (to the same refusal)
      // instead of meeting the close as "connection lost".
      Fail(status);
      return;
    }
    Complete(response.request_id, std::move(status), std::move(response));
    if (!IsCurrent(gen)) return;  // a callback failed the connection
  }
  ReadMore(gen);
}

void RpcClient::Complete(uint64_t request_id, absl::Status status, format::Frame frame) {
  Callback done;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(request_id);
    if (it == pending_.end()) return;  // timed out already
    done = std::move(it->second.done);
    pending_.erase(it);
  }
  done(std::move(status), std::move(frame));
}

void RpcClient::Fail(const absl::Status& status) {
  std::map<uint64_t, Pending> failed;
  {
    absl::MutexLock lock(&mu_);
    failed.swap(pending_);
    state_ = State::kDisconnected;
    ++connection_generation_;
    // A caller's Flush may be in sendmsg on the fd: Close returns after it,
    // and only then is the socket closed.
    writer_.Close();
  }
  asio::error_code ignored;
  connect_timer_.cancel();
  socket_.close(ignored);
  for (auto& [id, pending] : failed) pending.done(status, {});
}

void RpcClient::ArmTimer() {
  if (timer_armed_) return;
  timer_armed_ = true;
  asio::post(strand_, [self = shared_from_this()] {
    self->timer_.expires_after(kTimerTickMs);
    self->timer_.async_wait([self](asio::error_code) { self->OnTimer(); });
  });
}

void RpcClient::OnTimer() {
  std::vector<Callback> expired;
  {
    absl::MutexLock lock(&mu_);
    absl::Time now = absl::Now();
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        expired.push_back(std::move(it->second.done));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    timer_armed_ = false;
    if (!pending_.empty()) ArmTimer();
  }
  for (auto& done : expired) {
    done(absl::DeadlineExceededError(absl::StrCat("no response from ", address_, " in time")),
         {});
  }
}

}  // namespace logfs::rpc
