// RpcClient's connection lifecycle against peers that misbehave: a peer
// black-holed after the TCP connect must not keep the client connecting.
#include "store/rpc/rpc_client.h"

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <asio.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/format/logfs.pb.h"
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

}  // namespace
}  // namespace logfs::rpc
