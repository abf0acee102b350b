// The authentication handshake's own checks (handshake.h, frame_auth.h):
// a hello's reserved and padding bytes.
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

std::string GoodHello(const std::string& id) {
  auto hello = NewHello(AuthRole::kClient, id);
  CHECK(hello.ok()) << hello.status();
  return EncodeHello(*hello);
}

TEST(HandshakeTest, DecodeHelloRefusesNonzeroReservedAndPaddingBytes) {
  // Goal: the bytes a hello leaves zero must be zero, so that they can
  // carry meaning in a later version. Method: a good hello, and copies with
  // the reserved byte, the first and the last id padding byte set.
  const std::string id = "mount@host";  // 10 bytes: 54 bytes of padding follow
  const std::string good = GoodHello(id);
  ASSERT_TRUE(DecodeHello(good).ok());
  for (size_t offset : {size_t{7}, 8 + kAuthNonceBytes + id.size(), kAuthHelloBytes - 1}) {
    std::string bad = good;
    bad[offset] = 'x';
    auto decoded = DecodeHello(bad);
    EXPECT_EQ(absl::StatusCode::kInvalidArgument, decoded.status().code()) << offset;
  }
  // An id of the full length has no padding to check.
  const std::string full = GoodHello(std::string(kAuthIdBytesMax, 'i'));
  auto decoded = DecodeHello(full);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(std::string(kAuthIdBytesMax, 'i'), decoded->id);
}

}  // namespace
}  // namespace logfs::rpc
