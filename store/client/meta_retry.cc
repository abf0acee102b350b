#include "store/client/meta_retry.h"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/format/error_codec.h"

namespace logfs::client {
namespace {

absl::Status Unreachable(MetaEndpoints& meta, absl::Time start, const absl::Status& last) {
  return absl::UnavailableError(absl::StrCat("meta at ", meta.Describe(), " unreachable for ",
                                             absl::FormatDuration(absl::Now() - start), ": ",
                                             last.message()));
}

// Whether an attempt whose call failed with `status` on its current
// replica, the `refused`-th to fail so in this attempt, goes on to the
// next one (Failed has moved there): a connection that fails (refused,
// reset: a dead replica, at once) does, and so does a standby that knows
// no active (one that just started), until every replica has had its try;
// a timeout does not (it already took the attempt's time), nor any other
// answer.
bool TryNextReplica(const absl::Status& status, MetaEndpoints& meta, size_t refused) {
  const bool connection_failed = absl::IsUnavailable(status) && !rpc::IsServerAnswer(status);
  return (connection_failed || format::IsNotActiveMeta(status)) && refused < meta.size() &&
         !meta.is_shut_down();
}

// The pause before the next attempt and that attempt's deadline, both cut
// so that the attempt ends with the window; a zero deadline when the window
// leaves no room for another attempt.
struct NextAttempt {
  absl::Duration delay;
  absl::Duration timeout;
};
NextAttempt PlanNextAttempt(const MetaRetryOptions& options, absl::Time start, int attempt) {
  const absl::Duration left = start + options.retry_window - absl::Now();
  if (left < 2 * kMetaAttemptTimeoutMin || attempt >= kMetaAttemptsMax) {
    return {absl::ZeroDuration(), absl::ZeroDuration()};
  }
  const absl::Duration delay = std::min(MetaRetryDelay(attempt), left - kMetaAttemptTimeoutMin);
  return {delay, std::min(options.attempt_timeout, left - delay)};
}

// One call in flight in AsyncCallMeta, kept alive by its callbacks.
class AsyncMetaCall : public std::enable_shared_from_this<AsyncMetaCall> {
 public:
  AsyncMetaCall(asio::io_context& io, std::shared_ptr<MetaEndpoints> meta, format::MessageType type,
                const google::protobuf::MessageLite& request, const MetaRetryOptions& options,
                rpc::RpcClient::Callback done)
      : meta_(std::move(meta)),
        type_(type),
        request_(request.New()),
        options_(options),
        done_(std::move(done)),
        start_(absl::Now()),
        timer_(io) {
    request_->CheckTypeAndMergeFrom(request);
  }

  void Attempt(absl::Duration timeout) {
    ++attempts_;
    redirects_ = 0;
    refused_ = 0;
    Send(timeout);
  }

 private:
  void Send(absl::Duration timeout) {
    std::shared_ptr<rpc::RpcClient> client = meta_->Current();
    client->AsyncCall(
        type_, *request_, {}, timeout,
        [self = shared_from_this(), client, timeout](absl::Status s, format::Frame frame) {
          self->OnAnswer(client, timeout, std::move(s), std::move(frame));
        });
  }

  void OnAnswer(const std::shared_ptr<rpc::RpcClient>& client, absl::Duration timeout,
                absl::Status status, format::Frame frame) {
    if (!status.ok() && meta_->Failed(client, status) && ++redirects_ <= kMetaRedirectsMax) {
      Send(timeout);
      return;
    }
    if (!status.ok() && redirects_ < kMetaRedirectsMax &&
        TryNextReplica(status, *meta_, ++refused_)) {
      ++redirects_;
      Send(timeout);
      return;
    }
    if (status.ok() || options_.one_attempt ||
        !IsRetryableMetaFailure(status, *meta_, options_.retry_timeouts)) {
      done_(std::move(status), std::move(frame));
      return;
    }
    const NextAttempt next = PlanNextAttempt(options_, start_, attempts_);
    if (next.timeout == absl::ZeroDuration()) {
      done_(Unreachable(*meta_, start_, status), {});
      return;
    }
    if (attempts_ == 1) {
      LOG(WARNING) << "meta call (type " << static_cast<int>(type_) << ") waits for meta: "
                   << status.message();
    }
    timer_.expires_after(std::chrono::microseconds(absl::ToInt64Microseconds(next.delay)));
    timer_.async_wait([self = shared_from_this(), timeout = next.timeout,
                       status](asio::error_code ec) {
      if (ec) {
        self->done_(status, {});
        return;
      }
      self->Attempt(timeout);
    });
  }

