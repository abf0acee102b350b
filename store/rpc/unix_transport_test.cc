// RPCs over a Unix stream socket (RpcServer::ListenUnix, RpcClient's
// unix_socket_path): the same frames, authentication and refusals as over
// TCP, and the fallback to TCP when the Unix socket cannot be reached.
// Real sockets in a temp dir and on loopback, one process.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <asio.hpp>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"
#include "store/rpc/stream_socket.h"

namespace logfs::rpc {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-one";
const std::string kOtherSecret = "fedcba9876543210fedcba9876543210-cluster-two";

ClusterKeyPtr Key(const std::string& secret, const std::string& id) {
  auto key = ClusterKey::Create(secret, id);
  CHECK(key.ok()) << key.status();
  return *key;
}

// Polls `done` every 5 ms for up to 5 s.
template <typename Done>
bool Eventually(Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

// An echo server (StatFs: replies with the request's data) on loopback TCP
// and on a Unix socket in a temp dir.
class UnixTransportTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/unix_transport_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    server_io_.Join();
    client_io_.Join();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(ClusterKeyPtr key) {
    server_ = std::make_unique<RpcServer>(
        server_io_.io(),
        [this](format::Frame frame, Responder responder) {
          ++requests_;
          proto::StatFsResponse response;
          response.set_free_bytes(frame.data.size());
          responder.Reply(response, frame.data);
        },
        [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
    server_->SetClusterKey(std::move(key));
    ASSERT_TRUE(server_->Listen("127.0.0.1:0").ok());
    ASSERT_TRUE(server_->ListenUnix(socket_path()).ok());
  }

  std::string socket_path() const { return dir_ + "/rpc.sock"; }

  std::shared_ptr<RpcClient> Client(ClusterKeyPtr key, const std::string& unix_path) {
    RpcClient::Options options;
    options.key = std::move(key);
    options.unix_socket_path = unix_path;
    return RpcClient::Create(client_io_.io(), server_->bound_address(), std::move(options));
  }

  // One echo call of `data`; checks the echo when it succeeds.
  static absl::Status Echo(RpcClient& client, const std::string& data) {
    proto::StatFsResponse response;
    std::string echoed;
    absl::Status status = client.Call(format::MessageType::kStatFs, proto::Empty(), &response,
                                      absl::Seconds(5), data, &echoed);
    if (status.ok()) {
      EXPECT_EQ(data, echoed);
      EXPECT_EQ(data.size(), response.free_bytes());
    }
    return status;
  }

  std::string dir_;
  IoThreads server_io_{1};
  IoThreads client_io_{1};
  std::unique_ptr<RpcServer> server_;
  std::atomic<int> requests_{0};
};

TEST_F(UnixTransportTest, AuthenticatedRoundTripsGoOverTheUnixSocket) {
  // Goal: a client given the server's Unix socket talks to it there, with
  // the authentication handshake and tagged frames, small and large
  // bodies alike, and never dials TCP. Method: an authenticating server on
  // both transports; two calls (a few bytes, 3 MiB) from one client; the
  // per-transport counters of both sides.
  StartServer(Key(kSecret, "segd@test"));
  struct stat st;
  ASSERT_EQ(0, ::stat(socket_path().c_str(), &st));
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(0600u, st.st_mode & 07777);  // this user and root only

  auto client = Client(Key(kSecret, "mount@test"), socket_path());
  EXPECT_TRUE(Echo(*client, "payload").ok());
  EXPECT_TRUE(Echo(*client, std::string(3 << 20, 'x')).ok());
  client->Shutdown();

  EXPECT_EQ(2, requests_.load());
  EXPECT_EQ(1u, client->connects(Transport::kUnix));
  EXPECT_EQ(0u, client->connects(Transport::kTcp));
  EXPECT_EQ(0u, client->unix_fallbacks());
  EXPECT_EQ(1u, server_->connections_accepted(Transport::kUnix));
  EXPECT_EQ(0u, server_->connections_accepted(Transport::kTcp));
  EXPECT_EQ(2u, server_->requests_read(Transport::kUnix));
  EXPECT_EQ(0u, server_->requests_read(Transport::kTcp));
  EXPECT_EQ(0u, server_->auth_failures());
}

TEST_F(UnixTransportTest, AWrongSecretIsRefusedOnTheUnixSocketAsOnTcp) {
  // Goal: the Unix socket is no way around authentication. A client with
  // another cluster's secret is refused there with the same status and
  // message as over TCP, no request reaches the handler, the server counts
  // the failed handshake, and the client does not retry the refusal over
  // TCP. Method: the same wrong-secret call over each transport.
  StartServer(Key(kSecret, "segd@test"));
  auto over_unix = Client(Key(kOtherSecret, "mount@test"), socket_path());
  const absl::Status unix_status = Echo(*over_unix, "payload");
  over_unix->Shutdown();
  auto over_tcp = Client(Key(kOtherSecret, "mount@test"), "");
  const absl::Status tcp_status = Echo(*over_tcp, "payload");
  over_tcp->Shutdown();

  EXPECT_EQ(absl::StatusCode::kUnauthenticated, unix_status.code()) << unix_status;
  EXPECT_EQ(tcp_status.code(), unix_status.code()) << tcp_status;
  EXPECT_NE(std::string::npos, unix_status.message().find("refused authentication")) << unix_status;
  EXPECT_NE(std::string::npos, unix_status.message().find("--cluster_secret_file")) << unix_status;
  EXPECT_EQ(0, requests_.load());
  EXPECT_EQ(0u, over_unix->connects(Transport::kTcp));
  EXPECT_EQ(0u, over_unix->unix_fallbacks());
  EXPECT_TRUE(Eventually([&] { return server_->auth_failures() == 2; }))
      << server_->auth_failures();
  EXPECT_EQ(1u, server_->connections_accepted(Transport::kUnix));
  EXPECT_EQ(1u, server_->connections_accepted(Transport::kTcp));
}

TEST_F(UnixTransportTest, AClientWithoutSecretGetsTheSameAnswerOnTheUnixSocket) {
  StartServer(Key(kSecret, "segd@test"));
  auto client = Client(nullptr, socket_path());
  const absl::Status status = Echo(*client, "payload");
  client->Shutdown();
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, status.code()) << status;
  EXPECT_TRUE(IsServerAnswer(status)) << status;
  EXPECT_EQ(0, requests_.load());
  EXPECT_EQ(1u, server_->connections_accepted(Transport::kUnix));
}

TEST_F(UnixTransportTest, AGarbageFrameOnTheUnixSocketClosesOnlyItsConnection) {
  // Goal: bytes that are no frame close their Unix connection with a
  // counted reason, as on TCP, and the server goes on serving. Method: a
  // raw Unix socket sends 64 bytes of junk to a server without a secret
  // (so the bytes reach the frame reader); it must see EOF; then an RPC
  // over the Unix socket is served.
  StartServer(nullptr);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path().c_str());
  ASSERT_EQ(0, ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  const std::string junk(64, '\x5a');
  ASSERT_EQ(static_cast<ssize_t>(junk.size()), ::write(fd, junk.data(), junk.size()));
  timeval tv{5, 0};
  ASSERT_EQ(0, ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
  char byte;
  EXPECT_EQ(0, ::read(fd, &byte, 1));  // closed by the server, not timed out
  ::close(fd);
  EXPECT_EQ(1u, server_->bad_frames());
  EXPECT_EQ(0, requests_.load());

  auto client = Client(nullptr, socket_path());
  EXPECT_TRUE(Echo(*client, "after the junk").ok());
  client->Shutdown();
  EXPECT_EQ(1, requests_.load());
  EXPECT_EQ(1u, server_->requests_read(Transport::kUnix));
}

TEST_F(UnixTransportTest, AnUnreachableUnixSocketFallsBackToTcp) {
  // Goal: a Unix socket that is not there (ENOENT), or a file nobody
  // listens on (ECONNREFUSED), costs one failed connect per connection and
  // the call is served over TCP. Method: one client per case; the
  // counters of client and server.
  StartServer(Key(kSecret, "segd@test"));
  auto missing = Client(Key(kSecret, "mount@test"), dir_ + "/no-such.sock");
  EXPECT_TRUE(Echo(*missing, "payload").ok());
  missing->Shutdown();
  EXPECT_EQ(1u, missing->unix_fallbacks());
  EXPECT_EQ(1u, missing->connects(Transport::kTcp));
  EXPECT_EQ(0u, missing->connects(Transport::kUnix));

  // A socket file left by a process that is gone.
  const std::string stale = dir_ + "/stale.sock";
  {
    asio::io_context io;
    asio::local::stream_protocol::acceptor gone(io, asio::local::stream_protocol::endpoint(stale));
  }  // closed: the file stays, nobody listens
  ASSERT_TRUE(std::filesystem::exists(stale));
  auto refused = Client(Key(kSecret, "mount@test"), stale);
  EXPECT_TRUE(Echo(*refused, "payload").ok());
  refused->Shutdown();
  EXPECT_EQ(1u, refused->unix_fallbacks());
  EXPECT_EQ(1u, refused->connects(Transport::kTcp));

  EXPECT_EQ(2, requests_.load());
  EXPECT_EQ(2u, server_->connections_accepted(Transport::kTcp));
  EXPECT_EQ(0u, server_->connections_accepted(Transport::kUnix));
}

TEST_F(UnixTransportTest, SetUnixSocketPathTakesEffectAtTheNextConnection) {
  // Goal: ClientPool::SetUnixSocketPath leaves an open TCP connection on
  // TCP (no call is cut), and a client the pool makes once it knows the
  // path connects over the Unix socket. Method: a pool's client calls
  // over TCP, learns the path, calls again; a second pool, told the path
  // first, calls once.
  StartServer(Key(kSecret, "segd@test"));
  ClientPool pool(client_io_.io(), Key(kSecret, "mount@test"));
  auto first = pool.Get(server_->bound_address());
  EXPECT_TRUE(Echo(*first, "over tcp").ok());
  pool.SetUnixSocketPath(server_->bound_address(), socket_path());
  EXPECT_TRUE(Echo(*first, "still tcp").ok());
  EXPECT_EQ(1u, first->connects(Transport::kTcp));
  EXPECT_EQ(0u, first->connects(Transport::kUnix));
  EXPECT_EQ(2u, server_->requests_read(Transport::kTcp));
  pool.ShutdownAll();

  ClientPool again(client_io_.io(), Key(kSecret, "mount@test"));
  again.SetUnixSocketPath(server_->bound_address(), socket_path());
  auto second = again.Get(server_->bound_address());
  EXPECT_TRUE(Echo(*second, "over unix").ok());
  EXPECT_EQ(1u, second->connects(Transport::kUnix));
  EXPECT_EQ(1u, server_->requests_read(Transport::kUnix));
  again.ShutdownAll();
}

TEST_F(UnixTransportTest, StopRemovesTheSocketFileAndListenReplacesAStaleOne) {
  // A file at the path (a crashed server's socket) does not stop ListenUnix;
  // Stop leaves no file behind.
  {
    asio::io_context io;
    asio::local::stream_protocol::acceptor gone(
        io, asio::local::stream_protocol::endpoint(socket_path()));
  }
  ASSERT_TRUE(std::filesystem::exists(socket_path()));
  StartServer(nullptr);
  auto client = Client(nullptr, socket_path());
  EXPECT_TRUE(Echo(*client, "payload").ok());
  client->Shutdown();
  EXPECT_EQ(1u, server_->requests_read(Transport::kUnix));
  server_->Stop();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
}

TEST_F(UnixTransportTest, ASecondServerCannotTakeTheSocketOfALiveOneNorAFile) {
  // Goal: two servers given one path (a shared data dir, a copied flag)
  // fail loudly, as on a busy TCP port, instead of the second taking the
  // path so that calls meant for the first reach it; a path naming a file
  // that is not a socket is refused and the file kept. Method: a second
  // server listens on the live server's path, then on a regular file;
  // then the first stops and the second may listen.
  StartServer(nullptr);
  std::atomic<int> second_requests{0};
  RpcServer second(
      server_io_.io(),
      [&](format::Frame frame, Responder responder) {
        ++second_requests;
        proto::StatFsResponse response;
        response.set_free_bytes(frame.data.size());
        responder.Reply(response, frame.data);
      },
      [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
  second.SetClusterKey(nullptr);
  ASSERT_TRUE(second.Listen("127.0.0.1:0").ok());
  absl::Status taken = second.ListenUnix(socket_path());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, taken.code()) << taken;
  EXPECT_NE(std::string::npos, taken.message().find("another server listens")) << taken;
  auto client = Client(nullptr, socket_path());
  EXPECT_TRUE(Echo(*client, "payload").ok());
  client->Shutdown();
  EXPECT_EQ(1, requests_.load());
  EXPECT_EQ(0, second_requests.load());

  const std::string file = dir_ + "/journal";
  { std::ofstream(file) << "not a socket"; }
  absl::Status not_socket = second.ListenUnix(file);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, not_socket.code()) << not_socket;
  std::ifstream kept(file);
  EXPECT_EQ("not a socket", std::string(std::istreambuf_iterator<char>(kept), {}));

  server_->Stop();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
  ASSERT_TRUE(second.ListenUnix(socket_path()).ok());
  auto again = Client(nullptr, socket_path());
  EXPECT_TRUE(Echo(*again, "payload").ok());
  again->Shutdown();
  EXPECT_EQ(1, second_requests.load());
  second.Stop();
  EXPECT_FALSE(std::filesystem::exists(socket_path()));
}

TEST(UnixEndpointTest, APathTooLongForSockaddrUnIsRefused) {
  EXPECT_TRUE(UnixEndpoint("/tmp/x.sock").ok());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, UnixEndpoint("").status().code());
  EXPECT_EQ(absl::StatusCode::kInvalidArgument,
            UnixEndpoint("/" + std::string(sizeof(sockaddr_un::sun_path), 'a')).status().code());
}

}  // namespace
}  // namespace logfs::rpc
