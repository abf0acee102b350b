// How a failed etcd gRPC call becomes an absl::Status (the contract is in
// etcd_client.h), and which failures a call may retry. Pure functions of the
// gRPC status code (grpc::StatusCode's numbers, which are the gRPC wire
// codes) and message, so they are tested without a server and this header
// needs no gRPC include. Sources: etcd 3.4
// etcdserver/api/v3rpc/rpctypes/error.go (etcd's codes and messages),
// etcdserver/api/v3rpc/interceptor.go (what is refused before the handler
// runs), grpc/include/grpcpp/impl/codegen/status_code_enum.h. Thread-safe.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace logfs::etcd {

// Whether the call may have changed etcd's state.
enum class CallKind { kRead, kWrite };

// True when the request certainly did not reach etcd's Raft log: gRPC found
// no connection to send it on, or etcd refused it before its handler ran (no
// leader, not capable, too many requests, learner). Such a failure may be
// retried on another member even for a write.
bool CertainlyNotApplied(int grpc_code, absl::string_view message);

// The status a failed call returns. `what` names the call ("Txn"),
// `endpoints` the endpoints; both go into the message with etcd's or gRPC's
// own text. `grpc_code` must not be OK (0).
absl::Status CallError(int grpc_code, absl::string_view message, CallKind kind,
                       absl::string_view what, absl::string_view endpoints);

}  // namespace logfs::etcd
