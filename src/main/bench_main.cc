// `logfs bench wal|read ...`: see bench/wal_bench.h and bench/read_bench.h.
#include <gflags/gflags.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/read_bench.h"
#include "bench/wal_bench.h"
#include "src/main/subcommands.h"

DEFINE_string(dir, "", "bench: directory to work in (a logfs mount, ext4, ...)");
DECLARE_string(meta);  // src/main/server_main.cc; bench wal: through the client library
DEFINE_int32(threads, 1, "bench: threads");
DEFINE_int32(files, 1, "bench wal: WAL files (1 = all threads share one); bench read: files");
DEFINE_uint64(record_bytes, 512, "bench wal: bytes per append");
DEFINE_uint64(records, 0, "bench wal: appends per thread (default 1000 unless --seconds)");
DEFINE_double(seconds, 0,
              "bench: run this long (bench read: per phase); checker write: how long to write "
              "(0: 5 s)");
DEFINE_int32(sync_every, 1, "bench wal: appends per fdatasync");
DEFINE_uint64(file_bytes, 64ull << 20, "bench read: bytes per file");
DEFINE_uint64(read_bytes, 4096, "bench read: bytes per read");
DEFINE_uint64(scan_bytes, 0, "bench read: >0: range scans of this many bytes, read_bytes at a time");
DEFINE_uint64(ops, 0, "bench read: reads (or scans) per thread per phase (default 1000 unless --seconds)");
DEFINE_string(cache, "both",
              "bench read: phases: cold | warm | block (O_DIRECT reads after warming: they "
              "bypass the page cache and reach the mount's block cache) | both (cold, warm) | all");
DEFINE_bool(keep, false, "bench read: keep the files for the next run");

namespace logfs::main {

int BenchMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs bench wal (--dir=PATH | --meta=HOST:PORT) [--threads=N --files=N "
      "--record_bytes=B --records=N | --seconds=S --sync_every=N]\n"
      "logfs bench read --dir=PATH [--files=N --file_bytes=B --read_bytes=B "
      "--scan_bytes=B --threads=N --ops=N | --seconds=S --cache=cold|warm|block|both|all --keep]";
  InitProcess(&argc, &argv, kUsage, {{"bench:", "bench wal:", "bench read:"}, {"meta", "seconds"}});
  if (!AtMostArgs(argc, argv, 1, kUsage)) return 1;
  std::string workload = argc == 2 ? argv[1] : "";
  absl::StatusOr<std::string> report;
  if (workload == "wal") {
    bench::WalBenchOptions options;
    options.dir = FLAGS_dir;
    options.meta = FLAGS_meta;
    options.threads = FLAGS_threads;
    options.files = FLAGS_files;
    options.record_bytes = FLAGS_record_bytes;
    options.records = FLAGS_records;
    options.seconds = FLAGS_seconds;
    options.sync_every = FLAGS_sync_every;
    auto result = bench::RunWalBench(options);
    if (result.ok()) report = result->report; else report = result.status();
  } else if (workload == "read") {
    bench::ReadBenchOptions options;
    options.dir = FLAGS_dir;
    options.threads = FLAGS_threads;
    options.files = FLAGS_files;
    options.file_bytes = FLAGS_file_bytes;
    options.read_bytes = FLAGS_read_bytes;
    options.scan_bytes = FLAGS_scan_bytes;
    options.ops = FLAGS_ops;
    options.seconds = FLAGS_seconds;
    options.cache = FLAGS_cache;
    options.keep = FLAGS_keep;
    report = bench::RunReadBench(options);
  } else {
    std::fprintf(stderr, "logfs bench: expected a workload: wal or read\n");
    return 1;
  }
  if (!report.ok()) {
    std::fprintf(stderr, "logfs bench %s: %s\n", workload.c_str(),
                 std::string(report.status().message()).c_str());
    return 1;
  }
  std::fputs(report->c_str(), stdout);
  return 0;
}

}  // namespace logfs::main
