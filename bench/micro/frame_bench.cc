// One Append frame, as the mount encodes it and a segment server decodes
// it: the protobuf message, the 28-byte header with its CRC32C over header,
// message and data (format::EncodeFrame), and the FrameReader's pass over
// the bytes of a read (store/rpc/frame_reader.h). Data sizes: a 512-byte
// WAL record and a 4 KiB page.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>

#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/frame_reader.h"

namespace logfs {
namespace {

proto::AppendRequest Request() {
  proto::AppendRequest request;
  request.set_segment_id(123456);
  request.set_epoch(3);
  request.set_offset(1 << 20);
  request.set_crc32c(0xdeadbeef);
  request.set_sync(true);
  return request;
}

void BM_FrameEncode(benchmark::State& state) {
  const std::string data(static_cast<size_t>(state.range(0)), 'd');
  const proto::AppendRequest request = Request();
  uint64_t id = 0;
  for (auto _ : state) {
    std::string message = request.SerializeAsString();
    std::string frame = format::EncodeFrame(0, format::MessageType::kAppend, ++id, message, data);
    benchmark::DoNotOptimize(frame.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}
BENCHMARK(BM_FrameEncode)->Arg(512)->Arg(4096);

// Decodes frames from a buffer of 64 KiB reads, as a connection's read
// loop does (several frames per read).
void BM_FrameDecode(benchmark::State& state) {
  const std::string data(static_cast<size_t>(state.range(0)), 'd');
  const std::string message = Request().SerializeAsString();
  std::string wire;
  int frames = 0;
  while (wire.size() < (1u << 20)) {
    wire += format::EncodeFrame(0, format::MessageType::kAppend, ++frames, message, data);
  }
  rpc::FrameReader reader([](const format::FrameHeader&) { return absl::OkStatus(); });
  uint64_t decoded = 0;
  for (auto _ : state) {
    size_t fed = 0;
    while (fed < wire.size()) {
      size_t n = 0;
      for (const asio::mutable_buffer& b : reader.ReadSpace()) {
        const size_t take = std::min({b.size(), wire.size() - fed, size_t{65536} - n});
        if (take == 0) continue;
        std::memcpy(b.data(), wire.data() + fed, take);
        fed += take;
        n += take;
      }
      reader.Commit(n);
      for (;;) {
        auto frame = reader.Next();
        if (!frame.ok()) {
          state.SkipWithError("decode failed");
          return;
        }
        if (!frame->has_value()) break;
        benchmark::DoNotOptimize((*frame)->data.data());
        ++decoded;
      }
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(decoded));
}
BENCHMARK(BM_FrameDecode)->Arg(512)->Arg(4096);

}  // namespace
}  // namespace logfs
