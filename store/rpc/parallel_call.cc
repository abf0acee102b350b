#include "store/rpc/parallel_call.h"

#include "absl/synchronization/blocking_counter.h"

namespace logfs::rpc {

std::vector<CallResult> CallEach(ClientPool& pool, const std::vector<std::string>& addresses,
                                 format::MessageType type,
                                 const google::protobuf::MessageLite& request,
                                 absl::Duration timeout) {
  std::vector<CallResult> results(addresses.size());
  absl::BlockingCounter pending(static_cast<int>(addresses.size()));
  for (size_t i = 0; i < addresses.size(); ++i) {
    pool.Get(addresses[i])
        ->AsyncCall(type, request, {}, timeout,
                    [&results, &pending, i](absl::Status s, format::Frame f) {
                      results[i].status = std::move(s);
                      results[i].response = std::move(f);
                      pending.DecrementCount();
                    });
  }
  pending.Wait();
  return results;
}

}  // namespace logfs::rpc
