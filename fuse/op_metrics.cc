#include "fuse/op_metrics.h"

#include <array>
#include <atomic>
#include <cstring>
#include <string>

#include "absl/time/time.h"
#include "src/metrics/histogram.h"

namespace logfs::fuse {
namespace {

constexpr int kOps = static_cast<int>(FuseOp::kCount);
// errno values 1..kErrnoMax-1 each have a counter (Linux's run to 133,
// EHWPOISON); anything else counts in slot 0, exported as errno="other".
constexpr int kErrnoMax = 134;

constexpr std::array<const char*, kOps> kNames = {
    "lookup",   "forget",    "getattr",     "setattr",  "readlink", "mknod",
    "mkdir",    "unlink",    "rmdir",       "symlink",  "rename",   "link",
    "open",     "read",      "write",       "flush",    "release",  "fsync",
    "opendir",  "readdir",   "releasedir",  "fsyncdir", "statfs",   "setxattr",
    "getxattr", "listxattr", "removexattr", "create",   "fallocate", "copy_file_range"};

struct OpCounters {
  metrics::LatencyHistogram latency;
  std::array<std::atomic<uint64_t>, kErrnoMax> errors{};
};

std::array<OpCounters, kOps>& Counters() {
  static auto* counters =
      new std::array<OpCounters, kOps>();  // never destroyed: ops may run at exit
  return *counters;
}

std::atomic<uint64_t> g_reply_failures{0};
std::atomic<uint64_t> g_gathered_replies{0};

int ErrnoSlot(int error) { return error > 0 && error < kErrnoMax ? error : 0; }

std::string ErrnoName(int slot) {
  if (slot == 0) return "other";
  const char* name = strerrorname_np(slot);
  return name != nullptr ? name : "other";
}

}  // namespace

const char* FuseOpName(FuseOp op) { return kNames[static_cast<int>(op)]; }

void RecordFuseOp(FuseOp op, std::chrono::steady_clock::duration elapsed, int error) {
  OpCounters& c = Counters()[static_cast<int>(op)];
  c.latency.Observe(absl::FromChrono(elapsed));
  if (error != 0) c.errors[ErrnoSlot(error)].fetch_add(1, std::memory_order_relaxed);
}

void RecordFuseReplyFailure() { g_reply_failures.fetch_add(1, std::memory_order_relaxed); }
void RecordFuseGatheredReply() { g_gathered_replies.fetch_add(1, std::memory_order_relaxed); }

void CollectFuseOpMetrics(metrics::FamilyList& out) {
  out.AddCounter("logfs_fuse_reply_failures_total",
                 "FUSE replies the kernel refused (their callers never got one).",
                 static_cast<double>(g_reply_failures.load(std::memory_order_relaxed)));
  out.AddCounter("logfs_fuse_gathered_replies_total",
                 "Read replies copied into one buffer: more pieces than writev takes.",
                 static_cast<double>(g_gathered_replies.load(std::memory_order_relaxed)));
  for (int op = 0; op < kOps; ++op) {
    const OpCounters& c = Counters()[op];
    const metrics::Histogram::Snapshot latency = c.latency.Read();
    if (latency.count == 0) continue;
    out.AddHistogram("logfs_fuse_op_duration_seconds",
                     "FUSE requests by op, from the callback to the reply.", latency, 1e-9,
                     {{"op", kNames[op]}});
    for (int slot = 0; slot < kErrnoMax; ++slot) {
      const uint64_t n = c.errors[slot].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.AddCounter("logfs_fuse_op_errors_total", "FUSE requests answered with an errno.",
                     static_cast<double>(n), {{"op", kNames[op]}, {"errno", ErrnoName(slot)}});
    }
  }
}

uint64_t TEST_FuseOpErrors(FuseOp op, int error) {
  return Counters()[static_cast<int>(op)].errors[ErrnoSlot(error)].load();
}
uint64_t TEST_FuseReplyFailures() { return g_reply_failures.load(); }
uint64_t TEST_FuseGatheredReplies() { return g_gathered_replies.load(); }

}  // namespace logfs::fuse
