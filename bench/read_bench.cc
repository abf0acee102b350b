#include "bench/read_bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "bench/bench_util.h"
#include "bench/latency_histogram.h"
#include "bench/svg_plot.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"
#include "store/format/xattr_names.h"

namespace logfs::bench {
namespace {

constexpr size_t kWriteChunk = 1u << 20;

// The word at 8-aligned `offset` of file `file` (splitmix64 of both).
uint64_t Word(uint64_t file, uint64_t offset) {
  uint64_t z = (file << 48) ^ offset ^ 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string FilePath(const ReadBenchOptions& o, int i) {
  return absl::StrCat(o.dir, "/bench-read-", i, ".dat");
}

absl::Status CreateFile(const std::string& path, uint64_t file, uint64_t bytes) {
  unlink(path.c_str());  // a short leftover: start again (files are append-only on logfs)
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return SyscallError(errno, absl::StrCat("create ", path));
  std::string chunk(kWriteChunk, '\0');
  absl::Status status;
  for (uint64_t at = 0; at < bytes && status.ok(); at += chunk.size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(chunk.size(), bytes - at));
    for (size_t w = 0; w + 8 <= n; w += 8) {
      uint64_t word = Word(file, at + w);
      std::memcpy(&chunk[w], &word, 8);
    }
    if (write(fd, chunk.data(), n) != static_cast<ssize_t>(n)) {
      status = SyscallError(errno, absl::StrCat("write ", path));
    }
  }
  if (status.ok() && fsync(fd) != 0) status = SyscallError(errno, "fsync");
  if (close(fd) != 0 && status.ok()) status = SyscallError(errno, "close");
  return status;
}

absl::Status PrepareFiles(const ReadBenchOptions& o) {
  for (int i = 0; i < o.files; ++i) {
    struct stat st;
    std::string path = FilePath(o, i);
    if (stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == o.file_bytes) {
      continue;
    }
    absl::Status s = CreateFile(path, i, o.file_bytes);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadWholeFiles(const std::vector<int>& fds, uint64_t bytes) {
  std::string buf(kWriteChunk, '\0');
  for (int fd : fds) {
    for (uint64_t at = 0; at < bytes; at += buf.size()) {
      if (pread(fd, buf.data(), buf.size(), static_cast<off_t>(at)) < 0) {
        return SyscallError(errno, "warm-up read");
      }
    }
  }
  return absl::OkStatus();
}

std::string HitRatio(const std::map<std::string, uint64_t>& d) {
  auto hits = d.find("block_cache_hits"), misses = d.find("block_cache_misses");
  if (hits == d.end() || misses == d.end()) return "n/a";
  if (hits->second + misses->second == 0) return "n/a";  // the page cache served every read
  return absl::StrFormat("%.3f", Ratio(hits->second, hits->second + misses->second));
}

absl::Status CheckOptions(const ReadBenchOptions& o) {
  const uint64_t span = std::max(o.read_bytes, o.scan_bytes);
  auto bad = [](const char* what) { return absl::InvalidArgumentError(what); };
  if (o.dir.empty()) return bad("--dir is required");
  if (o.threads < 1) return bad("--threads must be at least 1");
  if (o.files < 1) return bad("--files must be at least 1");
  if (o.read_bytes == 0 || o.read_bytes % 8 != 0) {
    return bad("--read_bytes must be a positive multiple of 8");
  }
  if (o.scan_bytes % o.read_bytes != 0) return bad("--scan_bytes must be a multiple of --read_bytes");
  if ((o.cache == "block" || o.cache == "all") && o.read_bytes % 512 != 0) {
    return bad("--cache=block reads with O_DIRECT: --read_bytes must be a multiple of 512");
  }
  if (span > o.file_bytes) return bad("--read_bytes and --scan_bytes must be <= --file_bytes");
  if (o.seconds < 0) return bad("--seconds must not be negative");
  if (o.cache != "cold" && o.cache != "warm" && o.cache != "block" && o.cache != "both" &&
      o.cache != "all") {
    return bad("--cache must be cold, warm, block, both or all");
  }
  return absl::OkStatus();
}

// The files of the run, open; closed when it goes.
struct OpenFiles {
  std::vector<int> fds;
  ~OpenFiles() { CloseAll(); }
  void CloseAll() {
    for (int fd : fds) close(fd);
    fds.clear();
  }
};

// Opens the files for `phase`: cold drops the kernel's caches and the
// mount's block cache first; warm reads every file once; block warms the
// mount's cache through the page cache, then reopens with O_DIRECT, so
// the measured reads bypass the page cache and on logfs each one reaches
// the mount and its block cache (on ext4, the disk).
absl::Status OpenForPhase(const ReadBenchOptions& o, const std::string& phase, bool on_logfs,
                          OpenFiles& files) {
  files.CloseAll();
  if (phase == "cold") {
    RETURN_IF_ERROR(DropKernelCaches());
    if (on_logfs && setxattr(o.dir.c_str(), format::kDropBlockCacheXattr, "1", 1, 0) != 0) {
      return SyscallError(errno, "setxattr " + std::string(format::kDropBlockCacheXattr));
    }
  }
  for (int i = 0; i < o.files; ++i) {
    int fd = open(FilePath(o, i).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return SyscallError(errno, "open " + FilePath(o, i));
    posix_fadvise(fd, 0, 0, o.scan_bytes > 0 ? POSIX_FADV_SEQUENTIAL : POSIX_FADV_RANDOM);
    files.fds.push_back(fd);
  }
  // So the warm-up reads of the block phase reach the mount and fill its cache.
  if (phase == "block") RETURN_IF_ERROR(DropKernelCaches());
  if (phase != "cold") RETURN_IF_ERROR(ReadWholeFiles(files.fds, o.file_bytes));
  if (phase != "block") return absl::OkStatus();
  files.CloseAll();
  for (int i = 0; i < o.files; ++i) {
    int fd = open(FilePath(o, i).c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) return SyscallError(errno, "open O_DIRECT " + FilePath(o, i));
    files.fds.push_back(fd);
  }
  return absl::OkStatus();
}

// Where the reads of a phase go. Cold reads never touch a span twice: the
// threads share one shuffled list of every span-aligned offset, so a read
// cannot be served by what an earlier one brought into a cache (the phase
// ends early if the list runs out). Warm reads pick offsets at random.
class ReadOffsets {
 public:
  ReadOffsets(const ReadBenchOptions& o, bool cold)
      : o_(o), span_(std::max(o.read_bytes, o.scan_bytes)), spans_per_file_(o.file_bytes / span_) {
    if (!cold) return;
    unread_.resize(o.files * spans_per_file_);
    for (size_t i = 0; i < unread_.size(); ++i) unread_[i] = i;
    std::shuffle(unread_.begin(), unread_.end(), std::mt19937_64(42));
  }
  // The next (file, offset) for a thread with `rng`; false once a cold
  // phase has read every span.
  bool Next(std::mt19937_64& rng, uint64_t* file, uint64_t* offset) {
    if (unread_.empty()) {
      const uint64_t positions = (o_.file_bytes - span_) / o_.read_bytes + 1;
      *file = rng() % o_.files;
      *offset = (rng() % positions) * o_.read_bytes;
      return true;
    }
    size_t k = next_unread_.fetch_add(1);
    if (k >= unread_.size()) return false;
    *file = unread_[k] / spans_per_file_;
    *offset = unread_[k] % spans_per_file_ * span_;
    return true;
  }

 private:
  const ReadBenchOptions& o_;
  const uint64_t span_;
  const uint64_t spans_per_file_;
  std::vector<uint64_t> unread_;  // file * spans_per_file + span index
  std::atomic<size_t> next_unread_{0};
};

// Reads one span (one read, or --scan_bytes of them) and checks the first
// word of each read.
absl::Status ReadSpan(const ReadBenchOptions& o, int fd, uint64_t file, uint64_t offset,
                      absl::Span<char> buf) {
  for (uint64_t done = 0; done < std::max<uint64_t>(o.scan_bytes, 1); done += o.read_bytes) {
    const uint64_t at = offset + done;
    ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(at));
    if (n < 0) return SyscallError(errno, "pread");
    uint64_t word = 0;
    if (n == static_cast<ssize_t>(buf.size())) std::memcpy(&word, buf.data(), 8);
    if (n != static_cast<ssize_t>(buf.size()) || word != Word(file, at)) {
      return absl::DataLossError(
          absl::StrCat("wrong bytes at offset ", at, " of ", FilePath(o, file)));
    }
  }
  return absl::OkStatus();
}

// Runs the threads of one phase; the latency of every span read.
absl::StatusOr<LatencyHistogram> MeasurePhase(const ReadBenchOptions& o, bool cold,
                                              const std::vector<int>& fds, double* seconds) {
  const bool timed = o.seconds > 0;
  const uint64_t ops = o.ops > 0 ? o.ops : (timed ? 0 : 1000);
  ReadOffsets offsets(o, cold);
  std::vector<LatencyHistogram> histograms(o.threads);
  absl::Mutex error_mu;
  absl::Status error;
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + absl::Seconds(o.seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t * 7919 + 17);
      // Page-aligned, as O_DIRECT wants.
      std::unique_ptr<char, decltype(&std::free)> aligned(
          static_cast<char*>(std::aligned_alloc(4096, (o.read_bytes + 4095) / 4096 * 4096)),
          &std::free);
      absl::Span<char> buf(aligned.get(), o.read_bytes);
      uint64_t file = 0, offset = 0;
      for (uint64_t i = 0; timed ? absl::Now() < deadline : i < ops; ++i) {
        if (!offsets.Next(rng, &file, &offset)) break;
        absl::Time begin = absl::Now();
        if (absl::Status s = ReadSpan(o, fds[file], file, offset, buf); !s.ok()) {
          absl::MutexLock lock(&error_mu);
          if (error.ok()) error = s;
          return;
        }
        histograms[t].Add(absl::ToInt64Nanoseconds(absl::Now() - begin));
      }
    });
  }
  for (auto& th : threads) th.join();
  *seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!error.ok()) return error;
  LatencyHistogram all;
  for (auto& h : histograms) all.Merge(h);
  return all;
}

}  // namespace

