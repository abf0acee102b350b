#include "bench/meta_worker_report.h"

#include <sys/socket.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "src/status/syscall_error.h"
#include "src/util/coding.h"

namespace logfs::bench {
namespace {

// ops, start_ns, end_ns, code, samples, message bytes.
constexpr size_t kHeaderBytes = 8 + 8 + 8 + 4 + 8 + 4;
constexpr size_t kLengthBytes = 8;

absl::Status SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "send of a worker report");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads exactly `size` bytes; returns how many came before EOF (< size
// only at EOF).
absl::StatusOr<size_t> ReceiveAll(int fd, char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::recv(fd, data + done, size - done, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SyscallError(errno, "recv of a worker report");
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

std::string EncodeWorkerReport(const WorkerReport& report) {
  const std::string message(report.error.message());
  std::string out(kHeaderBytes + report.latency_ns.size() * 8 + message.size(), '\0');
  char* p = out.data();
  util::EncodeFixed64(p, report.ops);
  util::EncodeFixed64(p + 8, static_cast<uint64_t>(report.start_ns));
  util::EncodeFixed64(p + 16, static_cast<uint64_t>(report.end_ns));
  util::EncodeFixed32(p + 24, static_cast<uint32_t>(report.error.code()));
  util::EncodeFixed64(p + 28, report.latency_ns.size());
  util::EncodeFixed32(p + 36, static_cast<uint32_t>(message.size()));
  p += kHeaderBytes;
  for (uint64_t ns : report.latency_ns) {
    util::EncodeFixed64(p, ns);
    p += 8;
  }
  message.copy(p, message.size());
  return out;
}

absl::StatusOr<WorkerReport> DecodeWorkerReport(absl::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return absl::DataLossError(absl::StrCat("worker report of ", bytes.size(), " bytes is short"));
  }
  const char* p = bytes.data();
  WorkerReport report;
  report.ops = util::DecodeFixed64(p);
  report.start_ns = static_cast<int64_t>(util::DecodeFixed64(p + 8));
  report.end_ns = static_cast<int64_t>(util::DecodeFixed64(p + 16));
  const uint32_t code = util::DecodeFixed32(p + 24);
  const uint64_t samples = util::DecodeFixed64(p + 28);
  const uint32_t message_bytes = util::DecodeFixed32(p + 36);
  const uint64_t room = bytes.size() - kHeaderBytes;
  // Checked in this order so that no product overflows.
  if (samples > room / 8 || room - samples * 8 != message_bytes) {
    return absl::DataLossError(absl::StrCat("worker report of ", bytes.size(), " bytes claims ",
                                            samples, " samples and a message of ",
                                            message_bytes, " bytes"));
  }
  if (code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::DataLossError(absl::StrCat("worker report has unknown status code ", code));
  }
  p += kHeaderBytes;
  report.latency_ns.resize(samples);
  for (uint64_t& ns : report.latency_ns) {
    ns = util::DecodeFixed64(p);
    p += 8;
  }
  if (code != 0) {
    report.error = absl::Status(static_cast<absl::StatusCode>(code),
                                absl::string_view(p, message_bytes));
  }
  return report;
}

absl::Status SendWorkerReport(int fd, const WorkerReport& report) {
  const std::string body = EncodeWorkerReport(report);
  char length[kLengthBytes];
  util::EncodeFixed64(length, body.size());
  if (absl::Status s = SendAll(fd, length, sizeof(length)); !s.ok()) return s;
  return SendAll(fd, body.data(), body.size());
}

absl::StatusOr<WorkerReport> ReceiveWorkerReport(int fd) {
  char length[kLengthBytes];
  absl::StatusOr<size_t> got = ReceiveAll(fd, length, sizeof(length));
  if (!got.ok()) return got.status();
  if (*got == 0) return absl::UnavailableError("the worker closed its socket without a report");
  if (*got < sizeof(length)) return absl::DataLossError("a worker report's length is cut short");
  const uint64_t size = util::DecodeFixed64(length);
  if (size > kWorkerReportBytesMax) {
    return absl::DataLossError(absl::StrCat("a worker report of ", size, " bytes is over the ",
                                            kWorkerReportBytesMax, "-byte limit"));
  }
  std::string body(size, '\0');
  got = ReceiveAll(fd, body.data(), body.size());
  if (!got.ok()) return got.status();
  if (*got < size) {
    return absl::DataLossError(absl::StrCat("a worker report is cut short at ", *got, " of ",
                                            size, " bytes"));
  }
  return DecodeWorkerReport(body);
}

}  // namespace logfs::bench
