// `logfs checker write|verify`: the durability checker (bench/durability_checker.h).
#include <gflags/gflags.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "bench/durability_checker.h"
#include "src/main/subcommands.h"

DECLARE_string(dir);
DEFINE_string(ack_dir, "", "checker: directory (not on logfs) for the acknowledgement logs");
DEFINE_int32(writers, 16, "checker: writer threads, one WAL file each");
DEFINE_uint32(payload_bytes, 200, "checker: payload bytes per record");
DEFINE_int32(checker_sync_every, 1, "checker: records per fdatasync");
DECLARE_double(seconds);  // src/main/bench_main.cc

namespace logfs::main {

int CheckerMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs checker write|verify --dir=MOUNT/DIR --ack_dir=LOCAL_DIR [--writers=N]";
  InitProcess(&argc, &argv, kUsage, {{"checker:"}, {"dir", "seconds"}});
  if (!AtMostArgs(argc, argv, 1, kUsage)) return 1;
  bool write = argc == 2 && std::strcmp(argv[1], "write") == 0;
  bool verify = argc == 2 && std::strcmp(argv[1], "verify") == 0;
  if (!write && !verify) {
    std::fprintf(stderr, "logfs checker: expected 'write' or 'verify'\n");
    return 1;
  }
  bench::CheckerOptions options;
  options.dir = FLAGS_dir;
  options.log_dir = FLAGS_ack_dir;
  options.writers = FLAGS_writers;
  options.payload_bytes = FLAGS_payload_bytes;
  options.sync_every = FLAGS_checker_sync_every;
  options.duration = absl::Seconds(FLAGS_seconds > 0 ? FLAGS_seconds : 5);
  if (write) {
    auto report = bench::RunCheckerWriters(options);
    if (!report.ok()) {
      std::fprintf(stderr, "logfs checker: %s\n", std::string(report.status().message()).c_str());
      return 1;
    }
    std::fputs(report->summary.c_str(), stdout);
    return report->shrinks_seen == 0 ? 0 : 2;
  }
  auto report = bench::VerifyCheckerFiles(options);
  if (!report.ok()) {
    std::fprintf(stderr, "logfs checker: %s\n", std::string(report.status().message()).c_str());
    return 1;
  }
  for (const auto& p : report->problems) std::printf("problem: %s\n", p.c_str());
  std::fputs(report->summary.c_str(), stdout);
  return report->ok() ? 0 : 2;
}

}  // namespace logfs::main
