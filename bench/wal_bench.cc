#include "bench/wal_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/latency_histogram.h"

namespace logfs::bench {

absl::StatusOr<WalBenchResult> RunWalBench(const WalBenchOptions& options) {
  if (options.threads < 1 || options.files < 1 || options.record_bytes == 0 ||
      options.sync_every < 1 || options.dir.empty()) {
    return absl::InvalidArgumentError("bench wal: need --dir, and positive sizes and counts");
  }
  std::vector<int> fds;
  for (int f = 0; f < options.files; ++f) {
    std::string path = absl::StrCat(options.dir, "/bench-wal-", getpid(), "-", f, ".log");
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
    unlink(path.c_str());  // removed when closed
    fds.push_back(fd);
  }
  std::vector<LatencyHistogram> histograms(options.threads);
  std::atomic<uint64_t> syncs{0};
  absl::Mutex error_mu;
  absl::Status error;
  std::string record(options.record_bytes, 'r');
  absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      int fd = fds[t % options.files];
      for (uint64_t i = 0; i < options.records; ++i) {
        absl::Time begin = absl::Now();
        ssize_t n = write(fd, record.data(), record.size());
        bool sync = (i + 1) % options.sync_every == 0;
        int rc = (n == static_cast<ssize_t>(record.size()) && sync) ? fdatasync(fd) : 0;
        if (n != static_cast<ssize_t>(record.size()) || rc != 0) {
          absl::MutexLock lock(&error_mu);
          error = absl::ErrnoToStatus(errno, "append");
          return;
        }
        if (sync) syncs.fetch_add(1);
        histograms[t].Add(absl::ToInt64Nanoseconds(absl::Now() - begin));
      }
    });
  }
  for (auto& th : threads) th.join();
  double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (int fd : fds) close(fd);
  if (!error.ok()) return error;
  LatencyHistogram all;
  for (auto& h : histograms) all.Merge(h);
  WalBenchResult result;
  result.p50_ns = all.Percentile(50);
  result.syncs_per_second = syncs.load() / seconds;
  uint64_t appends = all.count();
  result.report = absl::StrCat(
      absl::StrFormat("bench wal: dir=%s threads=%d files=%d record_bytes=%d sync_every=%d\n",
                      options.dir, options.threads, options.files, options.record_bytes,
                      options.sync_every),
      all.Report("append+sync latency"),
      absl::StrFormat("appends=%d seconds=%.3f appends/s=%.0f syncs/s=%.0f "
                      "append bytes/s=%.0f appends per sync=%.2f\n",
                      appends, seconds, appends / seconds, result.syncs_per_second,
                      appends * options.record_bytes / seconds,
                      syncs.load() == 0 ? 0.0 : double(appends) / syncs.load()));
  return result;
}

}  // namespace logfs::bench