absl::StatusOr<std::string> RunReadBench(const ReadBenchOptions& o) {
  RETURN_IF_ERROR(CheckOptions(o));
  RETURN_IF_ERROR(PrepareFiles(o));
  std::string report = absl::StrFormat(
      "bench read: dir=%s files=%d file_bytes=%d read_bytes=%d scan_bytes=%d threads=%d\n", o.dir,
      o.files, o.file_bytes, o.read_bytes, o.scan_bytes, o.threads);
  std::vector<std::string> phases;
  if (o.cache == "cold" || o.cache == "both" || o.cache == "all") phases.push_back("cold");
  if (o.cache == "warm" || o.cache == "both" || o.cache == "all") phases.push_back("warm");
  if (o.cache == "block" || o.cache == "all") phases.push_back("block");
  // A logfs mount answers the stats xattr; only then is there a block cache
  // to empty (setting the xattr elsewhere would store it).
  const bool on_logfs = GetXattr(o.dir, format::kStatsXattr).has_value();
  OpenFiles files;
  std::vector<LatencySeries> plotted;
  for (const std::string& phase : phases) {
    RETURN_IF_ERROR(OpenForPhase(o, phase, on_logfs, files));
    auto stats_before = ParseCounters(GetXattr(o.dir, format::kStatsXattr).value_or(""));
    double seconds = 0;
    ASSIGN_OR_RETURN(LatencyHistogram all, MeasurePhase(o, phase == "cold", files.fds, &seconds));
    auto stats_after = ParseCounters(GetXattr(o.dir, format::kStatsXattr).value_or(""));
    const uint64_t bytes_per_op = std::max(o.scan_bytes, o.read_bytes);
    absl::StrAppend(&report, all.Report(phase + " read latency"),
                    absl::StrFormat("%s: ops=%d seconds=%.3f ops/s=%.0f bytes/s=%.0f "
                                    "block cache hit ratio=%s\n",
                                    phase, all.count(), seconds, all.count() / seconds,
                                    all.count() * bytes_per_op / seconds,
                                    HitRatio(Delta(stats_before, stats_after))));
    if (!o.plot.empty()) plotted.push_back({phase, all.samples()});
  }
  files.CloseAll();
  if (!o.keep) {
    for (int i = 0; i < o.files; ++i) unlink(FilePath(o, i).c_str());
  }
  if (!o.plot.empty()) {
    const std::string what =
        o.scan_bytes > 0 ? absl::StrFormat("%d B scans in %d B reads", o.scan_bytes, o.read_bytes)
                         : absl::StrFormat("%d B random reads", o.read_bytes);
    RETURN_IF_ERROR(WriteLatencyChart(
        o.plot,
        absl::StrFormat("logfs bench read: %s, %d threads, %d files", what, o.threads, o.files),
        plotted));
    absl::StrAppend(&report, "plot: ", o.plot, "\n");
  }
  return report;
}

}  // namespace logfs::bench
