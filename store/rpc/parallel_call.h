// Sends requests to several servers at once and waits for every answer
// (or its deadline). Blocks the caller: not for io threads.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/rpc/client_pool.h"
#include "store/format/frame.h"

namespace logfs::rpc {

struct CallResult {
  absl::Status status;
  format::Frame response;
};

// One call of a fan-out: `request` (not owned; alive until CallEach
// returns) of `type` to the server at `address`.
struct Call {
  std::string address;
  format::MessageType type = format::MessageType::kInvalid;
  const google::protobuf::MessageLite* request = nullptr;
};

// One result per call, in order; every call has `timeout`.
std::vector<CallResult> CallEach(ClientPool& pool, const std::vector<Call>& calls,
                                 absl::Duration timeout);

// The same request to every address: one result per address, in order.
std::vector<CallResult> CallEach(ClientPool& pool, const std::vector<std::string>& addresses,
                                 format::MessageType type,
                                 const google::protobuf::MessageLite& request,
                                 absl::Duration timeout);

}  // namespace logfs::rpc
