#include "bench/meta_worker_report.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "src/util/coding.h"

namespace logfs::bench {
namespace {

WorkerReport Sample() {
  WorkerReport report;
  report.ops = 3;
  report.start_ns = 1'000'000'000'123;
  report.end_ns = 1'000'000'900'456;
  report.latency_ns = {10, 20000, 3};
  return report;
}

void ExpectSame(const WorkerReport& a, const WorkerReport& b) {
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.latency_ns, b.latency_ns);
  EXPECT_EQ(a.error, b.error);
}

TEST(WorkerReportTest, RoundTripsFiguresAndError) {
  WorkerReport report = Sample();
  auto decoded = DecodeWorkerReport(EncodeWorkerReport(report));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(report, *decoded);
  report.error = absl::NotFoundError("worker 1, stat: stat /d/f.1.2: gone (errno 2, ENOENT)");
  report.latency_ns.clear();
  decoded = DecodeWorkerReport(EncodeWorkerReport(report));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSame(report, *decoded);
}

TEST(WorkerReportTest, EveryTruncationAndAnExtraByteAreDataLoss) {
  const std::string bytes = EncodeWorkerReport(Sample());
  for (size_t size = 0; size < bytes.size(); ++size) {
    auto decoded = DecodeWorkerReport(absl::string_view(bytes.data(), size));
    EXPECT_EQ(absl::StatusCode::kDataLoss, decoded.status().code()) << size;
  }
  EXPECT_EQ(absl::StatusCode::kDataLoss, DecodeWorkerReport(bytes + "x").status().code());
}

TEST(WorkerReportTest, HugeSampleCountAndUnknownCodeAreDataLoss) {
  // Goal: a count whose byte size overflows, and a status code absl does
  // not have, are refused rather than trusted.
  std::string bytes = EncodeWorkerReport(Sample());
  std::string huge = bytes;
  util::EncodeFixed64(huge.data() + 28, ~uint64_t{0} / 4);
  EXPECT_EQ(absl::StatusCode::kDataLoss, DecodeWorkerReport(huge).status().code());
  std::string bad_code = bytes;
  util::EncodeFixed32(bad_code.data() + 24, 99);
  EXPECT_EQ(absl::StatusCode::kDataLoss, DecodeWorkerReport(bad_code).status().code());
}

TEST(WorkerReportTest, TravelsOverASocketAndEofIsUnavailable) {
  int fds[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, fds));
  WorkerReport report = Sample();
  report.error = absl::DataLossError("worker 0, readdir: listed 1 names, want 2");
  ASSERT_TRUE(SendWorkerReport(fds[1], report).ok());
  auto received = ReceiveWorkerReport(fds[0]);
  ASSERT_TRUE(received.ok()) << received.status();
  ExpectSame(report, *received);
  // (b) A frame cut short by the peer's close, then a clean EOF.
  char length[8];
  util::EncodeFixed64(length, 100);
  ASSERT_EQ(8, write(fds[1], length, 8));
  close(fds[1]);
  EXPECT_EQ(absl::StatusCode::kDataLoss, ReceiveWorkerReport(fds[0]).status().code());
  EXPECT_EQ(absl::StatusCode::kUnavailable, ReceiveWorkerReport(fds[0]).status().code());
  close(fds[0]);
}

}  // namespace
}  // namespace logfs::bench
