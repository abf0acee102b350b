#include "bench/wal_bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/latency_histogram.h"
#include "bench/svg_plot.h"
#include "fsclient/client.h"
#include "src/status/macros.h"
#include "src/status/syscall_error.h"
#include "store/format/xattr_names.h"
#include "wal/writer_counters.h"

namespace logfs::bench {
namespace {

// One open WAL file. Append and Sync may be called from several threads.
class WalFile {
 public:
  virtual ~WalFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Sync() = 0;
};

// Where the files live.
class WalTarget {
 public:
  virtual ~WalTarget() = default;
  virtual absl::StatusOr<std::unique_ptr<WalFile>> Open(int index) = 0;
  // The meta server behind the files, "" if they are not on logfs.
  virtual std::string meta_address() = 0;
  // The client's writer counters (wal/writer_counters.h), if on logfs.
  virtual std::optional<std::string> writer_counters() = 0;
  // Whether the logfs client runs in this process (its CPU counts).
  virtual bool in_process() const = 0;
};

class PosixFile : public WalFile {
 public:
  explicit PosixFile(int fd) : fd_(fd) {}
  ~PosixFile() override { close(fd_); }
  absl::Status Append(absl::string_view data) override {
    ssize_t n = write(fd_, data.data(), data.size());
    if (n == static_cast<ssize_t>(data.size())) return absl::OkStatus();
    return SyscallError(n < 0 ? errno : EIO, "write");
  }
  absl::Status Sync() override {
    if (fdatasync(fd_) == 0) return absl::OkStatus();
    return SyscallError(errno, "fdatasync");
  }

