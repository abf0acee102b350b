#include "store/client/admin_client.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/blocking_counter.h"
#include "src/status/macros.h"

namespace logfs::client {

MetaClientOptions AdminClient::MetaOptions(absl::Duration timeout) {
  MetaClientOptions options;
  options.timeout = timeout;
  options.retry_window = std::nullopt;  // a tool reports meta down at once
  return options;
}

AdminClient::AdminClient(std::string meta_address, absl::Duration timeout)
    : timeout_(timeout),
      work_(asio::make_work_guard(io_)),
      clients_(io_),
      meta_(io_, MetaEndpoints::OverPool(clients_, meta_address), MetaOptions(timeout)),
      segd_(clients_),
      io_thread_([this] { io_.run(); }) {}

AdminClient::~AdminClient() {
  clients_.ShutdownAll();
  work_.reset();
  io_.stop();
  io_thread_.join();
}

std::vector<AdminClient::ReplicaState> AdminClient::MetaStates() {
  // All at once: a replica that does not answer costs the timeout once,
  // not once per replica behind it.
  std::vector<ReplicaState> states;
  for (absl::string_view address : absl::StrSplit(meta_.addresses(), ',')) {
    states.push_back({std::string(address), absl::UnavailableError("not asked")});
  }
  absl::BlockingCounter answered(static_cast<int>(states.size()));
  for (ReplicaState& replica : states) {
    clients_.Get(replica.address)
        ->AsyncCall(format::MessageType::kMetaState, proto::Empty(), {}, timeout_,
                    [&replica, &answered](absl::Status s, format::Frame frame) {
                      proto::MetaStateResponse state;
                      if (s.ok() && !state.ParseFromString(frame.message)) {
                        s = absl::DataLossError("unparseable MetaState answer");
                      }
                      replica.state = s.ok() ? absl::StatusOr<proto::MetaStateResponse>(state)
                                             : absl::StatusOr<proto::MetaStateResponse>(s);
                      answered.DecrementCount();
                    });
  }
  answered.Wait();
  // The later calls go straight to the replica that says it is active,
  // not through a dead or stopped one first.
  for (const ReplicaState& replica : states) {
    if (replica.state.ok() && replica.state->active()) meta_.UseReplica(replica.address);
  }
  return states;
}

absl::StatusOr<proto::ListServersResponse> AdminClient::ListServers() {
  proto::ListServersResponse all;
  uint64_t start_server_id = 0;
  for (size_t page = 0; page < kAdminPagesMax; ++page) {
    ASSIGN_OR_RETURN(proto::ListServersResponse response, meta_.ListServers(start_server_id));
    for (auto& server : *response.mutable_servers()) *all.add_servers() = std::move(server);
    const uint64_t next_server_id = response.next_server_id();
    if (page == 0) {
      // Every page carries meta's re-replication progress (the
      // rereplication_* fields); the first page's is kept.
      response.clear_servers();
      response.clear_next_server_id();
      all.MergeFrom(response);
    }
    if (next_server_id == 0) return all;
    if (next_server_id <= start_server_id) {
      return absl::InternalError("ListServers went backwards");
    }
    start_server_id = next_server_id;
  }
  return absl::ResourceExhaustedError(absl::StrCat("more than ", kAdminPagesMax, " pages"));
}

absl::Status AdminClient::ForEachFile(const std::function<void(const proto::Inode&)>& fn) {
  uint64_t start_ino = 0;
  for (size_t page = 0; page < kAdminPagesMax; ++page) {
    ASSIGN_OR_RETURN(proto::ListSegmentsResponse response, meta_.ListSegments(start_ino));
    for (const auto& file : response.files()) fn(file);
    if (response.next_ino() == 0) return absl::OkStatus();
    if (response.next_ino() <= start_ino) return absl::InternalError("ListSegments went backwards");
    start_ino = response.next_ino();
  }
  return absl::ResourceExhaustedError(absl::StrCat("more than ", kAdminPagesMax, " pages"));
}

}  // namespace logfs::client
