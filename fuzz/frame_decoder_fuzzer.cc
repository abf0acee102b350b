// Fuzz target: the frame decoder every connection reads through
// (store/rpc/frame_reader.h over store/rpc/frame_buffer.h and
// format::DecodeFrameHeader / VerifyFrameChecksum), and the error body
// codec a client decodes error responses with.
//
// Input: [u8 mode][stream bytes]. The stream is fed to one reader in reads
// of 1 + (mode % 64) * 97 bytes (1 byte up to about 6 KiB), so headers
// and bodies split at every point, and frames are taken after each read
// as a connection does. The reader takes requests as a server's does, or
// with mode bit 7 responses as a client's does, whose error bodies then
// go through the error codec. After a bad frame the reader is Reset, as a
// new connection on the same reader is, and the rest of the stream is fed
// on. With mode bit 6 the connection is authenticated: the stream's first
// bytes go through the handshake's hello decoder, and the reader expects
// a tag after every frame (under a fixed key the fuzzer cannot know, so
// every whole frame must fail its tag as a forged one does).
//
// Checks beyond the sanitizers: a frame the reader returns has a known
// type, the flags its side accepts, and body sizes within the format's
// limits.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "store/format/error_codec.h"
#include "store/format/frame.h"
#include "store/rpc/frame_auth.h"
#include "store/rpc/frame_reader.h"

namespace logfs::fuzz {
namespace {

using format::MessageType;

absl::Status Accept(bool client, const format::FrameHeader& header) {
  if (((header.flags & format::kFlagResponse) != 0) != client) {
    return absl::InvalidArgumentError("frame of the wrong direction");
  }
  if (!format::IsMetaType(header.type) && !format::IsSegdType(header.type)) {
    return absl::InvalidArgumentError("unknown message type");
  }
  return absl::OkStatus();
}

// Copies up to `n` bytes of `in` into the reader's read space; returns how
// many it took.
size_t Feed(rpc::FrameReader& reader, absl::string_view in, size_t n) {
  size_t fed = 0;
  for (const asio::mutable_buffer& space : reader.ReadSpace()) {
    const size_t take = std::min(space.size(), std::min(n, in.size()) - fed);
    if (take == 0) continue;  // an empty second buffer has no data pointer
    std::memcpy(space.data(), in.data() + fed, take);
    fed += take;
  }
  reader.Commit(fed);
  return fed;
}

std::vector<Seed> Seeds() {
  auto frame = [](uint8_t flags, MessageType type, uint64_t id, std::string message,
                  std::string data) { return format::EncodeFrame(flags, type, id, message, data); };
  const std::string append = frame(0, MessageType::kAppend, 7, "\x08\x01\x10\x01", "hello");
  const std::string lookup = frame(0, MessageType::kLookup, 1, "\x08\x01\x12\x01x", "");
  const std::string error_body = format::EncodeErrorBody(absl::NotFoundError("no such file"));
  std::vector<Seed> seeds = {
      {"append", std::string(1, 3) + append},
      {"lookup_then_append", std::string(1, 0) + lookup + append},
      {"bytewise", std::string(1, 0) + append},
      {"empty_request", std::string(1, 63) + frame(0, MessageType::kStatFs, 2, "", "")},
      {"error_response", std::string(1, 0x85) + frame(format::kFlagResponse | format::kFlagError,
                                                      MessageType::kLookup, 3, error_body, "")},
      {"big_data",
       std::string(1, 10) + frame(0, MessageType::kAppend, 9, "\x08\x02", std::string(5000, 'd'))},
  };
  return seeds;
}

}  // namespace
}  // namespace logfs::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  logfs::fuzz::QuietLogs();
  logfs::fuzz::WriteSeedsIfAsked(logfs::fuzz::Seeds());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace logfs;
  fuzz::InputReader in(data, size);
  const uint8_t mode = in.TakeU8();
  const size_t read_bytes = 1 + (mode % 64) * 97;
  const bool client = (mode & 0x80) != 0;
  const bool authenticated = (mode & 0x40) != 0;
  absl::string_view stream = in.TakeRest();
  rpc::FrameReader reader(
      [client](const format::FrameHeader& header) { return fuzz::Accept(client, header); });
  // Reset drops the reader's MAC, as a new connection starts without one.
  auto arm = [&reader, authenticated] {
    if (!authenticated) return;
    rpc::AuthKeyBytes key;
    key.fill(0x5a);
    reader.SetMac(std::make_unique<rpc::FrameMac>(key));
  };
  if (authenticated) {
    auto hello = rpc::DecodeHello(stream.substr(0, rpc::kAuthHelloBytes));
    if (hello.ok()) CHECK_LE(hello->id.size(), rpc::kAuthIdBytesMax);
  }
  arm();
  while (!stream.empty()) {
    stream.remove_prefix(fuzz::Feed(reader, stream, read_bytes));
    for (;;) {
      auto frame = reader.Next();
      if (!frame.ok()) {
        reader.Reset();
        arm();
        break;
      }
      if (!frame->has_value()) break;
      CHECK(!authenticated) << "a frame with a forged tag was accepted";
      const format::Frame& f = **frame;
      CHECK(format::IsMetaType(static_cast<uint16_t>(f.type)) ||
            format::IsSegdType(static_cast<uint16_t>(f.type)));
      CHECK_EQ((f.flags & format::kFlagResponse) != 0, client);
      CHECK_EQ(f.flags & ~format::kKnownFlags, 0);
      CHECK_LE(f.message.size(), format::kMaxMessageBytes);
      CHECK_LE(f.data.size(), format::kMaxDataBytes);
      if ((f.flags & format::kFlagError) != 0) {
        CHECK(!format::DecodeErrorBody(f.message).ok());  // never OK
      }
    }
  }
  return 0;
}
