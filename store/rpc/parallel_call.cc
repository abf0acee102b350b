#include "store/rpc/parallel_call.h"

#include <glog/logging.h>

#include "absl/synchronization/blocking_counter.h"

namespace logfs::rpc {

std::vector<CallResult> CallEach(ClientPool& pool, const std::vector<Call>& calls,
                                 absl::Duration timeout) {
  std::vector<CallResult> results(calls.size());
  absl::BlockingCounter pending(static_cast<int>(calls.size()));
  for (size_t i = 0; i < calls.size(); ++i) {
    CHECK(calls[i].request != nullptr);
    pool.Get(calls[i].address)
        ->AsyncCall(calls[i].type, *calls[i].request, {}, timeout,
                    [&results, &pending, i](absl::Status s, format::Frame f) {
                      results[i].status = std::move(s);
                      results[i].response = std::move(f);
                      pending.DecrementCount();
                    });
  }
  pending.Wait();
  return results;
}

std::vector<CallResult> CallEach(ClientPool& pool, const std::vector<std::string>& addresses,
                                 format::MessageType type,
                                 const google::protobuf::MessageLite& request,
                                 absl::Duration timeout) {
  std::vector<Call> calls;
  calls.reserve(addresses.size());
  for (const std::string& address : addresses) calls.push_back({address, type, &request});
  return CallEach(pool, calls, timeout);
}

}  // namespace logfs::rpc