  const std::shared_ptr<MetaEndpoints> meta_;
  const format::MessageType type_;
  const std::unique_ptr<google::protobuf::MessageLite> request_;
  const MetaRetryOptions options_;
  rpc::RpcClient::Callback done_;
  const absl::Time start_;
  asio::steady_timer timer_;
  int attempts_ = 0;
  int redirects_ = 0;  // in this attempt
  size_t refused_ = 0;  // replicas whose connection failed in this attempt
};

}  // namespace

absl::Duration MetaRetryDelay(int attempt) {
  absl::Duration delay = kMetaRetryDelayMin;
  for (int i = 1; i < attempt && delay < kMetaRetryDelayMax; ++i) delay *= 2;
  delay = std::min(delay, kMetaRetryDelayMax);
  thread_local std::minstd_rand random(std::random_device{}());
  std::uniform_real_distribution<double> part(0.5, 1.0);
  return delay * part(random);
}

bool IsRetryableMetaFailure(const absl::Status& status, MetaEndpoints& meta, bool retry_timeouts) {
  if (format::IsNotActiveMeta(status)) return !meta.is_shut_down();
  if (rpc::IsServerAnswer(status)) return false;
  const bool timed_out = absl::IsDeadlineExceeded(status);
  if (!absl::IsUnavailable(status) && !timed_out) return false;
  if (timed_out && !retry_timeouts && meta.size() < 2) return false;
  return !meta.is_shut_down();
}

absl::Status CallMetaOnce(MetaEndpoints& meta, format::MessageType type,
                          const google::protobuf::MessageLite& request,
                          google::protobuf::MessageLite* response, absl::Duration timeout) {
  size_t refused = 0;  // replicas whose connection failed in this attempt
  for (int moves = 0;; ++moves) {
    std::shared_ptr<rpc::RpcClient> client = meta.Current();
    absl::Status status = client->Call(type, request, response, timeout);
    if (status.ok()) return status;
    const bool redirected = meta.Failed(client, status);
    if (moves >= kMetaRedirectsMax) return status;
    if (redirected) continue;
    if (!TryNextReplica(status, meta, ++refused)) return status;
  }
}

absl::Status CallMeta(MetaEndpoints& meta, format::MessageType type,
                      const google::protobuf::MessageLite& request,
                      google::protobuf::MessageLite* response, const MetaRetryOptions& options) {
  const absl::Time start = absl::Now();
  absl::Duration timeout = options.attempt_timeout;
  for (int attempt = 1;; ++attempt) {
    absl::Status status = CallMetaOnce(meta, type, request, response, timeout);
    if (status.ok()) {
      if (attempt > 1) {
        LOG(INFO) << "meta call (type " << static_cast<int>(type) << ") answered after "
                  << attempt << " attempts";
      }
      return status;
    }
    if (!IsRetryableMetaFailure(status, meta, options.retry_timeouts)) return status;
    const NextAttempt next = PlanNextAttempt(options, start, attempt);
    if (next.timeout == absl::ZeroDuration()) return Unreachable(meta, start, status);
    if (attempt == 1) {
      LOG(WARNING) << "meta call (type " << static_cast<int>(type) << ") waits for meta: "
                   << status.message();
    }
    timeout = next.timeout;
    absl::SleepFor(next.delay);
  }
}

void AsyncCallMeta(asio::io_context& io, std::shared_ptr<MetaEndpoints> meta,
                   format::MessageType type, const google::protobuf::MessageLite& request,
                   const MetaRetryOptions& options, rpc::RpcClient::Callback done) {
  auto call = std::make_shared<AsyncMetaCall>(io, std::move(meta), type, request, options,
                                              std::move(done));
  call->Attempt(options.attempt_timeout);
}

}  // namespace logfs::client
