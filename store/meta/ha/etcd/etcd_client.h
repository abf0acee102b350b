// A client of etcd's v3 gRPC API (etcd 3.4, Debian `etcd-server`): the KV
// calls (Range, Put, DeleteRange, Txn, Compact) and leases, the parts meta
// high availability needs (issue 14: the leader key under a lease and the
// replicated meta journal, ops-anchors review §1.4 design B).
//
// Semantics are etcd's own; source: the etcd v3 API reference
// (etcd.io/docs/v3.4/learning/api/ and api_reference_v3/) and the comments in
// etcdserver/etcdserverpb/rpc.proto as Debian ships it
// (golang-etcd-server-dev). Every read is linearizable (etcd's default), every
// write is committed by a majority of members before it is acknowledged.
// Revisions are etcd's store revisions: cluster-wide, only growing, durable.
//
// Transport: one gRPC channel over every endpoint with round_robin balancing,
// so consecutive calls go to different members and a dead member (refused or
// reset connection) is skipped once gRPC notices; a member that stops answering
// without closing its connection is dropped after a keepalive ping times out
// (~15 s), and until then calls that reach it end at their deadline. Every call
// carries etcd's "hasleader" metadata, so a member without a Raft leader (no
// quorum) refuses at once with "etcdserver: no leader" instead of waiting.
// A call retries, within its one deadline (`call_timeout` from its start), the
// failures that certainly did not reach etcd's Raft log (no connection, no
// leader), at most once per endpoint plus one.
//
// Errors, for every call (messages name the endpoints):
// - kUnavailable: no endpoint answered (connection refused, no leader, etcd
//   "not capable"/"too many requests"). A write that failed so was NOT applied.
// - kDeadlineExceeded: the deadline passed, or etcd answered "request timed
//   out", or the connection broke after the request was sent.
//   !!! THE OUTCOME OF A WRITE (Put, DeleteRange, Txn with a write, Compact,
//   GrantLease, RevokeLease) IS THEN UNKNOWN: it may or may not have been
//   applied, and may still be applied later. Read back to find out. !!!
// - kNotFound: an unknown or expired lease.
// - kFailedPrecondition: a compacted revision (Compact at or below the
//   compacted revision).
// - kInvalidArgument: a request etcd refuses as too large (more than
//   --max-request-bytes, 1.5 MiB by default; more than --max-txn-ops, 128 by
//   default, operations in a Txn branch) or malformed (empty key, duplicate
//   key in a Txn, a future revision), or bad options.
// - kResourceExhausted: etcd's space quota is exceeded (NOSPACE alarm); writes
//   fail until an operator compacts, defragments and disarms it.
// - kInternal: anything else. For a write the outcome is UNKNOWN as well.
// In short, for a write: kDeadlineExceeded or kInternal = unknown; any other
// code = not applied.
//
// Thread-safe: any thread may call any method concurrently (gRPC channels and
// stubs are thread-safe; the client holds no other state).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace logfs::etcd {

// TLS to etcd (etcd's --cert-file/--key-file/--trusted-ca-file and
// --client-cert-auth): PEM files, read once, in Connect(). With `ca_file`,
// every connection is TLS, and a member must present a certificate that
// chains to it and names (IP or DNS subject alternative name) the host of
// one of the endpoints: one channel balances over every member, so a
// member's certificate need not name the others. `cert_file` and
// `key_file` (both or neither): the client certificate that etcd's
// --client-cert-auth asks for. Empty `ca_file`: plain HTTP, and the other
// two must be empty too.
struct EtcdTlsFiles {
  std::string ca_file, cert_file, key_file;
};

struct EtcdClientOptions {
  // "host:port" of the members' client URLs ("http://" or, with `ca_file`,
  // "https://" is accepted and dropped). Hosts are IP literals or names
  // resolved once, in Connect(); all IPv4 or all IPv6.
  std::vector<std::string> endpoints;
  absl::Duration call_timeout = absl::Seconds(2);  // deadline of each call, retries included
  EtcdTlsFiles tls;  // none: plain HTTP
};

// One key as etcd stores it (mvccpb.KeyValue). Revisions are store revisions;
// `version` counts the puts since the key was (re)created; `lease` is 0 for
// none.
struct KeyValue {
  std::string key, value;
  int64_t create_revision = 0, mod_revision = 0, version = 0, lease = 0;
};

