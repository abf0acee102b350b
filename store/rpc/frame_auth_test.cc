// Authentication of RPC connections (frame_auth.h, handshake.h): the
// handshake's pieces, each frame's tag against tampering, replay and
// reordering, the FrameReader checking tags, and a real RpcServer and
// RpcClient over loopback with the same, a wrong and no secret.
#include "store/rpc/frame_auth.h"

#include <glog/logging.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <asio.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/util/coding.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/frame_reader.h"
#include "store/rpc/handshake.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"

namespace logfs::rpc {
namespace {

const std::string kSecret = "0123456789abcdef0123456789abcdef-cluster-one";
const std::string kOtherSecret = "fedcba9876543210fedcba9876543210-cluster-two";

ClusterKeyPtr Key(const std::string& secret, const std::string& id) {
  auto key = ClusterKey::Create(secret, id);
  CHECK(key.ok()) << key.status();
  return *key;
}

AuthKeyBytes KeyBytes(char fill) {
  AuthKeyBytes key;
  key.fill(static_cast<unsigned char>(fill));
  return key;
}

// One frame as it goes on the wire of an authenticated connection.
struct WireFrame {
  char header[format::kFrameHeaderBytes];
  std::string message;
  std::string data;
  char tag[kAuthTagBytes];
  std::string Bytes() const {
    return absl::StrCat(absl::string_view(header, sizeof(header)), message, data,
                        absl::string_view(tag, sizeof(tag)));
  }
};

WireFrame Signed(FrameMac& mac, uint64_t request_id, const std::string& message,
                 const std::string& data) {
  WireFrame f;
  f.message = message;
  f.data = data;
  format::EncodeFrameHeader(0, format::MessageType::kStatFs, request_id, f.message, f.data,
                            f.header);
  mac.Sign(f.header, f.message, f.data, f.tag);
  return f;
}

TEST(FrameAuthTest, ShortSecretIsRefused) {
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, ClusterKey::Create("short", "x").status().code());
}

TEST(FrameAuthTest, HelloRoundTripsAndAPlainFrameIsToldApart) {
  auto hello = NewHello(AuthRole::kServer, "segd@host");
  ASSERT_TRUE(hello.ok());
  const std::string bytes = EncodeHello(*hello);
  ASSERT_EQ(kAuthHelloBytes, bytes.size());
  auto decoded = DecodeHello(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(AuthRole::kServer, decoded->role);
  EXPECT_EQ(hello->nonce, decoded->nonce);
  EXPECT_EQ("segd@host", decoded->id);
  // Two hellos never share a nonce.
  EXPECT_NE(hello->nonce, NewHello(AuthRole::kServer, "segd@host")->nonce);
  std::string plain = format::EncodeFrame(0, format::MessageType::kStatFs, 1, "", "");
  plain.resize(kAuthHelloBytes);
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, DecodeHello(plain).status().code());
  // And a plain server sees a hello as one, not as garbage.
  EXPECT_EQ(absl::StatusCode::kUnauthenticated,
            format::DecodeFrameHeader(bytes.data()).status().code());
}

TEST(FrameAuthTest, BothSidesDeriveTheSameKeysAndProofsOnlyWithTheSameSecret) {
  const std::string c = EncodeHello(*NewHello(AuthRole::kClient, "mount@a"));
  const std::string s = EncodeHello(*NewHello(AuthRole::kServer, "meta@b"));
  auto mine = DeriveAuthKeys(kSecret, c, s);
  auto theirs = DeriveAuthKeys(kSecret, c, s);
  auto other = DeriveAuthKeys(kOtherSecret, c, s);
  ASSERT_TRUE(mine.ok() && theirs.ok() && other.ok());
  EXPECT_EQ(mine->client_to_server, theirs->client_to_server);
  EXPECT_NE(mine->client_to_server, mine->server_to_client);
  EXPECT_NE(mine->client_to_server, other->client_to_server);
  const std::string proof = AuthProof(*mine, AuthRole::kServer, c, s);
  EXPECT_TRUE(ProofsEqual(proof, AuthProof(*theirs, AuthRole::kServer, c, s)));
  EXPECT_FALSE(ProofsEqual(proof, AuthProof(*other, AuthRole::kServer, c, s)));
  // The direction is in the proof: a server's proof is no client's.
  EXPECT_FALSE(ProofsEqual(proof, AuthProof(*mine, AuthRole::kClient, c, s)));
  // Fresh nonces, fresh keys: a proof of one connection fits no other.
  const std::string s2 = EncodeHello(*NewHello(AuthRole::kServer, "meta@b"));
  EXPECT_FALSE(
      ProofsEqual(proof, AuthProof(*DeriveAuthKeys(kSecret, c, s2), AuthRole::kServer, c, s2)));
}

TEST(FrameAuthTest, FramesVerifyInOrderUnderTheSameKey) {
  FrameMac sender(KeyBytes('k'));
  FrameMac receiver(KeyBytes('k'));
  for (int i = 0; i < 5; ++i) {
    WireFrame f = Signed(sender, i, "message", std::string(1000 + i, 'd'));
    EXPECT_TRUE(receiver.Verify(f.header, f.message, f.data, f.tag)) << i;
  }
}

// docs/wire_format.md: a frame's tag is the AES-256-GCM tag (GMAC) with
// IV = 4 zero bytes + the little-endian 64-bit sequence
// number, the header, message and data as additional data and no
// plaintext. Computed here with EVP's GCM cipher, which FrameMac does not
// use, for frames with and without data and a data section that ends
// mid-block.
std::string EvpGmac(const AuthKeyBytes& key, uint64_t sequence, absl::string_view aad) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  unsigned char iv[12] = {};
  util::EncodeFixed64(reinterpret_cast<char*>(iv + 4), sequence);
  int n = 0;
  unsigned char tag[kAuthTagBytes];
  EXPECT_EQ(1, EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key.data(), iv));
  EXPECT_EQ(1,
            EVP_EncryptUpdate(ctx, nullptr, &n, reinterpret_cast<const unsigned char*>(aad.data()),
                              static_cast<int>(aad.size())));
  EXPECT_EQ(1, EVP_EncryptFinal_ex(ctx, tag, &n));
  EXPECT_EQ(1, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kAuthTagBytes, tag));
  EVP_CIPHER_CTX_free(ctx);
  return std::string(reinterpret_cast<char*>(tag), kAuthTagBytes);
}

