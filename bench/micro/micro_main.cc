// main() of build/logfs_microbench: Google Benchmark's, after the process
// setup the logfs processes do (src/main/server_main.cc InitProcess):
// absl::Mutex's lock-order graph off. With it on (absl's default in builds
// without NDEBUG, as Debian's), every lock takes a process-wide lock to
// update the graph, and the multi-threaded benchmarks measure that instead
// of the code.
#include <benchmark/benchmark.h>

#include "absl/synchronization/mutex.h"

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
