// What unauthenticated peers can take from an RpcServer (rpc_server.h):
// handshakes in progress are capped in all and per peer address, and an
// accept that runs out of descriptors backs off instead of spinning.
#include <arpa/inet.h>
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"

namespace logfs::rpc {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-one";

ClusterKeyPtr Key(const std::string& id) {
  auto key = ClusterKey::Create(kSecret, id);
  CHECK(key.ok()) << key.status();
  return *key;
}

// Polls `done` every 5 ms for up to 10 s.
template <typename Predicate>
bool WaitFor(Predicate done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  for (int i = 0; i < 2000 && absl::Now() < deadline; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

// A TCP socket from `source_ip` (a loopback address) to the server, sending
// nothing. `connect` false: created but not yet connected.
class SilentPeer {
 public:
  SilentPeer(const std::string& source_ip, int port, bool connect = true)
      : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)), port_(port) {
    CHECK_GE(fd_, 0);
    sockaddr_in source{};
    source.sin_family = AF_INET;
    CHECK_EQ(1, ::inet_pton(AF_INET, source_ip.c_str(), &source.sin_addr));
    CHECK_EQ(0, ::bind(fd_, reinterpret_cast<sockaddr*>(&source), sizeof(source)));
    timeval tv{5, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect) CHECK(Connect());
  }
  ~SilentPeer() { Close(); }
  bool Connect() {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    return ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Whether the server closed this connection: a read gets EOF or a reset
  // (within the 5 s receive timeout).
  bool ClosedByServer() {
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }
  // Whether the connection is open with nothing to read.
  bool OpenAndQuiet() {
    char byte;
    const ssize_t n = ::recv(fd_, &byte, 1, MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

 private:
  int fd_;
  const int port_;
};

class RpcServerLimitsTest : public testing::Test {
 protected:
  void StartServer(ClusterKeyPtr key, HandshakeLimits limits) {
    server_ = std::make_unique<RpcServer>(
        server_io_.io(),
        [](format::Frame, Responder responder) { responder.Reply(proto::StatFsResponse()); },
        [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
    server_->SetClusterKey(std::move(key));
    server_->SetHandshakeLimits(limits);
    ASSERT_TRUE(server_->Listen("127.0.0.1:0").ok());
    const std::string address = server_->bound_address();
    port_ = std::stoi(address.substr(address.rfind(':') + 1));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    server_io_.Join();
    client_io_.Join();
  }
  absl::Status Call(ClusterKeyPtr key) {
    auto client = RpcClient::Create(client_io_.io(), server_->bound_address(), std::move(key));
    proto::StatFsResponse response;
    absl::Status status =
        client->Call(format::MessageType::kStatFs, proto::Empty(), &response, absl::Seconds(5));
    client->Shutdown();
    return status;
  }

  IoThreads server_io_{1};
  IoThreads client_io_{1};
  std::unique_ptr<RpcServer> server_;
  int port_ = 0;
};

TEST_F(RpcServerLimitsTest, SilentConnectionsPastTheCapsAreClosedAndTheServerStillServes) {
  // Goal: connections that never authenticate take at most the caps; one
  // past a cap is closed at once; once the silent ones go, an
  // authenticated client is served. Method: caps of 4 in all and 2 per
  // address; 2 silent peers from 127.0.0.1 fill that address (a third from
  // it and the client from it are closed), 2 from 127.0.0.2 fill the total
  // (one from 127.0.0.3 is closed); the silent ones close, the client is
  // served.
  HandshakeLimits limits;
  limits.in_progress_max = 4;
  limits.per_peer_max = 2;
  StartServer(Key("meta@test"), limits);
  std::vector<std::unique_ptr<SilentPeer>> silent;
  for (const char* ip : {"127.0.0.1", "127.0.0.1"}) {
    silent.push_back(std::make_unique<SilentPeer>(ip, port_));
  }
  ASSERT_TRUE(WaitFor([&] { return server_->handshakes_in_progress() == 2; }));
  SilentPeer third_from_one("127.0.0.1", port_);
  EXPECT_TRUE(third_from_one.ClosedByServer());
  EXPECT_EQ(absl::StatusCode::kUnavailable, Call(Key("mount@test")).code());
  for (const char* ip : {"127.0.0.2", "127.0.0.2"}) {
    silent.push_back(std::make_unique<SilentPeer>(ip, port_));
  }
  ASSERT_TRUE(WaitFor([&] { return server_->handshakes_in_progress() == 4; }));
  SilentPeer past_total("127.0.0.3", port_);
  EXPECT_TRUE(past_total.ClosedByServer());
  EXPECT_EQ(3u, server_->handshakes_refused());
  for (auto& peer : silent) EXPECT_TRUE(peer->OpenAndQuiet());

  silent.clear();
  ASSERT_TRUE(WaitFor([&] { return server_->handshakes_in_progress() == 0; }));
  absl::Status status = Call(Key("mount@test"));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(3u, server_->handshakes_refused());
}

TEST_F(RpcServerLimitsTest, SilentConnectionsThatTimeOutGiveTheirSlotsBack) {
  // Goal: a peer that holds its connection open without a word loses its
  // handshake slot after the timeout. Method: per-address cap 2, timeout
  // 300 ms; two silent peers from 127.0.0.1; the server closes both, and
  // then serves a client from the same address.
  HandshakeLimits limits;
  limits.per_peer_max = 2;
  limits.timeout = absl::Milliseconds(300);
  StartServer(Key("meta@test"), limits);
  SilentPeer first("127.0.0.1", port_), second("127.0.0.1", port_);
  EXPECT_TRUE(first.ClosedByServer());
  EXPECT_TRUE(second.ClosedByServer());
  ASSERT_TRUE(WaitFor([&] { return server_->handshakes_in_progress() == 0; }));
  EXPECT_EQ(2u, server_->auth_failures());
  absl::Status status = Call(Key("mount@test"));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(0u, server_->handshakes_refused());
}

// Lowers this process's RLIMIT_NOFILE so that no new descriptor can be
// made, and restores it when it goes.
class NoMoreDescriptors {
 public:
  NoMoreDescriptors() {
    CHECK_EQ(0, ::getrlimit(RLIMIT_NOFILE, &saved_));
    const int lowest_free = ::dup(0);
    CHECK_GE(lowest_free, 0);
    ::close(lowest_free);
    rlimit lowered = saved_;
    lowered.rlim_cur = static_cast<rlim_t>(lowest_free);
    CHECK_EQ(0, ::setrlimit(RLIMIT_NOFILE, &lowered));
  }
  ~NoMoreDescriptors() { CHECK_EQ(0, ::setrlimit(RLIMIT_NOFILE, &saved_)); }

 private:
  rlimit saved_;
};

TEST_F(RpcServerLimitsTest, AcceptOutOfDescriptorsBacksOffAndRecovers) {
  // Goal: when accept fails with EMFILE the server waits kAcceptBackoff
  // before it tries again (the pending connection would make it fail at
  // once, forever: a spinning io thread), and accepts again once
  // descriptors are free. Method: a socket made beforehand connects while
  // this process may open no descriptor; the third failed accept must come
  // at least two backoffs after the first. Then the limit is restored and
  // a call is served.
  StartServer(nullptr, HandshakeLimits());
  SilentPeer waiting("127.0.0.1", port_, /*connect=*/false);
  absl::Duration between;
  {
    NoMoreDescriptors no_fds;
    ASSERT_TRUE(waiting.Connect());  // the kernel queues it; accept fails
    ASSERT_TRUE(WaitFor([&] { return server_->accept_errors() >= 1; }));
    const absl::Time first = absl::Now();
    ASSERT_TRUE(WaitFor([&] { return server_->accept_errors() >= 3; }));
    between = absl::Now() - first;
  }
  EXPECT_GE(between, 2 * kAcceptBackoff - absl::Milliseconds(50));
  EXPECT_LT(server_->accept_errors(), 20u);
  absl::Status status = Call(nullptr);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_TRUE(waiting.OpenAndQuiet());  // accepted, and served like any other
}

TEST_F(RpcServerLimitsTest, AServerDestroyedWhileItsIoThreadsRunTouchesNothingOfIt) {
  // Goal: a server destroyed while its io threads go on (a test's, or a
  // process that tears a server down before its loop) leaves its
  // connections' late callbacks nothing of it to touch: handshakes that
  // end afterwards, and requests read afterwards, reach neither the
  // server (freed: before, the handshake callback gave its slot back
  // through a raw RpcServer*, a use-after-free that ASan reports and the
  // slot map's CHECK could trip) nor its handler.
  // Method: 3 silent peers hold handshakes; an authenticated client calls
  // in a loop on a thread of its own; the server is destroyed; then the
  // peers hang up (their handshakes end on the io thread). The handler's
  // count must not move once the destructor returned, and what the server
  // shared with its connections must go once they are all gone.
  auto calls = std::make_shared<std::atomic<int>>(0);
  server_ = std::make_unique<RpcServer>(
      server_io_.io(),
      [calls](format::Frame, Responder responder) {
        calls->fetch_add(1);
        responder.Reply(proto::StatFsResponse());
      },
      [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
  server_->SetClusterKey(Key("meta@test"));
  ASSERT_TRUE(server_->Listen("127.0.0.1:0").ok());
  const std::string address = server_->bound_address();
  port_ = std::stoi(address.substr(address.rfind(':') + 1));
  std::vector<std::unique_ptr<SilentPeer>> silent;
  for (int i = 0; i < 3; ++i) silent.push_back(std::make_unique<SilentPeer>("127.0.0.1", port_));
  ASSERT_TRUE(WaitFor([&] { return server_->handshakes_in_progress() == 3; }));
  std::atomic<bool> stop{false};
  std::atomic<int> failures_after{0};
  std::atomic<bool> destroyed{false};
  std::thread caller([&] {
    auto client = RpcClient::Create(client_io_.io(), address, Key("mount@test"));
    for (int i = 0; i < 100000 && !stop; ++i) {
      proto::StatFsResponse response;
      absl::Status s = client->Call(format::MessageType::kStatFs, proto::Empty(), &response,
                                    absl::Seconds(5));
      if (!s.ok() && destroyed) ++failures_after;
    }
    client->Shutdown();
  });
  ASSERT_TRUE(WaitFor([&] { return calls->load() >= 20; }));
  const std::weak_ptr<const void> shared = server_->TEST_SharedState();
  server_.reset();
  destroyed = true;
  const int calls_at_destruction = calls->load();
  silent.clear();  // their handshakes end now, on the io thread
  // The client finds the server gone (its calls fail from now on).
  EXPECT_TRUE(WaitFor([&] { return failures_after.load() >= 3; }));
  stop = true;
  caller.join();
  EXPECT_EQ(calls_at_destruction, calls->load()) << "a handler ran after the server was destroyed";
  EXPECT_TRUE(WaitFor([&] { return shared.expired(); })) << "a connection outlived its callbacks";
}

}  // namespace
}  // namespace logfs::rpc