 private:
  const int fd_;
};

class PosixTarget : public WalTarget {
 public:
  explicit PosixTarget(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<std::unique_ptr<WalFile>> Open(int index) override {
    std::string path = absl::StrCat(dir_, "/bench-wal-", getpid(), "-", index, ".log");
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return SyscallError(errno, absl::StrCat("open ", path));
    unlink(path.c_str());  // removed when closed
    return std::make_unique<PosixFile>(fd);
  }
  std::string meta_address() override {
    return GetXattr(dir_, format::kMetaAddressXattr).value_or("");
  }
  std::optional<std::string> writer_counters() override {
    return GetXattr(dir_, format::kStatsXattr);
  }
  bool in_process() const override { return false; }

 private:
  const std::string dir_;
};

// Through fsclient::Client, the client library the FUSE layer wraps.
class LibraryFile : public WalFile {
 public:
  LibraryFile(fsclient::Client* mount, std::unique_ptr<fsclient::OpenFile> file)
      : mount_(mount), file_(std::move(file)) {}
  ~LibraryFile() override { mount_->Release(std::move(file_)).IgnoreError(); }
  absl::Status Append(absl::string_view data) override {
    return mount_->Write(*file_, 0, data.data(), data.size());  // O_APPEND
  }
  absl::Status Sync() override {
    absl::Notification done;
    absl::Status status;
    mount_->Sync(*file_, [&](absl::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

 private:
  fsclient::Client* const mount_;
  std::unique_ptr<fsclient::OpenFile> file_;
};

class LibraryTarget : public WalTarget {
 public:
  static absl::StatusOr<std::unique_ptr<LibraryTarget>> Connect(const std::string& meta) {
    fsclient::ClientOptions options;
    options.meta_address = meta;
    auto target = std::unique_ptr<LibraryTarget>(new LibraryTarget(options));
    absl::Status status = target->mount_.Connect();
    if (!status.ok()) return status;
    std::string name = absl::StrCat("bench-wal-", getpid(), "-", absl::ToUnixMicros(absl::Now()));
    auto dir = target->mount_.Create(1, name, S_IFDIR | 0755, 0, 0, "", 0);
    if (!dir.ok()) return dir.status();
    target->dir_ino_ = dir->ino();
    target->dir_name_ = name;
    status = target->mount_.SetXattr(target->dir_ino_, format::kKindXattr, "wal", 0);
    if (!status.ok()) return status;
    return target;
  }
  ~LibraryTarget() override {
    for (const auto& name : files_) mount_.Unlink(dir_ino_, name, false).IgnoreError();
    if (dir_ino_ != 0) mount_.Unlink(1, dir_name_, true).IgnoreError();
    mount_.Shutdown();
  }
  absl::StatusOr<std::unique_ptr<WalFile>> Open(int index) override {
    std::string name = absl::StrCat("wal-", index, ".log");
    auto attr = mount_.Create(dir_ino_, name, S_IFREG | 0644, 0, 0, "", 0);
    if (!attr.ok()) return attr.status();
    files_.push_back(name);
    auto file = mount_.Open(attr->ino(), O_WRONLY | O_APPEND);
    if (!file.ok()) return file.status();
    return std::make_unique<LibraryFile>(&mount_, std::move(*file));
  }
  std::string meta_address() override { return meta_; }
  std::optional<std::string> writer_counters() override { return wal::FormatWriterCounters(); }
  bool in_process() const override { return true; }

 private:
  explicit LibraryTarget(const fsclient::ClientOptions& options)
      : meta_(options.meta_address), mount_(options) {}

  const std::string meta_;
  fsclient::Client mount_;
  uint64_t dir_ino_ = 0;
  std::string dir_name_;
  std::vector<std::string> files_;
};

struct Snapshot {
  std::map<int, double> cpu_seconds;  // by pid
  std::map<std::string, uint64_t> writer;
  SegdSnapshot segd;
  bool have_writer = false;
  bool have_segd = false;  // meta answered
};

Snapshot Take(WalTarget& target, const std::string& meta) {
  Snapshot s;
  s.cpu_seconds = LogfsCpuSeconds(target.in_process());
  if (auto text = target.writer_counters()) {
    s.writer = ParseCounters(*text);
    s.have_writer = true;
  }
  if (!meta.empty()) {
    if (auto counters = SegdCounters(meta); counters.ok()) {
      s.segd = std::move(*counters);
      s.have_segd = true;
    }
  }
  return s;
}

absl::Status CheckOptions(const WalBenchOptions& options) {
  if (options.dir.empty() == options.meta.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --dir (a directory) and --meta (the client library)");
  }
  if (options.threads < 1) return absl::InvalidArgumentError("--threads must be at least 1");
  if (options.files < 1) return absl::InvalidArgumentError("--files must be at least 1");
  if (options.record_bytes == 0) return absl::InvalidArgumentError("--record_bytes must be > 0");
  if (options.sync_every < 1) return absl::InvalidArgumentError("--sync_every must be at least 1");
  if (options.seconds < 0) return absl::InvalidArgumentError("--seconds must not be negative");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<WalTarget>> OpenTarget(const WalBenchOptions& options) {
  if (!options.dir.empty()) return std::make_unique<PosixTarget>(options.dir);
  auto library = LibraryTarget::Connect(options.meta);
  if (!library.ok()) return library.status();
  return std::unique_ptr<WalTarget>(std::move(*library));
}

// What the writer threads measured.
struct WriterRuns {
  LatencyHistogram latency;            // every append (+sync)
  std::vector<int64_t> sync_times_ns;  // since the start, sorted
  uint64_t synced_appends = 0;
  double seconds = 0;
};

// Runs `options.threads` writers over `files` (thread t writes file t %
// files) for `options.seconds`, or `records` appends each when untimed.
absl::StatusOr<WriterRuns> RunWriters(const WalBenchOptions& options,
                                      std::vector<std::unique_ptr<WalFile>>& files,
                                      uint64_t records) {
  const bool timed = options.seconds > 0;
  std::vector<LatencyHistogram> histograms(options.threads);
  std::vector<std::vector<int64_t>> sync_times(options.threads);  // ns since start
  std::vector<uint64_t> synced_appends(options.threads, 0);
  absl::Mutex error_mu;
  absl::Status error;
  const std::string record(options.record_bytes, 'r');
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + absl::Seconds(options.seconds);
  std::vector<std::thread> threads;
  for (int t = 0; t < options.threads; ++t) {
    threads.emplace_back([&, t] {
      WalFile& file = *files[t % options.files];
      for (uint64_t i = 0; timed ? absl::Now() < deadline : i < records; ++i) {
        absl::Time begin = absl::Now();
        absl::Status s = file.Append(record);
        bool sync = (i + 1) % options.sync_every == 0;
        if (s.ok() && sync) s = file.Sync();
        if (!s.ok()) {
          absl::MutexLock lock(&error_mu);
          if (error.ok()) error = s;
          return;
        }
        absl::Time end = absl::Now();
        histograms[t].Add(absl::ToInt64Nanoseconds(end - begin));
        if (sync) {
          sync_times[t].push_back(absl::ToInt64Nanoseconds(end - start));
          synced_appends[t] = i + 1;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  WriterRuns runs;
  runs.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  if (!error.ok()) return error;
  for (int t = 0; t < options.threads; ++t) {
    runs.latency.Merge(histograms[t]);
    runs.sync_times_ns.insert(runs.sync_times_ns.end(), sync_times[t].begin(), sync_times[t].end());
    runs.synced_appends += synced_appends[t];
  }
  std::sort(runs.sync_times_ns.begin(), runs.sync_times_ns.end());
  return runs;
}

// The counters of the writer (client) and of the segment servers between
// two snapshots.
std::string CounterLines(const Snapshot& before, const Snapshot& after) {
  std::string report;
  if (before.have_writer && after.have_writer) {
    auto d = Delta(before.writer, after.writer);
    absl::StrAppendFormat(
        &report,
        "client: appends=%d fsyncs=%d sync_groups=%d sync_rounds=%d appends per sync group=%.2f "
        "fsyncs per sync group=%.2f\n",
        d["appends"], d["syncs"], d["sync_groups"], d["sync_rounds"],
        Ratio(d["appends"], d["sync_groups"]), Ratio(d["synced_waiters"], d["sync_groups"]));
  } else {
    absl::StrAppend(&report, "client: n/a (not a logfs directory)\n");
  }
  SegdDelta segd;
  if (before.have_segd && after.have_segd) segd = SegdCountersBetween(before.segd, after.segd);
  if (segd.answered > 0) {
    auto& d = segd.sum;
    // Servers that did not answer (twice) are left out, and said so.
    const std::string who =
        segd.answered == segd.servers
            ? "segd"
            : absl::StrCat("segd (", segd.answered, " of ", segd.servers, " servers answered)");
    absl::StrAppendFormat(&report,
                          "%s: appends=%d fdatasyncs=%d sync_rounds=%d journal_wraps=%d "
                          "appends per fdatasync=%.2f\n",
                          who, d["appends"], d["fdatasyncs"], d["sync_rounds"], d["journal_wraps"],
                          Ratio(d["appends"], d["fdatasyncs"]));
  } else if (segd.servers > 0) {
    absl::StrAppend(&report, "segd: n/a (none of ", segd.servers, " servers answered)\n");
  } else {
    absl::StrAppend(&report, "segd: n/a (no segment servers reachable)\n");
  }
  return report;
}

}  // namespace

absl::StatusOr<WalBenchResult> RunWalBench(const WalBenchOptions& options) {
  RETURN_IF_ERROR(CheckOptions(options));
  const uint64_t records = options.records > 0 ? options.records : (options.seconds > 0 ? 0 : 1000);
  ASSIGN_OR_RETURN(std::unique_ptr<WalTarget> target, OpenTarget(options));
  std::vector<std::unique_ptr<WalFile>> files;
  for (int f = 0; f < options.files; ++f) {
    auto file = target->Open(f);
    if (!file.ok()) return file.status();
    files.push_back(std::move(*file));
  }
  const std::string meta = target->meta_address();
  Snapshot before = Take(*target, meta);
  absl::StatusOr<WriterRuns> runs = RunWriters(options, files, records);
  Snapshot after = Take(*target, meta);
  files.clear();
  target.reset();
  if (!runs.ok()) return runs.status();

  const double seconds = runs->seconds;
  const std::vector<int64_t>& times = runs->sync_times_ns;
  LatencyHistogram between;
  for (size_t i = 1; i < times.size(); ++i) between.Add(times[i] - times[i - 1]);
  WalBenchResult result;
  const uint64_t appends = runs->latency.count();
  const uint64_t syncs = times.size();
  result.p50_ns = runs->latency.Percentile(50);
  result.syncs_per_second = syncs / seconds;
  std::string report = absl::StrCat(
      absl::StrFormat("bench wal: %s threads=%d files=%d record_bytes=%d sync_every=%d\n",
                      options.dir.empty() ? "meta=" + options.meta : "dir=" + options.dir,
                      options.threads, options.files, options.record_bytes, options.sync_every),
      runs->latency.Report("append+sync latency"), between.Report("time between syncs"),
      absl::StrFormat("appends=%d seconds=%.3f appends/s=%.0f syncs/s=%.0f "
                      "append bytes/s=%.0f appends per sync=%.2f\n",
                      appends, seconds, appends / seconds, result.syncs_per_second,
                      appends * options.record_bytes / seconds, Ratio(appends, syncs)),
      CounterLines(before, after));
  const double cpu = CpuSecondsBetween(before.cpu_seconds, after.cpu_seconds);
  absl::StrAppendFormat(&report,
                        "cpu: logfs processes used %.3f s; per 1000 synced appends %.4f s\n", cpu,
                        Ratio(cpu * 1000, runs->synced_appends));
  if (!options.plot.empty()) {
    RETURN_IF_ERROR(WriteLatencyChart(
        options.plot,
        absl::StrFormat("logfs bench wal: %d B appends, fdatasync every %d, %d thread%s, %d file%s",
                        options.record_bytes, options.sync_every, options.threads,
                        options.threads == 1 ? "" : "s", options.files,
                        options.files == 1 ? "" : "s"),
        {{"append+sync", runs->latency.samples()}}));
    absl::StrAppend(&report, "plot: ", options.plot, "\n");
  }
  result.report = std::move(report);
  return result;
}

}  // namespace logfs::bench
