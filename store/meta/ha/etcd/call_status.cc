#include "store/meta/ha/etcd/call_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace logfs::etcd {
namespace {

// gRPC's status codes have absl's numbers (etcd_client.cc static_asserts it).
using Code = absl::StatusCode;

bool Contains(absl::string_view message, absl::string_view text) {
  return absl::StrContains(message, text);
}

}  // namespace

bool CertainlyNotApplied(int grpc_code, absl::string_view message) {
  const Code code = static_cast<Code>(grpc_code);
  if (code == Code::kUnavailable) {
    // Refused by etcd's interceptors before the handler ran.
    if (message == "etcdserver: no leader" || message == "etcdserver: not capable" ||
        message == "etcdserver: rpc not supported for learner") {
      return true;
    }
    // gRPC's load balancer had no connected member to pick (round_robin's
    // and pick_first's texts): the request never left this process.
    return Contains(message, "connections to all backends failing") ||
           Contains(message, "failed to connect to all addresses");
  }
  // Checked before etcd proposes the request (v3_server.go, the gap between
  // applied and committed index).
  return code == Code::kResourceExhausted && message == "etcdserver: too many requests";
}

absl::Status CallError(int grpc_code, absl::string_view message, CallKind kind,
                       absl::string_view what, absl::string_view endpoints) {
  const Code code = static_cast<Code>(grpc_code);
  const bool write = kind == CallKind::kWrite;
  auto text = [&](absl::string_view note) {
    return absl::StrCat("etcd ", what, " via [", endpoints, "]: ", message, note);
  };
  if (CertainlyNotApplied(grpc_code, message)) return absl::UnavailableError(text(""));
  constexpr absl::string_view kUnknown = " (outcome unknown)";
  switch (code) {
    case Code::kDeadlineExceeded:
      return absl::DeadlineExceededError(text(write ? kUnknown : ""));
    case Code::kUnavailable:
    case Code::kCancelled:
      // A broken connection, or etcd's own "request timed out", "server
      // stopped", "leader changed": a write may be in the log already.
      if (write) return absl::DeadlineExceededError(text(kUnknown));
      return absl::UnavailableError(text(""));
    case Code::kNotFound:
      return absl::NotFoundError(text(""));
    case Code::kOutOfRange:
      if (Contains(message, "has been compacted")) return absl::FailedPreconditionError(text(""));
      return absl::InvalidArgumentError(text(""));  // a future revision, a too large lease TTL
    case Code::kInvalidArgument:
      return absl::InvalidArgumentError(text(""));
    case Code::kResourceExhausted:
      if (Contains(message, "database space exceeded")) {
        return absl::ResourceExhaustedError(text(""));
      }
      // gRPC's "received message larger than max" on either side.
      return absl::InvalidArgumentError(text(""));
    default:
      return absl::InternalError(text(write ? kUnknown : ""));
  }
}

}  // namespace logfs::etcd
