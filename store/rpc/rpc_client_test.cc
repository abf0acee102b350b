// RpcClient's connection lifecycle against peers that misbehave: a peer
// black-holed after the TCP connect must not keep the client connecting;
// and a server named by a host name.
#include "store/rpc/rpc_client.h"

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <asio.hpp>
#include <atomic>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_server.h"

namespace logfs::rpc {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-one";

ClusterKeyPtr Key(const std::string& id) {
  auto key = ClusterKey::Create(kSecret, id);
  CHECK(key.ok()) << key.status();
  return *key;
}

absl::Status StatFs(RpcClient& client) {
  proto::StatFsResponse response;
  return client.Call(format::MessageType::kStatFs, proto::Empty(), &response, absl::Seconds(5));
}

TEST(RpcClientTest, APeerSilentAfterTheTcpConnectIsGivenUpAndTheNextCallReconnects) {
  // Goal: a peer that completes the TCP connect and then never answers the
  // authentication handshake fails the waiting call kUnavailable after
  // connect_timeout (not after the call's own 5 s, nor TCP's minutes), and
  // a later call opens a new connection. Method: a listening socket whose
  // connections the kernel completes and nobody answers; a client with a
  // 300 ms connect_timeout calls with a 5 s timeout. Then the silent peer
  // gives way to a real server on the same port, and a call is served.
  IoThreads client_io(1);
  asio::io_context silent_io;
  auto silent = std::make_unique<asio::ip::tcp::acceptor>(
      silent_io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::string address = absl::StrCat("127.0.0.1:", silent->local_endpoint().port());
  RpcClient::Options options;
  options.key = Key("mount@test");
  options.connect_timeout = absl::Milliseconds(300);
  auto client = RpcClient::Create(client_io.io(), address, options);

  const absl::Time start = absl::Now();
  absl::Status status = StatFs(*client);
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(absl::StatusCode::kUnavailable, status.code()) << status;
  EXPECT_LT(took, absl::Seconds(3)) << status;
  // The client closed its end: the silent peer reads the hello, then EOF
  // (each recv waits at most 5 s).
  asio::ip::tcp::socket peer(silent_io);
  silent->accept(peer);
  timeval tv{5, 0};
  ::setsockopt(peer.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::string bytes(kAuthHelloBytes + 1, '\0');
  size_t got = 0;
  ssize_t n = 1;
  for (int i = 0; i < 200 && n > 0 && got < bytes.size(); ++i) {
    n = ::recv(peer.native_handle(), bytes.data() + got, bytes.size() - got, 0);
    if (n > 0) got += static_cast<size_t>(n);
  }
  EXPECT_EQ(kAuthHelloBytes, got);
  EXPECT_EQ(0, n) << "the client did not close the connection";
  peer.close();
  silent.reset();

  IoThreads server_io(1);
  RpcServer server(
      server_io.io(),
      [](format::Frame, Responder responder) { responder.Reply(proto::StatFsResponse()); },
      [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
  server.SetClusterKey(Key("meta@test"));
  ASSERT_TRUE(server.Listen(address).ok());
  EXPECT_TRUE(StatFs(*client).ok());
  client->Shutdown();
  server.Stop();
  server_io.Join();
  client_io.Join();
}

// A name /etc/hosts maps to 127.0.0.1, other than "localhost" (which
// SplitHostPort maps itself), or "" if there is none. Read from the file,
// so a name that is not there is never asked of DNS.
std::string LoopbackHostName() {
  std::ifstream hosts("/etc/hosts");
  std::string line;
  while (std::getline(hosts, line)) {
    line = line.substr(0, line.find('#'));
    std::vector<std::string> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 2 || fields[0] != "127.0.0.1") continue;
    for (size_t i = 1; i < fields.size(); ++i) {
      if (fields[i] != "localhost" && SplitHostPort(fields[i] + ":1").ok()) return fields[i];
    }
  }
  return "";
}

TEST(RpcClientTest, DialsAServerByHostName) {
  // Goal: "name:port" works wherever an address is dialled (--meta lists,
  // fstab lines): the client resolves the name at connect and calls the
  // server behind it.
  const std::string name = LoopbackHostName();
  if (name.empty()) GTEST_SKIP() << "no name for 127.0.0.1 in /etc/hosts but localhost";
  IoThreads server_io(1);
  RpcServer server(
      server_io.io(),
      [](format::Frame, Responder responder) { responder.Reply(proto::StatFsResponse()); },
      [](uint16_t type) { return type == static_cast<uint16_t>(format::MessageType::kStatFs); });
  server.SetClusterKey(Key("meta@test"));
  ASSERT_TRUE(server.Listen("127.0.0.1:0").ok());
  IoThreads client_io(1);
  auto client = RpcClient::Create(
      client_io.io(), absl::StrCat(name, ":", SplitHostPort(server.bound_address())->port),
      Key("mount@test"));
  EXPECT_TRUE(StatFs(*client).ok()) << name;
  client->Shutdown();
  server.Stop();
  server_io.Join();
  client_io.Join();
}

TEST(RpcClientTest, AnAuthenticationRefusalEndsTheConnectionForEveryLaterCall) {
  // Goal: a client without a secret that calls a server with one gets the
  // server's refusal (kUnauthenticated, "check --cluster_secret_file")
  // for every call, also for a call it sends right after the first was
  // refused, before the server's close reaches it: the refusal ends the
  // connection at once, and the next call dials again. (`logfs status`
  // without a secret asks MetaState, then ListServers: the second call
  // used to go out on the refused connection and fail with "connection
  // lost: End of file" about half the time.)
  // Method: a hand-made server that answers each connection's first
  // request with the refusal an authenticating server sends, then closes
  // only when the client sends more or closes, so the second call always
  // comes before the close; two calls in a row.
  asio::io_context peer_io;
  asio::ip::tcp::acceptor acceptor(peer_io,
                                   asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  const std::string address = absl::StrCat("127.0.0.1:", acceptor.local_endpoint().port());
  const absl::Status refusal = absl::UnauthenticatedError(
      "this server authenticates its connections and the request carried no authentication: "
      "give the caller the cluster's secret (check --cluster_secret_file)");
  std::atomic<int> connections{0};
  std::thread peer([&] {
    for (int c = 0; c < 2; ++c) {
      pollfd ready{acceptor.native_handle(), POLLIN, 0};
      if (::poll(&ready, 1, 5000) != 1) return;  // no second connection: bounded
      asio::ip::tcp::socket socket(peer_io);
      asio::error_code ec;
      acceptor.accept(socket, ec);
      if (ec) return;
      ++connections;
      timeval tv{5, 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char header[format::kFrameHeaderBytes];
      if (asio::read(socket, asio::buffer(header), ec) != sizeof(header)) return;
      auto decoded = format::DecodeFrameHeader(header);
      if (!decoded.ok()) return;
      const std::string reply =
          format::EncodeFrame(format::kFlagResponse | format::kFlagError,
                              static_cast<format::MessageType>(decoded->type), decoded->request_id,
                              format::EncodeErrorBody(refusal), {});
      asio::write(socket, asio::buffer(reply), ec);
      char more;
      socket.read_some(asio::buffer(&more, 1), ec);  // the client's next bytes, or its close
    }
  });
  IoThreads client_io(1);
  auto client = RpcClient::Create(client_io.io(), address, RpcClient::Options());
  const absl::Status first = StatFs(*client);
  const absl::Status second = StatFs(*client);
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, first.code()) << first;
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, second.code()) << second;
  EXPECT_NE(std::string::npos, second.message().find("--cluster_secret_file")) << second;
  client->Shutdown();
  client_io.Join();
  peer.join();
  EXPECT_EQ(2, connections.load());
}

}  // namespace
}  // namespace logfs::rpc
