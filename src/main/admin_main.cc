// `logfs status` and `logfs fsck`: ask a running cluster's meta (and, for
// fsck, every replica) and print what they say. Neither takes positional
// arguments. Exit codes: status 0, or 1 if meta cannot be asked (or on a
// usage error); fsck 0 when every sealed segment is fully replicated and
// its replicas agree, 1 while any is not, 2 if meta cannot be asked (or on
// a usage error).
//
// `logfs status --watch[=SECONDS]` asks again every SECONDS (default 2,
// as watch(1)): on a terminal it clears the screen and redraws, else it
// writes a separator line between reports; --watch_count=N stops after N
// reports (exit 1 if the last could not be had); ctrl-C (SIGINT) or
// SIGTERM ends it with exit 0. `--format=json` prints each report as one
// JSON object on one line (admin::FormatClusterStatusJson), for scripts;
// with --watch, one such line per report and nothing else (JSON Lines).
// A --format other than text or json is a usage error. fsck shows its
// progress on stderr (util::ProgressMeter): one '\r' line on a terminal,
// plain lines otherwise; --noprogress turns it off.
#include <gflags/gflags.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "src/main/subcommands.h"
#include "src/util/progress_meter.h"
#include "store/admin/cluster_status.h"
#include "store/admin/fsck.h"

DECLARE_string(meta);           // src/main/server_main.cc
DECLARE_int32(rpc_timeout_ms);  // src/main/server_main.cc

DEFINE_double(watch, 0,
              "status: ask again every this many seconds until ctrl-C (--watch alone: 2); "
              "0: once");
DEFINE_int32(watch_count, 0, "status: with --watch, stop after this many reports (0: no limit)");
DEFINE_string(format, "text",
              "status: text (a table for people) or json (one JSON object a report, one line, "
              "for scripts)");
DEFINE_bool(progress, true,
            "fsck: show progress on stderr (a '\\r' line on a terminal, else plain lines)");
DEFINE_bool(repair_shares, false,
            "fsck: have meta rewrite its share records (which files list each shared segment) "
            "that disagree with the files; they are checked either way");

namespace logfs::main {
namespace {

constexpr double kDefaultWatchSeconds = 2;
constexpr double kWatchSecondsMax = 86400;

bool RequireMeta(const char* what) {
  if (!FLAGS_meta.empty()) return true;
  std::fprintf(stderr, "logfs %s: --meta=HOST:PORT is required\n", what);
  return false;
}

// gflags wants a value for a double flag: "--watch" (or "-watch") alone
// becomes "--watch=2"; followed by a number ("--watch 5") gflags takes that
// as its value. `storage` keeps the rewritten strings alive.
void DefaultBareWatch(int argc, char** argv, std::vector<std::string>* storage) {
  storage->reserve(argc);
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;
    double seconds = 0;
    const bool valued = i + 1 < argc && absl::SimpleAtod(argv[i + 1], &seconds);
    if (!valued && (std::strcmp(argv[i], "--watch") == 0 || std::strcmp(argv[i], "-watch") == 0)) {
      storage->push_back("--watch=" + std::to_string(static_cast<int>(kDefaultWatchSeconds)));
      argv[i] = storage->back().data();
    }
  }
}

std::string UtcNow() {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(), absl::UTCTimeZone());
}

bool JsonFormat() { return FLAGS_format == "json"; }

// One report to stdout, as --format says; false if meta could not be
// asked (said on stderr).
bool PrintStatus(const admin::ClusterStatusOptions& options) {
  auto status = admin::GetClusterStatus(options);
  if (!status.ok()) {
    std::fprintf(stderr, "logfs status: cannot ask meta at %s: %s\n", FLAGS_meta.c_str(),
                 std::string(status.status().message()).c_str());
    return false;
  }
  const std::string report =
      JsonFormat() ? admin::FormatClusterStatusJson(*status) : admin::FormatClusterStatus(*status);
  std::fputs(report.c_str(), stdout);
  return true;
}

// Waits `seconds` or until SIGINT/SIGTERM (blocked by the caller, so one
// that came during a report is taken here). True when a signal came.
bool WaitOrSignal(const sigset_t& signals, double seconds) {
  const absl::Time deadline = absl::Now() + absl::Seconds(seconds);
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    timespec ts = absl::ToTimespec(left);
    if (sigtimedwait(&signals, nullptr, &ts) >= 0) return true;
    if (errno != EINTR && errno != EAGAIN) return false;
  }
}

sigset_t StopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