// One comparison of a Txn (etcdserverpb.Compare): `target` of `key` compared
// with `number` (revision/version targets) or `value` (kValue). An absent key
// has create/mod revision and version 0, so `create_revision(k) == 0` means
// "k does not exist"; a kValue comparison with an absent key is false.
struct Compare {
  enum class Target { kCreateRevision, kModRevision, kVersion, kValue };
  enum class Result { kEqual, kNotEqual, kLess, kGreater };
  std::string key;
  Target target = Target::kCreateRevision;
  Result result = Result::kEqual;
  int64_t number = 0;  // for the revision/version targets
  std::string value;   // for kValue
};

// One operation of a Txn (etcdserverpb.RequestOp). A Txn may not write the
// same key twice (kInvalidArgument).
struct Op {
  enum class Type { kPut, kDeleteRange, kRange };
  Type type = Type::kPut;
  std::string key, value;
  std::string range_end;  // kDeleteRange/kRange: "" = just `key`
  int64_t lease = 0;      // kPut: 0 = none
  int64_t limit = 0;      // kRange: 0 = no limit
};

struct TxnResult {
  bool succeeded = false;  // every comparison held: `success` ran, else `failure`
  int64_t revision = 0;    // the store's revision after the txn (response header)
  // One per kRange op of the branch that ran, in order; keys ascending.
  std::vector<std::vector<KeyValue>> ranges;
};

// The range_end that covers every key starting with `prefix` (etcd's
// clientv3.GetPrefixRangeEnd): `prefix` with its last byte below 0xff
// incremented and what follows dropped; "\0" (every key) when `prefix` is
// empty or all 0xff.
std::string PrefixEnd(absl::string_view prefix);

class EtcdClient {
 public:
  // Opens the channel and waits up to `call_timeout` for a connection to any
  // endpoint. kInvalidArgument for no or unparsable endpoints, kUnavailable if
  // none answers in time. The client keeps reconnecting afterwards on its own.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A new lease of `ttl` (rounded up to whole seconds; etcd raises it to its
  // minimum, 1.5 election timeouts). Returns the lease id (> 0).
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews `lease` once (one LeaseKeepAlive stream of one request). Returns
  // the TTL it now has left (whole seconds). kNotFound: the lease is gone or
  // expired. Renewing is idempotent, so every kind of failure is retried.
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease);
  // The TTL `lease` has left, without renewing it (LeaseTimeToLive);
  // kNotFound when it is gone.
  absl::StatusOr<absl::Duration> TimeToLive(int64_t lease);
  // Revokes `lease` and deletes every key attached to it. kNotFound if it
  // is already gone.
  absl::Status RevokeLease(int64_t lease);

  // Runs `success` if every comparison of `compares` holds, else `failure`,
  // atomically, as one revision if it writes.
  absl::StatusOr<TxnResult> Txn(const std::vector<Compare>& compares,
                                const std::vector<Op>& success, const std::vector<Op>& failure);
  // Keys in [key, range_end) ("" = just key), ascending, at most `limit`
  // (0: all); *revision (if set) = header revision (the store's revision the
  // read saw).
  absl::StatusOr<std::vector<KeyValue>> Range(const std::string& key,
                                              const std::string& range_end = "", int64_t limit = 0,
                                              int64_t* revision = nullptr);
  // Puts `value` at `key`, attached to `lease` (0: none; kNotFound if it is
  // gone).
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Deletes the keys in [key, range_end) ("" = just key); returns how many
  // there were.
  absl::StatusOr<int64_t> DeleteRange(const std::string& key, const std::string& range_end = "");
  // Discards the history before `revision` (physical=false: returns once the
  // compaction is committed, not once the space is reclaimed). Keys' current
  // values stay. kFailedPrecondition if `revision` is already compacted,
  // kInvalidArgument if it is in the future.
  absl::Status Compact(int64_t revision);

  // "a:1,b:2": the endpoints, for messages.
  const std::string& endpoints_text() const;

 private:
  struct Impl;
  explicit EtcdClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;  // immutable after construction; thread-safe itself
};

}  // namespace logfs::etcd
