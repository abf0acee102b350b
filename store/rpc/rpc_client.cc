#include "store/rpc/rpc_client.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "store/format/error_codec.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/frame_buffer.h"
#include "store/rpc/outgoing_frame.h"

namespace logfs::rpc {
namespace {
// How often pending calls are checked against their deadlines.
constexpr auto kTimerTickMs = std::chrono::milliseconds(20);
// Gathered writes a caller's Flush makes before it leaves the rest of the
// queue (other callers' frames) to the io thread.
constexpr int kInlinePasses = 4;
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

std::shared_ptr<RpcClient> RpcClient::Create(asio::io_context& io, std::string address) {
  return std::shared_ptr<RpcClient>(new RpcClient(io, std::move(address)));
}

RpcClient::RpcClient(asio::io_context& io, std::string address)
    : io_(io),
      address_(std::move(address)),
      strand_(asio::make_strand(io)),
      socket_(strand_),
      timer_(strand_) {}

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
    queue_.push_back(std::move(out));
    if (state_ == State::kDisconnected) {
      Connect();  // OnConnected writes the queue
      return;
    }
    if (state_ != State::kConnected || writing_) return;  // the writer takes it too
  }
  if (batch != nullptr) {
    batch->Add(shared_from_this());
  } else {
    Flush();
  }
}

