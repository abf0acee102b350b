// For the clients' unit tests: an rpc::RpcServer on loopback, on an io
// thread of its own, that keeps every request it gets and answers through
// the test's handler (or not at all: a held request is answered kInternal
// when the server goes, so a client times out meanwhile). Header-only,
// test-only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio.hpp>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "store/format/frame.h"
#include "store/format/message_type.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_server.h"

namespace logfs::client::internal {

class FakeServer {
 public:
  // Answers one request; returning without using the responder holds it.
  using Handler = std::function<void(const format::Frame& request, rpc::Responder responder)>;

  explicit FakeServer(Handler handler, const std::string& address = "127.0.0.1:0")
      : handler_(std::move(handler)), io_(std::make_unique<rpc::IoThreads>(1)) {
    server_ = std::make_unique<rpc::RpcServer>(
        io_->io(),
        [this](format::Frame frame, rpc::Responder responder) {
          {
            absl::MutexLock lock(&mu_);
            requests_.push_back(frame);
            held_.push_back(responder);  // dropped at the end: kInternal if unanswered
          }
          handler_(frame, std::move(responder));
        },
        [](uint16_t type) { return format::IsMetaType(type) || format::IsSegdType(type); });
    absl::Status listening = server_->Listen(address);
    EXPECT_TRUE(listening.ok()) << listening;
  }

  ~FakeServer() {
    server_->Stop();
    io_->Join();  // before the server goes: its connections run on it
    {
      absl::MutexLock lock(&mu_);
      held_.clear();
    }
    server_.reset();
  }

  std::string address() const { return server_->bound_address(); }
  // The server itself (ListenUnix, its counters).
  rpc::RpcServer& server() { return *server_; }

  // Every request so far, in arrival order.
  std::vector<format::Frame> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }
  // The requests of one type.
  std::vector<format::Frame> requests(format::MessageType type) {
    std::vector<format::Frame> out;
    for (auto& frame : requests()) {
      if (frame.type == type) out.push_back(std::move(frame));
    }
    return out;
  }

 private:
  const Handler handler_;
  std::unique_ptr<rpc::IoThreads> io_;
  std::unique_ptr<rpc::RpcServer> server_;
  absl::Mutex mu_;
  std::vector<format::Frame> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<rpc::Responder> held_ ABSL_GUARDED_BY(mu_);
};

// The request in `frame`, parsed (a test failure if it does not parse).
template <typename Request>
Request Parse(const format::Frame& frame) {
  Request request;
  EXPECT_TRUE(request.ParseFromString(frame.message));
  return request;
}

// A loopback address nothing listens on (a server's, once it is gone).
inline std::string FreeAddress() {
  FakeServer gone([](const format::Frame&, rpc::Responder) {});
  return gone.address();
}

}  // namespace logfs::client::internal
