// `logfs bench wal|read|meta|cache-replay ...`: see bench/wal_bench.h,
// bench/read_bench.h, bench/meta_bench.h and bench/cache_replay.h.
// `logfs bench plot-ratios --table=FILE.md` (bench/compare.sh runs it):
// one SVG chart per workload of the table's ratios to ext4, FILE-A.svg,
// FILE-B.svg, FILE-C.svg next to the table (bench/svg_plot.h).
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/cache_replay.h"
#include "bench/meta_bench.h"
#include "bench/read_bench.h"
#include "bench/svg_plot.h"
#include "bench/wal_bench.h"
#include "src/main/subcommands.h"

DEFINE_string(dir, "", "bench: directory to work in (a logfs mount, ext4, ...)");
DECLARE_string(meta);  // src/main/server_main.cc; bench wal, meta: through the client library
DECLARE_string(cluster_secret_file);  // src/main/server_main.cc
DEFINE_int32(threads, 1, "bench: threads (bench meta: workers)");
DEFINE_int32(files, 1,
             "bench wal: WAL files (1 = all threads share one); bench read: files; bench meta: "
             "files per worker (default 1000)");
DEFINE_bool(shared_dir, false, "bench meta: every worker in one shared directory");
DEFINE_bool(processes, false,
            "bench meta: workers are processes (fork), not threads (FUSE serializes some calls "
            "per process)");
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
DEFINE_string(plot, "",
              "bench: also write the latency histogram and CDF as an SVG chart to this .svg file");
DEFINE_string(table, "", "bench plot-ratios: bench/compare.sh's markdown table to chart");
DEFINE_string(trace, "scan_hot",
              "bench cache-replay: block-cache traces (files a mount wrote with "
              "--block_cache_trace, or scan_hot for a synthetic one), comma-separated");
DEFINE_string(capacity_mib, "16,64,256", "bench cache-replay: cache sizes to replay at (MiB)");

namespace logfs::main {
namespace {

// --plot must name a .svg file in an existing directory: checked before a
// run, not after it.
bool CheckPlotPath(const std::string& path) {
  if (path.empty()) return true;
  if (!absl::EndsWith(path, ".svg")) {
    std::fprintf(stderr, "logfs bench: --plot=%s: want a file name ending in .svg\n", path.c_str());
    return false;
  }
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "logfs bench: --plot=%s: no directory %s\n", path.c_str(), dir.c_str());
    return false;
  }
  return true;
}

// The charts of `table` as TABLE-<workload>.svg; their paths on stdout.
int PlotRatios(const std::string& table) {
  if (table.empty()) {
    std::fprintf(stderr, "logfs bench plot-ratios: --table=FILE.md is required\n");
    return 1;
  }
  std::ifstream in(table);
  if (!in) {
    std::fprintf(stderr, "logfs bench plot-ratios: cannot read %s: %s\n", table.c_str(),
                 std::strerror(errno));
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto charts = bench::ParseCompareTable(text.str());
  if (!charts.ok()) {
    std::fprintf(stderr, "logfs bench plot-ratios: %s: %s\n", table.c_str(),
                 std::string(charts.status().message()).c_str());
    return 1;
  }
  const std::string prefix =
      absl::EndsWith(table, ".md") ? table.substr(0, table.size() - 3) : table;
  for (const auto& [letter, chart] : *charts) {
    const std::string path = absl::StrCat(prefix, "-", std::string(1, letter), ".svg");
    std::ofstream out(path, std::ios::trunc);
    out << bench::RatioChartSvg(chart);
    out.close();
    if (!out) {
      std::fprintf(stderr, "logfs bench plot-ratios: cannot write %s: %s\n", path.c_str(),
                   std::strerror(errno));
      return 1;
    }
    std::printf("%s\n", path.c_str());
  }
  return 0;
}

}  // namespace

int BenchMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs bench wal (--dir=PATH | --meta=HOST:PORT) [--threads=N --files=N "
      "--record_bytes=B --records=N | --seconds=S --sync_every=N]\n"
      "logfs bench read --dir=PATH [--files=N --file_bytes=B --read_bytes=B "
      "--scan_bytes=B --threads=N --ops=N | --seconds=S --cache=cold|warm|block|both|all --keep]\n"
      "logfs bench meta (--dir=PATH | --meta=HOST:PORT) [--threads=N --files=N --shared_dir "
      "--processes]\n"
      "  wal, read: [--plot=FILE.svg]\n"
      "logfs bench plot-ratios --table=FILE.md\n"
      "logfs bench cache-replay [--trace=FILE,...|scan_hot --capacity_mib=N,...]";
  InitProcess(&argc, &argv, kUsage,
              {{"bench:", "bench wal:", "bench read:", "bench meta:", "bench plot-ratios:",
                "bench cache-replay:"},
               {"meta", "seconds"}});
  if (!AtMostArgs(argc, argv, 1, kUsage)) return 1;
  std::string workload = argc == 2 ? argv[1] : "";
  if (workload == "plot-ratios") return PlotRatios(FLAGS_table);
  if (!CheckPlotPath(FLAGS_plot)) return 1;
  absl::StatusOr<std::string> report;
  if (workload == "wal" || workload == "read") LoadTheMountsSecret(FLAGS_dir, "logfs bench");
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
    options.plot = FLAGS_plot;
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
    options.plot = FLAGS_plot;
    report = bench::RunReadBench(options);
  } else if (workload == "meta") {
    if (!FLAGS_plot.empty()) {
      std::fprintf(stderr, "logfs bench meta: --plot is for bench wal and bench read\n");
      return 1;
    }
    bench::MetaBenchOptions options;
    options.dir = FLAGS_dir;
    options.meta = FLAGS_meta;
    options.workers = FLAGS_threads;
    // --files means another thing to bench wal, whose default is 1.
    options.files =
        gflags::GetCommandLineFlagInfoOrDie("files").is_default ? 1000 : FLAGS_files;
    options.shared_dir = FLAGS_shared_dir;
    options.processes = FLAGS_processes;
    report = bench::RunMetaBench(options);
  } else if (workload == "cache-replay") {
    bench::CacheReplayOptions options;
    options.traces = absl::StrSplit(FLAGS_trace, ',', absl::SkipEmpty());
    options.capacity_mib.clear();
    for (absl::string_view mib : absl::StrSplit(FLAGS_capacity_mib, ',', absl::SkipEmpty())) {
      uint64_t value = 0;
      if (!absl::SimpleAtoi(mib, &value) || value == 0) {
        std::fprintf(stderr, "logfs bench cache-replay: --capacity_mib: '%s' is not a positive "
                     "number of MiB\n", std::string(mib).c_str());
        return 1;
      }
      options.capacity_mib.push_back(value);
    }
    report = bench::RunCacheReplay(options);
  } else {
    std::fprintf(stderr, "logfs bench: expected a workload: wal, read, meta, cache-replay or "
                 "plot-ratios\n");
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
