// Per-op counters of this mount's FUSE operations: a latency histogram per
// op (its count is the op count) and error counts by op and errno, kept in
// relaxed atomics (no lock per request) and turned into
// logfs_fuse_op_duration_seconds{op} and logfs_fuse_op_errors_total{op,errno}
// at scrape time. An op's latency runs from the callback's start to its
// reply (for flush and fsync: to the writer's completion, which replies).
//
// Thread-safe; process-wide (one mount per process), monotonic.
#pragma once

#include <chrono>

#include "src/metrics/family_list.h"

namespace logfs::fuse {

enum class FuseOp : int {
  kLookup,
  kForget,
  kGetAttr,
  kSetAttr,
  kReadlink,
  kMknod,
  kMkdir,
  kUnlink,
  kRmdir,
  kSymlink,
  kRename,
  kLink,
  kOpen,
  kRead,
  kWrite,
  kFlush,
  kRelease,
  kFsync,
  kOpendir,
  kReaddir,
  kReleasedir,
  kFsyncdir,
  kStatfs,
  kSetxattr,
  kGetxattr,
  kListxattr,
  kRemovexattr,
  kCreate,
  kFallocate,
  kCopyFileRange,
  kCount,  // not an op
};

// "lookup", "getattr", ...: the op label.
const char* FuseOpName(FuseOp op);

// One op done after `seconds`; `error` its errno (0: success).
void RecordFuseOp(FuseOp op, std::chrono::steady_clock::duration elapsed, int error);

// Measures one op from construction to Done (once).
class FuseOpTimer {
 public:
  explicit FuseOpTimer(FuseOp op) : op_(op), start_(std::chrono::steady_clock::now()) {}
  void Done(int error) const {
    RecordFuseOp(op_, std::chrono::steady_clock::now() - start_, error);
  }

 private:
  FuseOp op_;
  std::chrono::steady_clock::time_point start_;
};

// A reply the kernel refused (fuse/request.h: its caller then waits for
// good), and a read reply gathered into one buffer because it had more
// pieces than writev(2) takes (fuse/ops.cc ReplyData).
void RecordFuseReplyFailure();
void RecordFuseGatheredReply();

// Adds the ops seen so far (ops never called have no series), and the
// two counters above.
void CollectFuseOpMetrics(metrics::FamilyList& out);

// Test hooks: the count of op `op` that failed with `error`; the counts
// of the two records above.
uint64_t TEST_FuseOpErrors(FuseOp op, int error);
uint64_t TEST_FuseReplyFailures();
uint64_t TEST_FuseGatheredReplies();

}  // namespace logfs::fuse