void RpcClient::Flush() {
  std::vector<std::shared_ptr<OutgoingFrame>> frames;
  int fd = -1;
  uint64_t gen = 0;
  ssize_t result = 0;
  for (int pass = 0;; ++pass) {
    {
      absl::MutexLock lock(&mu_);
      if (pass == 0) {
        if (writing_ || state_ != State::kConnected || queue_.empty()) return;
        writing_ = true;  // this thread owns the socket's writes
        inline_writer_ = true;
        fd = socket_.native_handle();
        gen = connection_generation_;
      } else {
        if (gen != connection_generation_) {
          // Fail() ran meanwhile: it answered every call and waits for us.
          inline_writer_ = false;
          return;
        }
        // What the socket did not take goes back to the front, in order.
        auto unsent = std::find_if(frames.begin(), frames.end(),
                                   [](const auto& f) { return f->sent < f->size(); });
        queue_.insert(queue_.begin(), unsent, frames.end());
        if (result < 0) {
          // The stream may hold part of a frame: the connection is done for,
          // and Fail() answers every pending call. writing_ stays set.
          inline_writer_ = false;
          const int error = static_cast<int>(-result);
          asio::post(strand_, [self = shared_from_this(), gen, error] {
            {
              absl::MutexLock lock(&self->mu_);
              if (gen != self->connection_generation_) return;
            }
            self->Fail(absl::UnavailableError(absl::StrCat(
                "send to ", self->address_, " failed: ", std::strerror(error))));
          });
          return;
        }
        if (queue_.empty()) {
          writing_ = false;
          inline_writer_ = false;
          return;
        }
        if (unsent != frames.end() || pass == kInlinePasses) {
          // The socket is full, or this thread has written enough for
          // others: the io thread writes the rest.
          inline_writer_ = false;
          asio::post(strand_, [self = shared_from_this()] { self->WriteNext(); });
          return;
        }
      }
      frames.clear();
      const size_t n = std::min(queue_.size(), kFramesPerSend);
      for (size_t i = 0; i < n; ++i) {
        frames.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    // No lock held: callers queue behind writing_, and the io thread's
    // responses are not held up by this sendmsg.
    result = SendGathered(fd, frames.begin(), frames.end());
  }
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
  uint64_t gen = ++connection_generation_;
  asio::post(strand_, [self = shared_from_this(), gen] {
    auto endpoint = ParseEndpoint(self->address_);
    if (!endpoint.ok()) {
      self->Fail(absl::UnavailableError(endpoint.status().message()));
      return;
    }
    asio::error_code ignored;
    self->socket_.close(ignored);
    self->socket_.async_connect(*endpoint, [self, gen](asio::error_code ec) {
      {
        absl::MutexLock lock(&self->mu_);
        if (gen != self->connection_generation_) return;
      }
      self->OnConnected(ec);
    });
  });
}

void RpcClient::OnConnected(asio::error_code ec) {
  if (ec) {
    Fail(absl::UnavailableError(absl::StrCat("cannot connect to ", address_, ": ", ec.message())));
    return;
  }
  asio::error_code ignored;
  socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
  {
    absl::MutexLock lock(&mu_);
    state_ = State::kConnected;
    if (!queue_.empty() && !writing_) {
      writing_ = true;
      asio::post(strand_, [self = shared_from_this()] { self->WriteNext(); });
    }
  }
  buffer_.Reset();  // nothing of an earlier connection is read as this one's
  ReadMore();
}

void RpcClient::WriteNext() {
  std::shared_ptr<OutgoingFrame> out;
  uint64_t gen;
  {
    absl::MutexLock lock(&mu_);
    if (queue_.empty() || state_ != State::kConnected) {
      writing_ = false;
      return;
    }
    out = std::move(queue_.front());
    queue_.pop_front();
    gen = connection_generation_;
  }
  asio::async_write(socket_, out->Remaining(), [self = shared_from_this(), out, gen](asio::error_code ec,
                                                                         size_t) {
    {
      absl::MutexLock lock(&self->mu_);
      if (gen != self->connection_generation_) return;
    }
    if (ec) {
      self->Fail(absl::UnavailableError(
          absl::StrCat("send to ", self->address_, " failed: ", ec.message())));
      return;
    }
    self->WriteNext();
  });
}

void RpcClient::ReadMore() {
  uint64_t gen;
  {
    absl::MutexLock lock(&mu_);
    gen = connection_generation_;
  }
  socket_.async_read_some(
      buffer_.Space(), [self = shared_from_this(), gen](asio::error_code ec, size_t n) {
        if (!self->IsCurrent(gen)) return;
        if (ec) {
          self->Fail(absl::UnavailableError(
              absl::StrCat("connection to ", self->address_, " lost: ", ec.message())));
          return;
        }
        self->buffer_.Commit(n);
        self->Drain(gen);
      });
}

bool RpcClient::IsCurrent(uint64_t gen) {
  absl::MutexLock lock(&mu_);
  return gen == connection_generation_;
}

// Completes every whole response buffered, then reads again; a body bigger
// than what is buffered is read straight into the frame.
void RpcClient::Drain(uint64_t gen) {
  while (buffer_.TakeHeader(header_)) {
    auto decoded = format::DecodeFrameHeader(header_);
    if (!decoded.ok() || (decoded->flags & format::kFlagResponse) == 0) {
      Fail(absl::UnavailableError(
          absl::StrCat("bad response frame from ", address_, ": ",
                       decoded.ok() ? "not a response" : decoded.status().message())));
      return;
    }
    decoded_ = *decoded;
    message_.resize(decoded_.message_bytes);
    data_.resize(decoded_.data_bytes);
    const size_t filled = buffer_.TakeBody(message_, data_, 0);
    if (filled < message_.size() + data_.size()) {
      asio::async_read(socket_, RemainingBody(message_, data_, filled),
                       [self = shared_from_this(), gen](asio::error_code ec, size_t) {
                         if (!self->IsCurrent(gen)) return;
                         if (ec) {
                           self->Fail(absl::UnavailableError(absl::StrCat(
                               "connection to ", self->address_, " lost: ", ec.message())));
                           return;
                         }
                         if (self->OnResponse()) self->Drain(gen);
                       });
      return;
    }
    if (!OnResponse()) return;
    if (!IsCurrent(gen)) return;  // a callback failed the connection
  }
  ReadMore();
}

bool RpcClient::OnResponse() {
  absl::Status crc = format::VerifyFrameChecksum(header_, decoded_, message_, data_);
  if (!crc.ok()) {
    Fail(absl::UnavailableError(absl::StrCat("response from ", address_, ": ", crc.message())));
    return false;
  }
  format::Frame frame;
  frame.flags = decoded_.flags;
  frame.type = static_cast<format::MessageType>(decoded_.type);
  frame.request_id = decoded_.request_id;
  frame.message = std::move(message_);
  frame.data = std::move(data_);
  message_.clear();
  data_.clear();
  absl::Status status =
      (frame.flags & format::kFlagError) ? StatusFromErrorFrame(frame) : absl::OkStatus();
  Complete(frame.request_id, std::move(status), std::move(frame));
  return true;
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
    queue_.clear();
    writing_ = false;
    state_ = State::kDisconnected;
    ++connection_generation_;
    // A caller's Flush may be in sendmsg on the fd: close it only after.
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !inline_writer_; };
    mu_.Await(absl::Condition(&idle));
  }
  asio::error_code ignored;
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