TEST(FrameAuthTest, TagIsTheGcmTagOfTheFrameUnderItsSequenceNumber) {
  FrameMac sender(KeyBytes('g'));
  const std::string data_sizes[] = {"", std::string(512, 'd'), std::string(4097, 'e')};
  uint64_t sequence = 0;
  for (const std::string& data : data_sizes) {
    WireFrame f = Signed(sender, sequence, "a message", data);
    const std::string aad =
        absl::StrCat(absl::string_view(f.header, format::kFrameHeaderBytes), f.message, f.data);
    EXPECT_EQ(EvpGmac(KeyBytes('g'), sequence, aad), std::string(f.tag, kAuthTagBytes))
        << data.size() << " data bytes";
    ++sequence;
  }
}

TEST(FrameAuthTest, TamperedFrameFails) {
  FrameMac sender(KeyBytes('k'));
  const WireFrame good = Signed(sender, 7, "message", "data bytes");
  // Flip one bit of each part in turn: header, message, data, tag.
  for (size_t part = 0; part < 4; ++part) {
    WireFrame f = good;
    char* byte = part == 0   ? &f.header[9]
                 : part == 1 ? &f.message[2]
                 : part == 2 ? &f.data[4]
                             : &f.tag[0];
    *byte ^= 1;
    FrameMac receiver(KeyBytes('k'));
    EXPECT_FALSE(receiver.Verify(f.header, f.message, f.data, f.tag)) << "part " << part;
  }
  FrameMac wrong_key(KeyBytes('x'));
  EXPECT_FALSE(wrong_key.Verify(good.header, good.message, good.data, good.tag));
}

TEST(FrameAuthTest, ReplayedFrameFails) {
  FrameMac sender(KeyBytes('k'));
  FrameMac receiver(KeyBytes('k'));
  const WireFrame f = Signed(sender, 1, "append", "bytes");
  ASSERT_TRUE(receiver.Verify(f.header, f.message, f.data, f.tag));
  EXPECT_FALSE(receiver.Verify(f.header, f.message, f.data, f.tag));
}

TEST(FrameAuthTest, ReorderedFramesFail) {
  FrameMac sender(KeyBytes('k'));
  FrameMac receiver(KeyBytes('k'));
  const WireFrame first = Signed(sender, 1, "one", "");
  const WireFrame second = Signed(sender, 2, "two", "");
  EXPECT_FALSE(receiver.Verify(second.header, second.message, second.data, second.tag));
}

// The reader of an authenticated connection hands out tagged frames and
// fails on the first bad one.
TEST(FrameAuthTest, ReaderChecksTags) {
  FrameMac sender(KeyBytes('k'));
  FrameReader reader([](const format::FrameHeader&) { return absl::OkStatus(); });
  reader.SetMac(std::make_unique<FrameMac>(KeyBytes('k')));
  const WireFrame one = Signed(sender, 1, "one", "first data");
  WireFrame two = Signed(sender, 2, "two", "second data");
  two.data[0] ^= 0x20;
  const std::string bytes = one.Bytes() + two.Bytes();
  auto space = reader.ReadSpace();
  ASSERT_GE(space[0].size(), bytes.size());
  std::memcpy(space[0].data(), bytes.data(), bytes.size());
  reader.Commit(bytes.size());
  EXPECT_TRUE(reader.HasWholeFrame());
  auto frame = reader.Next();
  ASSERT_TRUE(frame.ok() && frame->has_value()) << frame.status();
  EXPECT_EQ("first data", (*frame)->data);
  auto bad = reader.Next();
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, bad.status().code()) << bad.status();
}

