// `logfs bench wal --dir=PATH ...`: see bench/wal_bench.h.
#include <gflags/gflags.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/wal_bench.h"
#include "src/main/subcommands.h"

DEFINE_string(dir, "", "bench wal: directory to write WAL files in (a mount or ext4)");
DEFINE_int32(threads, 1, "bench: threads");
DEFINE_int32(files, 1, "bench wal: files (1 = all threads share one file)");
DEFINE_uint64(record_bytes, 512, "bench wal: bytes per append");
DEFINE_uint64(records, 1000, "bench wal: appends per thread");
DEFINE_int32(sync_every, 1, "bench wal: appends per fdatasync");

namespace logfs::main {

int BenchMain(int argc, char** argv) {
  InitProcess(&argc, &argv, "logfs bench wal --dir=PATH [--threads=N --record_bytes=B ...]");
  if (argc != 2 || std::strcmp(argv[1], "wal") != 0) {
    std::fprintf(stderr, "logfs bench: expected a workload: wal\n");
    return 1;
  }
  bench::WalBenchOptions options;
  options.dir = FLAGS_dir;
  options.threads = FLAGS_threads;
  options.files = FLAGS_files;
  options.record_bytes = FLAGS_record_bytes;
  options.records = FLAGS_records;
  options.sync_every = FLAGS_sync_every;
  auto result = bench::RunWalBench(options);
  if (!result.ok()) {
    std::fprintf(stderr, "logfs bench wal: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::fputs(result->report.c_str(), stdout);
  return 0;
}

}  // namespace logfs::main