// What comes before text report `n` of a watch: on a terminal a clear
// screen and a header, else a separator line.
void PrintWatchHeader(bool tty, int n) {
  if (tty) {
    std::fputs("\x1b[H\x1b[2J", stdout);  // cursor home, clear screen
    std::printf("every %gs: logfs status --meta=%s   %s\n\n", FLAGS_watch, FLAGS_meta.c_str(),
                UtcNow().c_str());
  } else {
    std::printf("--- %s (report %d)\n", UtcNow().c_str(), n);
  }
}

// Runs with StopSignals() blocked in every thread: they stay pending while
// a report is fetched and end the wait that follows. JSON reports get no
// header or separator: each is a line of its own.
int WatchStatus(const admin::ClusterStatusOptions& options) {
  const sigset_t signals = StopSignals();
  const bool tty = isatty(STDOUT_FILENO) == 1;
  for (int n = 1;; ++n) {
    if (!JsonFormat()) PrintWatchHeader(tty, n);
    std::fflush(stdout);  // before an error on stderr
    // A failed report is said and the watch goes on: meta may come back.
    const bool ok = PrintStatus(options);
    std::fflush(stdout);
    if (FLAGS_watch_count > 0 && n >= FLAGS_watch_count) return ok ? 0 : 1;
    if (WaitOrSignal(signals, FLAGS_watch)) return 0;
  }
}

}  // namespace

int StatusMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs status --meta=HOST:PORT [--cluster_secret_file=PATH] [--watch[=SECONDS]] "
      "[--watch_count=N] [--format=text|json]";
  std::vector<std::string> rewritten;
  DefaultBareWatch(argc, argv, &rewritten);
  // Blocked before any thread starts (glog's, the client's), so that a
  // watch takes ctrl-C in WaitOrSignal; unblocked again for a single report.
  const sigset_t stop_signals = StopSignals();
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  InitProcess(&argc, &argv, kUsage, {{"status:"}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 1;
  if (!RequireMeta("status")) return 1;
  if (!(FLAGS_watch >= 0 && FLAGS_watch <= kWatchSecondsMax) ||
      (FLAGS_watch > 0 && FLAGS_watch < 0.1)) {
    std::fprintf(stderr, "logfs status: --watch=%g: want 0 (once) or 0.1 to %g seconds\n",
                 FLAGS_watch, kWatchSecondsMax);
    return 1;
  }
  if (FLAGS_watch_count < 0) {
    std::fprintf(stderr, "logfs status: --watch_count=%d: want 0 (no limit) or more\n",
                 FLAGS_watch_count);
    return 1;
  }
  if (FLAGS_format != "text" && FLAGS_format != "json") {
    std::fprintf(stderr, "logfs status: --format=%s: want text or json\n", FLAGS_format.c_str());
    return 1;
  }
  admin::ClusterStatusOptions options;
  options.meta_address = FLAGS_meta;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  if (FLAGS_watch > 0) return WatchStatus(options);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  return PrintStatus(options) ? 0 : 1;
}

int FsckMain(int argc, char** argv) {
  constexpr char kUsage[] =
      "logfs fsck --meta=HOST:PORT [--cluster_secret_file=PATH] [--noprogress] "
      "[--repair_shares]";
  InitProcess(&argc, &argv, kUsage, {{"fsck:"}, {"meta", "rpc_timeout_ms"}});
  if (!AtMostArgs(argc, argv, 0, kUsage)) return 2;
  if (!RequireMeta("fsck")) return 2;
  admin::FsckOptions options;
  options.meta_address = FLAGS_meta;
  options.rpc_timeout_ms = FLAGS_rpc_timeout_ms;
  options.repair_shares = FLAGS_repair_shares;
  std::unique_ptr<util::ProgressMeter> meter;
  if (FLAGS_progress) {
    util::ProgressMeterOptions progress;
    progress.label = "fsck";
    progress.verb = "checked";
    progress.unit = "segments";
    progress.tty = isatty(STDERR_FILENO) == 1;
    meter = std::make_unique<util::ProgressMeter>(stderr, progress);
    options.progress = [&meter](uint64_t checked, uint64_t total) {
      meter->Update(checked, total);
    };
  }
  auto report = admin::RunFsck(options);
  if (meter != nullptr) meter->Finish();
  if (!report.ok()) {
    std::fprintf(stderr, "logfs fsck: cannot ask meta at %s: %s\n", FLAGS_meta.c_str(),
                 std::string(report.status().message()).c_str());
    return 2;
  }
  std::fputs(admin::FormatFsck(*report).c_str(), stdout);
  return admin::Healthy(*report) ? 0 : 1;
}

}  // namespace logfs::main
