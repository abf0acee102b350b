// Unit tests of src/metrics: bucket boundaries, the text the serializer
// writes for our families, and the HTTP server's answers to good and bad
// requests over 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "src/metrics/family_list.h"
#include "src/metrics/histogram.h"
#include "src/metrics/metrics_server.h"
#include "tests/fakes/loopback_exchange.h"

namespace logfs::metrics {
namespace {

using ::logfs::testing::ExchangeOverLoopback;

TEST(HistogramTest, ValueOnABoundFallsInThatBucket) {
  Histogram h(25, 4);  // bounds 25, 50, 100, 200, then +Inf
  EXPECT_EQ(h.BucketOf(0), 0);
  EXPECT_EQ(h.BucketOf(25), 0);
  EXPECT_EQ(h.BucketOf(26), 1);
  EXPECT_EQ(h.BucketOf(50), 1);
  EXPECT_EQ(h.BucketOf(51), 2);
  EXPECT_EQ(h.BucketOf(100), 2);
  EXPECT_EQ(h.BucketOf(200), 3);
  EXPECT_EQ(h.BucketOf(201), 4);
  EXPECT_EQ(h.BucketOf(~uint64_t{0}), 4);
}

TEST(HistogramTest, SnapshotCountsAndSums) {
  LatencyHistogram h;
  h.Observe(absl::Microseconds(10));   // bucket 0 (<= 25 us)
  h.Observe(absl::Microseconds(100));  // bucket 2 (<= 100 us)
  h.Observe(absl::Seconds(100));       // +Inf
  h.Observe(absl::Microseconds(-5));   // clamped to 0
  const Histogram::Snapshot s = h.Read();
  EXPECT_EQ(s.count, 4u);
  EXPECT_EQ(s.sum, 10000u + 100000u + 100000000000u);
  EXPECT_EQ(s.buckets[0], 2u);
  EXPECT_EQ(s.buckets[2], 1u);
  EXPECT_EQ(s.buckets[Histogram::kBoundsMax], 1u);
  EXPECT_EQ(s.bound(Histogram::kBoundsMax - 1), 25000ull << 19);  // 13.1 s
}

TEST(FamilyListTest, SerializesCountersGaugesAndCumulativeBuckets) {
  FamilyList list;
  list.AddCounter("logfs_x_total", "X.", 3, {{"op", "read"}});
  list.AddCounter("logfs_x_total", "X.", 4, {{"op", "write"}});
  list.AddGauge("logfs_y_bytes", "Y.", 7);
  Histogram h(1, 2);  // bounds 1, 2
  h.Observe(1);
  h.Observe(2);
  h.Observe(5);
  list.AddHistogram("logfs_z", "Z.", h.Read(), 1);
  ASSERT_EQ(list.families().size(), 3u);
  const std::string text = Serialize(list.families());
  EXPECT_TRUE(absl::StrContains(text, "# TYPE logfs_x_total counter\n"));
  EXPECT_TRUE(absl::StrContains(text, "logfs_x_total{op=\"read\"} 3\n"));
  EXPECT_TRUE(absl::StrContains(text, "logfs_x_total{op=\"write\"} 4\n"));
  EXPECT_TRUE(absl::StrContains(text, "logfs_y_bytes 7\n"));
  EXPECT_TRUE(absl::StrContains(text, "logfs_z_bucket{le=\"1\"} 1\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "logfs_z_bucket{le=\"2\"} 2\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "logfs_z_bucket{le=\"+Inf\"} 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "logfs_z_count 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(text, "logfs_z_sum 8\n")) << text;
}

// Goal: /metrics answers a GET with our families, a malformed request or
// another method gets an HTTP error, and the server keeps serving.
TEST(MetricsServerTest, AnswersGetAndRefusesGarbage) {
  auto server = MetricsServer::Start("127.0.0.1:0", [](FamilyList& list) {
    list.AddCounter("logfs_test_total", "A test counter.", 42);
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string& address = (*server)->bound_address();
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port)) << address;
  ASSERT_GT(port, 0);
  const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
  // (a) A scrape: 200, the text format, our counter and build_info.
  std::string reply = ExchangeOverLoopback(port, get);
  // prometheus-cpp 1.0.1 says "text/plain; charset=utf-8", which Prometheus
  // reads as the text format 0.0.4.
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.1 200")) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "Content-Type: text/plain")) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "\nlogfs_test_total 42\n")) << reply;
  EXPECT_TRUE(absl::StrContains(reply, "logfs_build_info{version=\"")) << reply;
  // (b) Garbage, a method without a handler, a path we do not serve.
  reply = ExchangeOverLoopback(port, std::string("\x01\x02garbage\r\n\r\n", 13));
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.0 400 Bad Request")) << reply;
  reply = ExchangeOverLoopback(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.0 404")) << reply;  // no POST handler
  reply = ExchangeOverLoopback(port, "GET /nothing HTTP/1.0\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(reply, "HTTP/1.0 404")) << reply;
  // (c) Still up.
  EXPECT_TRUE(absl::StrContains(ExchangeOverLoopback(port, get), "\nlogfs_test_total 42\n"));
}

TEST(MetricsServerTest, RejectsMalformedAddresses) {
  auto noop = [](FamilyList&) {};
  for (const char* bad : {"", "9100", "localhost:9100", "127.0.0.1:x", "127.0.0.1:70000"}) {
    auto server = MetricsServer::Start(bad, noop);
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace logfs::metrics