// A whole frame without its tag yet is not a whole frame.
TEST(FrameAuthTest, FrameWithoutItsTagIsNotWhole) {
  FrameMac sender(KeyBytes('k'));
  FrameReader reader([](const format::FrameHeader&) { return absl::OkStatus(); });
  reader.SetMac(std::make_unique<FrameMac>(KeyBytes('k')));
  const std::string bytes = Signed(sender, 1, "one", "data").Bytes();
  auto space = reader.ReadSpace();
  std::memcpy(space[0].data(), bytes.data(), bytes.size() - 1);
  reader.Commit(bytes.size() - 1);
  EXPECT_FALSE(reader.HasWholeFrame());
  auto frame = reader.Next();
  ASSERT_TRUE(frame.ok());
  EXPECT_FALSE(frame->has_value());
}

// A real server and client over loopback.
class AuthServerTest : public testing::Test {
 protected:
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
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Stop();
    server_io_.Join();
    client_io_.Join();
  }
  absl::Status Call(ClusterKeyPtr key, const std::string& data = "payload") {
    auto client = RpcClient::Create(client_io_.io(), server_->bound_address(), std::move(key));
    proto::StatFsResponse response;
    std::string echoed;
    absl::Status status = client->Call(format::MessageType::kStatFs, proto::Empty(), &response,
                                       absl::Seconds(5), data, &echoed);
    if (status.ok()) {
      EXPECT_EQ(data, echoed);
    }
    client->Shutdown();
    return status;
  }

  IoThreads server_io_{1};
  IoThreads client_io_{1};
  std::unique_ptr<RpcServer> server_;
  std::atomic<int> requests_{0};
};

TEST_F(AuthServerTest, SameSecretIsServed) {
  StartServer(Key(kSecret, "meta@test"));
  EXPECT_TRUE(Call(Key(kSecret, "mount@test")).ok());
  EXPECT_TRUE(Call(Key(kSecret, "mount@test"), std::string(3 << 20, 'x')).ok());  // big body
  EXPECT_EQ(2, requests_.load());
  EXPECT_EQ(0u, server_->auth_failures());
}

TEST_F(AuthServerTest, WrongSecretFailsClearlyOnBothSides) {
  StartServer(Key(kSecret, "meta@test"));
  absl::Status status = Call(Key(kOtherSecret, "segd@test"));
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, status.code()) << status;
  EXPECT_NE(std::string::npos, status.message().find("refused authentication")) << status;
  EXPECT_NE(std::string::npos, status.message().find("--cluster_secret_file")) << status;
  EXPECT_EQ(0, requests_.load());
  for (int i = 0; i < 500 && server_->auth_failures() == 0; ++i)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(1u, server_->auth_failures());
}

TEST_F(AuthServerTest, ClientWithoutSecretGetsAClearAnswer) {
  StartServer(Key(kSecret, "meta@test"));
  absl::Status status = Call(nullptr);
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, status.code()) << status;
  EXPECT_TRUE(IsServerAnswer(status));
  EXPECT_NE(std::string::npos, status.message().find("--cluster_secret_file")) << status;
  EXPECT_EQ(0, requests_.load());
}

TEST_F(AuthServerTest, ServerWithoutSecretIsNamed) {
  StartServer(nullptr);
  absl::Status status = Call(Key(kSecret, "mount@test"));
  EXPECT_EQ(absl::StatusCode::kUnauthenticated, status.code()) << status;
  EXPECT_NE(std::string::npos, status.message().find("without a cluster secret")) << status;
  EXPECT_EQ(0, requests_.load());
}

TEST_F(AuthServerTest, AConnectionLostMidHandshakeIsRetryable) {
  // Goal: a peer that accepts and then closes (it restarted, the network
  // failed) makes the call fail kUnavailable, which callers retry, not
  // kUnauthenticated, which they take as final (EACCES). Method: a bare
  // acceptor that closes every connection at once.
  asio::io_context io;
  asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
  std::thread closer([&] {
    asio::error_code ec;
    asio::ip::tcp::socket socket(io);
    acceptor.accept(socket, ec);  // then closed by going out of scope
  });
  auto client = RpcClient::Create(client_io_.io(),
                                  absl::StrCat("127.0.0.1:", acceptor.local_endpoint().port()),
                                  Key(kSecret, "mount@test"));
  proto::StatFsResponse response;
  absl::Status status =
      client->Call(format::MessageType::kStatFs, proto::Empty(), &response, absl::Seconds(5));
  closer.join();
  client->Shutdown();
  EXPECT_EQ(absl::StatusCode::kUnavailable, status.code()) << status;
}

TEST_F(AuthServerTest, NoSecretOnEitherSideIsThePlainWire) {
  StartServer(nullptr);
  EXPECT_TRUE(Call(nullptr).ok());
}

}  // namespace
}  // namespace logfs::rpc
