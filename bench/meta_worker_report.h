// `logfs bench meta`: what one worker measured in one phase, and how it
// travels from the worker (a thread or a forked process) to the
// coordinator over a stream socket. The bytes never leave the host and
// are read by the same binary that wrote them, so the encoding is the
// host's (little-endian, src/util/coding.h) and not a documented format.
//
// A message is a fixed64 length, then the report:
//   fixed64 ops, fixed64 start_ns, fixed64 end_ns,
//   fixed32 status code, fixed64 samples, fixed32 message bytes,
//   samples x fixed64 latency_ns, the status message.
// Thread-safe: pure functions, and the socket calls touch only `fd`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace logfs::bench {

struct WorkerReport {
  uint64_t ops = 0;        // operations done (readdir: names listed)
  int64_t start_ns = 0;    // CLOCK_MONOTONIC when the phase began, ns
  int64_t end_ns = 0;      // ... and when its last operation returned
  std::vector<uint64_t> latency_ns;  // one sample per timed call
  absl::Status error;      // the first failure; the phase stopped there
};

// The most bytes a report may take: 10^7 samples (STYLE §8: bounded), far
// more than the bench's own limits produce.
inline constexpr uint64_t kWorkerReportBytesMax = (uint64_t{10'000'000} * 8) + (1u << 20);

std::string EncodeWorkerReport(const WorkerReport& report);
// kDataLoss when `bytes` is not exactly one encoded report (short, long, a
// sample count or message length past the end, an unknown status code).
absl::StatusOr<WorkerReport> DecodeWorkerReport(absl::string_view bytes);

// Writes one framed report to the stream socket `fd` (MSG_NOSIGNAL: a
// closed peer is EPIPE, not a signal). Errors: the errno of send.
absl::Status SendWorkerReport(int fd, const WorkerReport& report);
// Reads one framed report from `fd`, blocking. kUnavailable on EOF before
// the first byte (the worker closed its socket: it is gone); kDataLoss on
// EOF within a message or a frame over kWorkerReportBytesMax; the errno of
// recv otherwise.
absl::StatusOr<WorkerReport> ReceiveWorkerReport(int fd);

}  // namespace logfs::bench
