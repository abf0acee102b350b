// How failed etcd calls map to absl codes (call_status.h): above all, that a
// write whose outcome is unknown never comes back as kUnavailable (which
// means "not applied, retry") and that etcd's own refusals keep their meaning.
#include "store/meta/ha/etcd/call_status.h"

#include <gtest/gtest.h>

namespace logfs::etcd {
namespace {

using Code = absl::StatusCode;

int G(Code code) { return static_cast<int>(code); }  // gRPC codes have absl's numbers

Code Map(Code grpc, absl::string_view message, CallKind kind) {
  return CallError(G(grpc), message, kind, "Txn", "127.0.0.1:1").code();
}

TEST(CallStatusTest, RefusalsBeforeTheLogAreUnavailableForWrites) {
  for (absl::string_view m : {"etcdserver: no leader", "etcdserver: not capable"}) {
    EXPECT_TRUE(CertainlyNotApplied(G(Code::kUnavailable), m));
    EXPECT_EQ(Code::kUnavailable, Map(Code::kUnavailable, m, CallKind::kWrite)) << m;
  }
  const absl::string_view rr =
      "connections to all backends failing; last error: UNKNOWN: "
      "ipv4:127.0.0.1:1: Failed to connect to remote host";
  EXPECT_EQ(Code::kUnavailable, Map(Code::kUnavailable, rr, CallKind::kWrite));
  EXPECT_EQ(Code::kUnavailable,
            Map(Code::kResourceExhausted, "etcdserver: too many requests", CallKind::kWrite));
}

TEST(CallStatusTest, MaybeAppliedWritesAreDeadlineExceeded) {
  for (absl::string_view m : {"etcdserver: request timed out", "etcdserver: server stopped",
                              "Socket closed", "etcdserver: leader changed"}) {
    EXPECT_FALSE(CertainlyNotApplied(G(Code::kUnavailable), m));
    EXPECT_EQ(Code::kDeadlineExceeded, Map(Code::kUnavailable, m, CallKind::kWrite)) << m;
    EXPECT_EQ(Code::kUnavailable, Map(Code::kUnavailable, m, CallKind::kRead)) << m;
  }
  EXPECT_EQ(Code::kDeadlineExceeded,
            Map(Code::kDeadlineExceeded, "Deadline Exceeded", CallKind::kWrite));
  EXPECT_EQ(Code::kDeadlineExceeded, Map(Code::kCancelled, "Cancelled", CallKind::kWrite));
  const absl::Status s = CallError(G(Code::kUnknown), "odd", CallKind::kWrite, "Put", "h:1");
  EXPECT_EQ(Code::kInternal, s.code());
  EXPECT_EQ("etcd Put via [h:1]: odd (outcome unknown)", s.message());
}

TEST(CallStatusTest, EtcdErrorsKeepTheirMeaning) {
  EXPECT_EQ(Code::kNotFound,
            Map(Code::kNotFound, "etcdserver: requested lease not found", CallKind::kWrite));
  EXPECT_EQ(Code::kFailedPrecondition,
            Map(Code::kOutOfRange, "etcdserver: mvcc: required revision has been compacted",
                CallKind::kWrite));
  EXPECT_EQ(Code::kInvalidArgument,
            Map(Code::kOutOfRange, "etcdserver: mvcc: required revision is a future revision",
                CallKind::kWrite));
  EXPECT_EQ(Code::kInvalidArgument,
            Map(Code::kInvalidArgument, "etcdserver: request is too large", CallKind::kWrite));
  EXPECT_EQ(Code::kInvalidArgument,
            Map(Code::kResourceExhausted, "grpc: received message larger than max (3 vs. 2)",
                CallKind::kWrite));
  EXPECT_EQ(
      Code::kResourceExhausted,
      Map(Code::kResourceExhausted, "etcdserver: mvcc: database space exceeded", CallKind::kWrite));
  EXPECT_EQ(Code::kInternal,
            Map(Code::kPermissionDenied, "etcdserver: permission denied", CallKind::kRead));
}

}  // namespace
}  // namespace logfs::etcd
