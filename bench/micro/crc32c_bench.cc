// CRC32C, the checksum of every frame and every replica chunk
// (src/util/crc32c.h): bytes per second at the sizes the hot paths use (a
// small WAL record, 1 KiB, a page, a block-cache block). Divide 1 KiB by
// the rate for the cost per KiB.
#include <benchmark/benchmark.h>

#include <string>

#include "src/util/crc32c.h"

namespace logfs {
namespace {

void BM_Crc32c(benchmark::State& state) {
  const std::string data(static_cast<size_t>(state.range(0)), 'x');
  uint32_t crc = 0;
  for (auto _ : state) {
    crc = util::Crc32cExtend(crc, data.data(), data.size());
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_Crc32c)->Arg(512)->Arg(1024)->Arg(4096)->Arg(64 << 10);

}  // namespace
}  // namespace logfs
