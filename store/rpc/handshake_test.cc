// The authentication handshake's own checks (handshake.h, frame_auth.h):
// a hello's reserved and padding bytes, and a client step of an abandoned
// connection that must not touch the socket the next connection reuses.
#include "store/rpc/handshake.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <asio.hpp>
#include <chrono>
#include <string>

#include "store/rpc/frame_auth.h"

namespace logfs::rpc {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-one";

std::string GoodHello(const std::string &id) {
  auto hello = NewHello(AuthRole::kClient, id);
  CHECK(hello.ok()) << hello.status();
  return EncodeHello(*hello);
}

TEST(HandshakeTest, DecodeHelloRefusesNonzeroReservedAndPaddingBytes) {
  // Goal: the bytes a hello leaves zero must be zero, so that they can
  // carry meaning in a later version. Method: a good hello, and copies with
  // the reserved byte, the first and the last id padding byte set.
  const std::string id = "mount@host"; // 10 bytes: 54 bytes of padding follow
  const std::string good = GoodHello(id);
  ASSERT_TRUE(DecodeHello(good).ok());
  for (size_t offset :
       {size_t{7}, 8 + kAuthNonceBytes + id.size(), kAuthHelloBytes - 1}) {
    std::string bad = good;
    bad[offset] = 'x';
    auto decoded = DecodeHello(bad);
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, decoded.status().code())
        << offset;
  }
  // An id of the full length has no padding to check.
  const std::string full = GoodHello(std::string(kAuthIdBytesMax, 'i'));
  auto decoded = DecodeHello(full);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::string(kAuthIdBytesMax, 'i'), decoded->id);
}

TEST(HandshakeTest, AStepOfAnAbandonedConnectionLeavesTheSocketAlone) {
  // Goal: RpcClient reuses its socket for the next connection, so a client
  // handshake step that completes after its connection was given up must
  // not read what the next connection's server sends. Method: a loopback
  // pair whose "server" end has already written a server hello's worth of
  // bytes; the client handshake is told its connection is no longer
  // current once its hello is out. It must end kUnavailable and leave all
  // those bytes unread on the socket.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io,
                                   {asio::ip::make_address("127.0.0.1"), 0});
  asio::ip::tcp::socket tcp_client(io), server(io);
  tcp_client.connect(acceptor.local_endpoint());
  acceptor.accept(server);
  StreamSocket client(std::move(tcp_client));
  const std::string next_bytes(kAuthHelloBytes + kAuthProofBytes, 'n');
  asio::write(server, asio::buffer(next_bytes));

  auto key = ClusterKey::Create(kSecret, "mount@test");
  ASSERT_TRUE(key.ok());
  int asked = 0;
  bool finished = false;
  absl::Status status;
  AsyncClientHandshake(
      client, *key, "fake server",
      [&asked] { return ++asked == 0; }, // abandoned from the first step on
      [&](absl::StatusOr<AuthSession> session) {
        finished = true;
        status = session.status();
      });
  io.run_for(std::chrono::seconds(5)); // returns once the handshake is done
  ASSERT_TRUE(finished);
  EXPECT_EQ(absl::StatusCode::kUnavailable, status.code()) << status;
  EXPECT_GE(asked, 1);
  // The client's hello went out (the step ran before the check) ...
  std::string hello(kAuthHelloBytes, '\0');
  asio::read(server, asio::buffer(hello));
  EXPECT_TRUE(DecodeHello(hello).ok());
  // ... and not one byte of the "next connection" was read.
  ASSERT_EQ(next_bytes.size(), client.available());
  std::string unread(next_bytes.size(), '\0');
  asio::read(client, asio::buffer(unread));
  EXPECT_EQ(next_bytes, unread);
}

} // namespace
} // namespace logfs::rpc
