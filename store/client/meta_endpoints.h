// The meta replicas a client knows (`--meta=h1:p,h2:p,h3:p`, as HDFS
// clients list a nameservice's NameNodes) and the one its calls go to now
// (docs/meta_ha.md "Clients"). A standby refuses every call with the
// active's address (format::IsNotActiveMeta), and the client goes there;
// a connection failure moves it to the next address of the list. With one
// address nothing ever moves: a lone meta behaves as it always did.
//
// No reply needs an epoch check here: an active stops answering before
// etcd can elect the next one (store/meta/ha/meta_ha.h), so no answer of a
// deposed active is sent once a higher epoch exists. Segment servers, which
// get commands in heartbeat answers, check the meta epoch themselves.
//
// Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/rpc_client.h"

namespace logfs::client {

class MetaEndpoints {
 public:
  using Connect = std::function<std::shared_ptr<rpc::RpcClient>(const std::string& address)>;

  // `addresses` must not be empty (CHECK); `connect` gives the connection
  // to one address (a ClientPool's Get) and is called under no lock of
  // ours, any number of times per address.
  MetaEndpoints(std::vector<std::string> addresses, Connect connect);
  // One address, one connection: what a client of a lone meta had. It
  // never moves, not even to the active a standby names.
  static std::shared_ptr<MetaEndpoints> Single(std::shared_ptr<rpc::RpcClient> meta);
  // The replicas of `list` (ParseList), connected through `pool`, which
  // must outlive them. A list that does not parse is kept as one address,
  // whose calls then fail with the address's error (check flags with
  // ParseList first for a clearer one).
  static std::shared_ptr<MetaEndpoints> OverPool(rpc::ClientPool& pool, const std::string& list);

  // "h1:p,h2:p" split at commas, each entry checked as host:port (a
  // numeric address or a host name, rpc::SplitHostPort) and kept
  // in order, duplicates dropped. kInvalidArgument for an empty list or a
  // bad entry (naming it).
  static absl::StatusOr<std::vector<std::string>> ParseList(const std::string& list);

  // The connection calls go to now. Never null.
  std::shared_ptr<rpc::RpcClient> Current() ABSL_LOCKS_EXCLUDED(mu_);

  // A call on `used` (a connection Current() gave) failed with `status`.
  // A standby's refusal that names an active moves to it (added to the
  // list if new) and returns true: send the call again at once. Any other
  // refusal by a standby, or a transport failure (kUnavailable,
  // kDeadlineExceeded that is not an answer), moves to the next address
  // and returns false: retry after the usual pause. Other errors change
  // nothing (false). A failure of a connection no longer current changes
  // nothing either (another call moved on already).
  bool Failed(const std::shared_ptr<rpc::RpcClient>& used, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls go to `address` from now on, if it is listed (a replica that
  // said it is the active, to a tool that asked them all); false if not.
  bool MoveTo(const std::string& address) ABSL_LOCKS_EXCLUDED(mu_);

  // The addresses, comma-separated.
  std::string Describe() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // Shuts down every connection handed out; Current() keeps returning a
  // shut-down one.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);
  bool is_shut_down() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void MoveToLocked(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // A replica whose connection failed is passed over this long when the
  // client moves on.
  static constexpr absl::Duration kFailedReplicaAvoidance = absl::Seconds(10);

  const Connect connect_;
  // Single(): one connection, never moves (its user follows redirects
  // itself, if at all).
  bool fixed_ = false;
  mutable absl::Mutex mu_;
  std::vector<std::string> addresses_ ABSL_GUARDED_BY(mu_);
  size_t current_index_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<rpc::RpcClient> current_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<rpc::RpcClient>> handed_out_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  // When a call to each address last failed in transport.
  std::map<std::string, absl::Time> failed_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::client
