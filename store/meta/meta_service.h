// The meta server's request handler: decodes each meta request, runs it
// against the Namespace and returns the response to send, as docs/rpc.md
// ("Meta server") says. Every request is answered inline: the caller
// (MetaServer's RpcServer handler, or a fuzz target) sends what it
// returns.
//
// Thread-safety: Handle and TakeSession may be called concurrently from
// any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message_lite.h"
#include "store/format/frame.h"
#include "store/format/logfs.pb.h"
#include "store/meta/coherence/mount_caches.h"
#include "store/meta/namespace/namespace.h"

namespace logfs::meta {

class MetaService {
 public:
  // The response message to send, or the error to answer with.
  using Reply = absl::StatusOr<std::unique_ptr<google::protobuf::MessageLite>>;

  // Keeps `ns`, which must outlive the service. With
  // TEST_exit_before_reply_to_change = N > 0 the process exits (status 3)
  // right after the Nth namespace change that carries a call id, before
  // its reply (MetaServerOptions).
  // With `caches` (not owned, may be null: no mount caches are tracked),
  // lookups and getattrs that carry a cache session are recorded in it
  // before they read, and NewMount tells the mount its cache lease.
  explicit MetaService(Namespace* ns, int TEST_exit_before_reply_to_change = 0,
                       MountCaches* caches = nullptr);

  // Serves one request: the response, or kInvalidArgument for a message
  // that does not parse as its type's request or a type meta does not
  // serve, else the namespace's error. Never keeps `request`. With `call`,
  // a change's call id goes there (left alone for requests without one).
  Reply Handle(const format::Frame& request, proto::CallId* call = nullptr);

  // The mount whose session ran over this connection (NewMount and
  // MountHeartbeat tell which), forgotten; nullopt if none, or if the
  // session goes on: another connection carries it too (a successor's,
  // `logfs mount --takeover`), or a heartbeat on this one said it is being
  // handed off (MountHeartbeatRequest.handing_off). A closed connection
  // the caller gets a mount for ends that mount's session (its leases
  // lapse).
  std::optional<uint64_t> TakeSession(uint64_t connection_id) ABSL_LOCKS_EXCLUDED(sessions_mu_);
  // The mount (its call id's) of a change that holds an inode lock in its
  // kernel while it waits for meta: create, unlink and rename (the
  // directory's), setattr, setxattr and removexattr (the inode's, a
  // directory's among them); 0 for other calls, or one that does not parse.
  static uint64_t LockingChangeMount(const format::Frame& frame);

 private:
  Reply HandleNames(const format::Frame& frame, proto::CallId* call);
  Reply HandleFiles(const format::Frame& frame, proto::CallId* call);
  void RememberSession(uint64_t connection, uint64_t mount_id, bool handing_off = false)
      ABSL_LOCKS_EXCLUDED(sessions_mu_);
  // Passes `result` through; see the constructor.
  template <typename Result>
  Result TEST_AfterChange(const proto::CallId& call, Result result);

  // Immutable after construction.
  Namespace* const ns_;
  const int TEST_exit_before_reply_to_change_;
  MountCaches* const caches_;

  // Internally synchronized.
  std::atomic<int> TEST_changes_{0};  // changes with a call id handled

  absl::Mutex sessions_mu_;
  struct Session {
    uint64_t mount_id = 0;
    bool handing_off = false;  // what the last heartbeat on the connection said
  };
  // Connection id -> the mount session it carries.
  std::map<uint64_t, Session> mount_sessions_ ABSL_GUARDED_BY(sessions_mu_);
};

}  // namespace logfs::meta
