// Calls to meta that ride out a short meta restart (docs/rpc.md
// "Retries"), as an NFS hard mount retransmits within its budget: a call
// whose transport failed (connection refused, reset or lost; no answer
// within the attempt's deadline) is sent again with capped exponential
// backoff and jitter until a retry window has passed since the first
// attempt. An answer from meta, any error it sends back, is final. A
// change carries a proto::CallId (the same on every attempt), so meta
// applies it at most once however often it arrives.
//
// With several meta replicas (store/client/meta_endpoints.h) every attempt
// goes to the current one: a standby's refusal naming the active sends the
// call there at once (up to kMetaRedirectsMax times per attempt, also for a
// single attempt); a connection that fails (a dead replica) or a refusal
// without an active (a standby that just started) tries the next replica
// at once, each once per attempt; when every one has refused so (an
// election in progress), or on a timeout, the call moves on and pauses as
// a failed attempt does.
//
// Thread-safe: plain functions over thread-safe MetaEndpoints.
#pragma once

#include <asio.hpp>
#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "google/protobuf/message_lite.h"
#include "store/client/meta_endpoints.h"
#include "store/format/message_type.h"
#include "store/rpc/rpc_client.h"

namespace logfs::client {

struct MetaRetryOptions {
  // Deadline of one attempt.
  absl::Duration attempt_timeout = absl::Seconds(10);
  // Transport failures are retried until this long after the first attempt
  // started (later attempts' deadlines are cut to it); zero: never. The
  // first attempt always gets the whole attempt_timeout, so a call returns
  // within max(attempt_timeout, retry_window) plus one backoff delay.
  absl::Duration retry_window = absl::Seconds(30);
  // Whether an attempt that timed out (kDeadlineExceeded) is tried again.
  // Meta may have applied such a call while it stayed up; turn this off for
  // calls without a call id whose effect must not happen twice (Open,
  // Release, OpenWrite pin the inode in meta's memory). A broken or refused
  // connection is retried either way: meta restarted, and its pins and
  // leases went with it.
  bool retry_timeouts = true;
  // One attempt only (redirects still followed), its error as it came.
  bool one_attempt = false;
};

// Backoff between attempts: doubles from the minimum to the maximum.
inline constexpr absl::Duration kMetaRetryDelayMin = absl::Milliseconds(20);
inline constexpr absl::Duration kMetaRetryDelayMax = absl::Seconds(1);
// The last attempt starts no later than this before the window ends (so a
// call fails that much before it at the earliest).
inline constexpr absl::Duration kMetaAttemptTimeoutMin = absl::Milliseconds(50);
// Attempts of one call at most, whatever the window (a 30 s window takes
// about 40 at the delays above).
inline constexpr int kMetaAttemptsMax = 1000;
// Redirects followed within one attempt.
inline constexpr int kMetaRedirectsMax = 8;

// The pause after failed attempt number `attempt` (1 for the first):
// min(kMetaRetryDelayMax, kMetaRetryDelayMin * 2^(attempt - 1)), of which
// a uniformly random part in [1/2, 1] is taken, so that the mounts of a
// cluster do not all come back at the same instant.
absl::Duration MetaRetryDelay(int attempt);

// Whether a failed attempt is worth another: a transport failure
// (kUnavailable or kDeadlineExceeded that is not meta's own answer, see
// IsServerAnswer) or a standby's refusal (format::IsNotActiveMeta), on
// endpoints that are not shut down. A timeout counts only with
// `retry_timeouts`, or when there are several replicas to move on to (a
// stopped active): a pinning call may then pin twice on a slow one, which
// its mount's session end undoes.
bool IsRetryableMetaFailure(const absl::Status& status, MetaEndpoints& meta,
                            bool retry_timeouts = true);

// One attempt: the call on the current replica, following redirects;
// with several replicas, a replica whose connection fails (a dead one:
// refused or reset, at once) or a standby that knows no active hands the
// attempt to the next, each replica getting at most one such try, so that
// one dead replica in the list does not fail a call the others would
// answer (a tool's, which makes one attempt). A timeout ends the attempt.
absl::Status CallMetaOnce(MetaEndpoints& meta, format::MessageType type,
                          const google::protobuf::MessageLite& request,
                          google::protobuf::MessageLite* response, absl::Duration timeout);

// Blocking call with retries (RpcClient::Call otherwise). Returns OK with
// `*response` parsed, meta's answer as it came (final, never retried), or,
// once the window is over, kUnavailable "meta at ADDR unreachable for
// DURATION: last failure" (EIO at the FUSE layer). A client that is shut
// down fails at once. Must not run on an io thread of `meta`.
absl::Status CallMeta(MetaEndpoints& meta, format::MessageType type,
                      const google::protobuf::MessageLite& request,
                      google::protobuf::MessageLite* response, const MetaRetryOptions& options);

// The same, asynchronously: `done(status, response frame)` runs exactly
// once, on an io thread (of `io` or of `meta`'s io_context; they may be
// the same), never inline. The pauses are timers on `io`: a call pausing
// when `io` stops (at shutdown) never completes. `request` is copied.
void AsyncCallMeta(asio::io_context& io, std::shared_ptr<MetaEndpoints> meta,
                   format::MessageType type, const google::protobuf::MessageLite& request,
                   const MetaRetryOptions& options, rpc::RpcClient::Callback done);

}  // namespace logfs::client
