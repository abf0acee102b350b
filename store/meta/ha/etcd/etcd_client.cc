#include "store/meta/ha/etcd/etcd_client.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "src/status/macros.h"
#include "store/meta/ha/etcd/call_status.h"

namespace logfs::etcd {
namespace {

namespace pb = ::etcdserverpb;

// call_status.cc takes gRPC codes as absl's numbers.
static_assert(static_cast<int>(grpc::StatusCode::DEADLINE_EXCEEDED) ==
              static_cast<int>(absl::StatusCode::kDeadlineExceeded));
static_assert(static_cast<int>(grpc::StatusCode::UNAVAILABLE) ==
              static_cast<int>(absl::StatusCode::kUnavailable));
static_assert(static_cast<int>(grpc::StatusCode::UNAUTHENTICATED) ==
              static_cast<int>(absl::StatusCode::kUnauthenticated));

// Pause between the attempts of one call: short, since a retried failure
// took no time at etcd and the next attempt goes to another member.
constexpr absl::Duration kRetryPauseMin = absl::Milliseconds(10);
constexpr absl::Duration kRetryPauseMax = absl::Milliseconds(100);
// gRPC reconnects to a member that went away after 100 ms, then backs off to
// 1 s (gRPC's defaults, 1 s to 120 s, would leave a restarted member unused
// for minutes).
constexpr int kReconnectBackoffMinMs = 100;
constexpr int kReconnectBackoffMaxMs = 1000;
// A ping on a connection with calls in flight after 10 s without one, the
// connection dropped if unanswered in 5 s: how a stopped or cut-off member
// is noticed. etcd refuses pings more often than every 5 s
// (--grpc-keepalive-min-time) and pings without calls in flight.
constexpr int kKeepalivePingMs = 10000;
constexpr int kKeepaliveTimeoutMs = 5000;
// How long the channel watcher waits per round; bounds the destructor's wait.
constexpr absl::Duration kWatchRound = absl::Milliseconds(200);

// One endpoint as "address:port" for a gRPC ipv4:/ipv6: target; `ipv6` says
// which. Names are resolved here, once.
absl::StatusOr<std::pair<std::string, bool>> ResolveEndpoint(absl::string_view endpoint) {
  absl::string_view rest = endpoint;
  if (!absl::ConsumePrefix(&rest, "http://")) absl::ConsumePrefix(&rest, "https://");
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(colon + 1), &port) ||
      port <= 0 || port > 65535 || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "': not host:port"));
  }
  std::string host(rest.substr(0, colon));
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0 || found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoint '", endpoint, "': cannot resolve: ", gai_strerror(rc)));
  }
  // The first IPv4 address, else the first IPv6 one.
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char text[INET6_ADDRSTRLEN] = {};
  const bool ipv6 = pick->ai_family == AF_INET6;
  const void* addr = ipv6 ? static_cast<const void*>(
                                &reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr)
                          : &reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr;
  inet_ntop(pick->ai_family, addr, text, sizeof(text));
  freeaddrinfo(found);
  std::string address = ipv6 ? absl::StrCat("[", text, "]:", port) : absl::StrCat(text, ":", port);
  return std::make_pair(std::move(address), ipv6);
}

// The gRPC target naming every endpoint: "ipv4:a:p,b:q" (gRPC's naming doc,
// grpc/doc/naming.md).
absl::StatusOr<std::string> ChannelTarget(const std::vector<std::string>& endpoints) {
  if (endpoints.empty()) return absl::InvalidArgumentError("etcd: no endpoints");
  std::vector<std::string> addresses;
  int ipv6 = 0;
  for (const std::string& e : endpoints) {
    ASSIGN_OR_RETURN(auto resolved, ResolveEndpoint(e));
    addresses.push_back(std::move(resolved.first));
    ipv6 += resolved.second ? 1 : 0;
  }
  if (ipv6 != 0 && ipv6 != static_cast<int>(endpoints.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd endpoints [", absl::StrJoin(endpoints, ","), "]: mix IPv4 and IPv6"));
  }
  return absl::StrCat(ipv6 ? "ipv6:" : "ipv4:", absl::StrJoin(addresses, ","));
}

// The host of "[http[s]://]host:port" (IPv6 without its brackets).
std::string EndpointHost(absl::string_view endpoint) {
  if (!absl::ConsumePrefix(&endpoint, "http://")) absl::ConsumePrefix(&endpoint, "https://");
  endpoint = endpoint.substr(0, endpoint.rfind(':'));
  if (absl::ConsumePrefix(&endpoint, "[")) absl::ConsumeSuffix(&endpoint, "]");
  return std::string(endpoint);
}

// A host as a comparable key: an IP address in its canonical text
// (inet_pton then inet_ntop: "0:0::1" and "::1" are one), a DNS name in
// lower case without a trailing dot.
std::string HostKey(absl::string_view host) {
  const std::string text(host);
  unsigned char addr[sizeof(in6_addr)];
  char canonical[INET6_ADDRSTRLEN] = {};
  for (int family : {AF_INET, AF_INET6}) {
    if (inet_pton(family, text.c_str(), addr) == 1 &&
        inet_ntop(family, addr, canonical, sizeof(canonical)) != nullptr) {
      return canonical;
    }
  }
  absl::string_view name = host;
  absl::ConsumeSuffix(&name, ".");
  return absl::AsciiStrToLower(name);
}

// Checks, after gRPC's TLS stack has verified the member's chain against
// the CA, that the certificate names one of the endpoints' hosts. gRPC's
// own host name check would compare it with the channel's one authority,
// which cannot name three members.
class MemberNameVerifier : public grpc::experimental::ExternalCertificateVerifier {
 public:
  MemberNameVerifier(std::vector<std::string> hosts, std::string endpoints_text)
      : endpoints_text_(std::move(endpoints_text)) {
    for (const std::string& h : hosts) hosts_.push_back(HostKey(h));
  }

  bool Verify(grpc::experimental::TlsCustomVerificationCheckRequest* request,
              std::function<void(grpc::Status)>, grpc::Status* sync_status) override {
    std::vector<std::string> names;
    for (const auto& list : {request->ip_names(), request->dns_names()}) {
      for (const grpc::string_ref& name : list) names.emplace_back(name.data(), name.size());
    }
    for (const std::string& name : names) {
      if (std::find(hosts_.begin(), hosts_.end(), HostKey(name)) != hosts_.end()) {
        *sync_status = grpc::Status::OK;
        return true;
      }
    }
    *sync_status = grpc::Status(
        grpc::StatusCode::UNAUTHENTICATED,
        absl::StrCat("etcd member certificate names [", absl::StrJoin(names, ","),
                     "], none of the hosts of [", endpoints_text_, "]"));
    return true;
  }
  void Cancel(grpc::experimental::TlsCustomVerificationCheckRequest*) override {}

 private:
  std::vector<std::string> hosts_;  // HostKey of each endpoint's host
  const std::string endpoints_text_;
};

// A PEM file of at most 1 MiB.
absl::StatusOr<std::string> ReadPem(const std::string& path, absl::string_view flag) {
  constexpr size_t kPemBytesMax = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    const int error = errno;
    return absl::InvalidArgumentError(absl::StrCat("etcd TLS: cannot read ", flag, " '", path,
                                                   "': ", std::strerror(error)));
  }
  std::string text(kPemBytesMax + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd TLS: cannot read ", flag, " '", path, "'"));
  }
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kPemBytesMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd TLS: ", flag, " '", path, "' is over 1 MiB: not a PEM file"));
  }
  if (!absl::StrContains(text, "-----BEGIN ")) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd TLS: ", flag, " '", path, "' holds no PEM block"));
  }
  return text;
}

// Plain, or TLS per options.tls (EtcdTlsFiles).
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const EtcdClientOptions& options, const std::string& endpoints_text) {
  const bool any_https = std::any_of(options.endpoints.begin(), options.endpoints.end(),
                                     [](const std::string& e) { return absl::StartsWith(e, "https://"); });
  const bool any_http = std::any_of(options.endpoints.begin(), options.endpoints.end(),
                                    [](const std::string& e) { return absl::StartsWith(e, "http://"); });
  if (options.tls.ca_file.empty()) {
    if (any_https || !options.tls.cert_file.empty() || !options.tls.key_file.empty()) {
      return absl::InvalidArgumentError(
          "etcd TLS: an https:// endpoint, a client certificate or a key needs the CA "
          "(--etcd_ca_file)");
    }
    return grpc::InsecureChannelCredentials();
  }
  if (any_http) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd TLS: endpoints [", endpoints_text, "] name http:// with a CA (--etcd_ca_file)"));
  }
  if (options.tls.cert_file.empty() != options.tls.key_file.empty()) {
    return absl::InvalidArgumentError(
        "etcd TLS: a client certificate (--etcd_cert_file) needs its key (--etcd_key_file), "
        "and the other way round");
  }
  ASSIGN_OR_RETURN(const std::string ca, ReadPem(options.tls.ca_file, "--etcd_ca_file"));
  std::vector<grpc::experimental::IdentityKeyCertPair> identity;
  if (!options.tls.cert_file.empty()) {
    grpc::experimental::IdentityKeyCertPair pair;
    ASSIGN_OR_RETURN(pair.certificate_chain, ReadPem(options.tls.cert_file, "--etcd_cert_file"));
    ASSIGN_OR_RETURN(pair.private_key, ReadPem(options.tls.key_file, "--etcd_key_file"));
    identity.push_back(std::move(pair));
  }
  std::vector<std::string> hosts;
  for (const std::string& e : options.endpoints) hosts.push_back(EndpointHost(e));
  grpc::experimental::TlsChannelCredentialsOptions tls;
  tls.set_certificate_provider(
      std::make_shared<grpc::experimental::StaticDataCertificateProvider>(ca, identity));
  tls.watch_root_certs();
  if (!identity.empty()) tls.watch_identity_key_cert_pairs();
  tls.set_verify_server_certs(true);
  tls.set_check_call_host(false);
  tls.set_certificate_verifier(
      grpc::experimental::ExternalCertificateVerifier::Create<MemberNameVerifier>(
          std::move(hosts), endpoints_text));
  return grpc::experimental::TlsCredentials(tls);
}

KeyValue FromPb(const mvccpb::KeyValue& kv) {
  KeyValue out;
  out.key = kv.key();
  out.value = kv.value();
  out.create_revision = kv.create_revision();
  out.mod_revision = kv.mod_revision();
  out.version = kv.version();
  out.lease = kv.lease();
  return out;
}

std::vector<KeyValue> FromPb(const google::protobuf::RepeatedPtrField<mvccpb::KeyValue>& kvs) {
  std::vector<KeyValue> out;
  out.reserve(kvs.size());
  for (const auto& kv : kvs) out.push_back(FromPb(kv));
  return out;
}

void ToPb(const Compare& c, pb::Compare* out) {
  out->set_key(c.key);
  switch (c.result) {
    case Compare::Result::kEqual:
      out->set_result(pb::Compare_CompareResult_EQUAL);
      break;
    case Compare::Result::kNotEqual:
      out->set_result(pb::Compare_CompareResult_NOT_EQUAL);
      break;
    case Compare::Result::kLess:
      out->set_result(pb::Compare_CompareResult_LESS);
      break;
    case Compare::Result::kGreater:
      out->set_result(pb::Compare_CompareResult_GREATER);
      break;
  }
  // The oneof member is set even when 0: etcd reads the target's value from it.
  switch (c.target) {
    case Compare::Target::kCreateRevision:
      out->set_target(pb::Compare_CompareTarget_CREATE);
      out->set_create_revision(c.number);
      break;
    case Compare::Target::kModRevision:
      out->set_target(pb::Compare_CompareTarget_MOD);
      out->set_mod_revision(c.number);
      break;
    case Compare::Target::kVersion:
      out->set_target(pb::Compare_CompareTarget_VERSION);
      out->set_version(c.number);
      break;
    case Compare::Target::kValue:
      out->set_target(pb::Compare_CompareTarget_VALUE);
      out->set_value(c.value);
      break;
  }
}

void ToPb(const Op& op, pb::RequestOp* out) {
  switch (op.type) {
    case Op::Type::kPut: {
      pb::PutRequest* put = out->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
      put->set_lease(op.lease);
      break;
    }
    case Op::Type::kDeleteRange: {
      pb::DeleteRangeRequest* del = out->mutable_request_delete_range();
      del->set_key(op.key);
      del->set_range_end(op.range_end);
      break;
    }
    case Op::Type::kRange: {
      pb::RangeRequest* range = out->mutable_request_range();
      range->set_key(op.key);
      range->set_range_end(op.range_end);
      range->set_limit(op.limit);
      break;
    }
  }
}

bool Writes(const std::vector<Op>& ops) {
  return std::any_of(ops.begin(), ops.end(),
                     [](const Op& op) { return op.type != Op::Type::kRange; });
}

// Seconds as etcd's TTLs count them.
absl::Duration TtlSeconds(int64_t ttl) { return absl::Seconds(ttl); }

}  // namespace

std::string PrefixEnd(absl::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // no key above the prefix: every key from it on
}

struct EtcdClient::Impl {
  ~Impl() {
    stopping = true;
    if (watcher.joinable()) watcher.join();
  }

  // gRPC's sync API reads a channel's sockets only while a call is in flight
  // (or every 5 s, its backup poller), so between calls a member's death
  // would go unnoticed and the next call be sent to it, ending in "Socket
  // closed" (for a write: outcome unknown). Waiting on the channel's state
  // polls its sockets: a closed connection is seen at once and round_robin
  // stops picking that member.
  void Watch() {
    while (!stopping) {
      const grpc_connectivity_state state = channel->GetState(/*try_to_connect=*/true);
      channel->WaitForStateChange(state, absl::ToChronoTime(absl::Now() + kWatchRound));
    }
  }

  // Immutable after Connect().
  EtcdClientOptions options;
  std::string endpoints_text;
  // Thread-safe themselves.
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::atomic<bool> stopping{false};
  std::thread watcher;  // runs Watch()

  // Runs `attempt(context)` (-> grpc::Status) until it succeeds, fails in a
  // way that may not be retried, the attempts (one per endpoint, plus one)
  // are spent, or the call's deadline is near; each attempt gets a fresh
  // context with the call's one deadline and etcd's "hasleader" metadata.
  template <typename Attempt>
  absl::Status Run(CallKind kind, absl::string_view what, Attempt attempt) const {
    const absl::Time deadline = absl::Now() + options.call_timeout;
    const int attempts_max = static_cast<int>(options.endpoints.size()) + 1;
    absl::Duration pause = kRetryPauseMin;
    for (int n = 1;; ++n) {
      grpc::ClientContext context;
      context.set_deadline(absl::ToChronoTime(deadline));
      // etcd refuses at once (Unavailable "no leader") when the member has
      // no leader (rpctypes.MetadataRequireLeaderKey).
      context.AddMetadata("hasleader", "true");
      const grpc::Status s = attempt(&context);
      if (s.ok()) return absl::OkStatus();
      const int code = static_cast<int>(s.error_code());
      const bool retry =
          CertainlyNotApplied(code, s.error_message()) ||
          (kind == CallKind::kRead && s.error_code() == grpc::StatusCode::UNAVAILABLE);
      if (!retry || n >= attempts_max || absl::Now() + pause >= deadline) {
        return CallError(code, s.error_message(), kind, what, endpoints_text);
      }
      absl::SleepFor(pause);  // a back-off, not a wait for a condition
      pause = std::min(pause * 2, kRetryPauseMax);
    }
  }
};

EtcdClient::EtcdClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EtcdClient::~EtcdClient() = default;

const std::string& EtcdClient::endpoints_text() const { return impl_->endpoints_text; }

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(EtcdClientOptions options) {
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd: call_timeout must be positive");
  }
  ASSIGN_OR_RETURN(const std::string target, ChannelTarget(options.endpoints));
  auto impl = std::make_unique<Impl>();
  impl->endpoints_text = absl::StrJoin(options.endpoints, ",");
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");
  args.SetMaxReceiveMessageSize(INT_MAX);  // a Range's answer is bounded by etcd, not here
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMinMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kReconnectBackoffMinMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectBackoffMaxMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepalivePingMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  ASSIGN_OR_RETURN(auto credentials, Credentials(options, impl->endpoints_text));
  impl->channel = grpc::CreateCustomChannel(target, credentials, args);
  impl->kv = pb::KV::NewStub(impl->channel);
  impl->lease = pb::Lease::NewStub(impl->channel);
  impl->watcher = std::thread([p = impl.get()] { p->Watch(); });
  const absl::Duration timeout = options.call_timeout;
  impl->options = std::move(options);
  if (!impl->channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "etcd: no endpoint of [", impl->endpoints_text, "] answered within ",
        absl::FormatDuration(timeout),
        impl->options.tls.ca_file.empty()
            ? ""
            : " (TLS: a member or this client may have a certificate the other side does not "
              "trust; gRPC's log above names the handshake error)"));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(impl)));
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  pb::LeaseGrantRequest request;
  // Whole seconds, rounded up, at least 1.
  request.set_ttl(std::max<int64_t>(1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  pb::LeaseGrantResponse response;
  RETURN_IF_ERROR(impl_->Run(CallKind::kWrite, "LeaseGrant", [&](grpc::ClientContext* context) {
    return impl_->lease->LeaseGrant(context, request, &response);
  }));
  if (!response.error().empty() || response.id() <= 0) {
    return absl::InternalError(absl::StrCat("etcd LeaseGrant via [", impl_->endpoints_text,
                                            "]: id ", response.id(), " ", response.error()));
  }
  return response.id();
}

absl::StatusOr<absl::Duration> EtcdClient::KeepAlive(int64_t lease) {
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  pb::LeaseKeepAliveResponse response;
  bool answered = false;
  // Renewing twice does no harm, so every failure is retried as a read's.
  RETURN_IF_ERROR(impl_->Run(CallKind::kRead, "LeaseKeepAlive", [&](grpc::ClientContext* context) {
    answered = false;
    auto stream = impl_->lease->LeaseKeepAlive(context);
    // One request, then end our side: etcd answers it and ends the stream.
    if (stream->Write(request)) {
      stream->WritesDone();
      answered = stream->Read(&response);
    }
    grpc::Status s = stream->Finish();
    if (s.ok() && !answered)
      s = grpc::Status(grpc::StatusCode::INTERNAL, "stream ended unanswered");
    return s;
  }));
  // etcd answers TTL 0 for a lease it does not know (v3rpc/lease.go).
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd LeaseKeepAlive via [", impl_->endpoints_text,
                                            "]: lease ", lease, " not found or expired"));
  }
  return TtlSeconds(response.ttl());
}

absl::StatusOr<absl::Duration> EtcdClient::TimeToLive(int64_t lease) {
  pb::LeaseTimeToLiveRequest request;
  request.set_id(lease);
  pb::LeaseTimeToLiveResponse response;
  RETURN_IF_ERROR(impl_->Run(CallKind::kRead, "LeaseTimeToLive", [&](grpc::ClientContext* context) {
    return impl_->lease->LeaseTimeToLive(context, request, &response);
  }));
  // -1 for a lease it does not know (v3rpc/lease.go); 0 while it is being revoked.
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd LeaseTimeToLive via [", impl_->endpoints_text,
                                            "]: lease ", lease, " not found or expired"));
  }
  return TtlSeconds(response.ttl());
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  pb::LeaseRevokeResponse response;
  return impl_->Run(CallKind::kWrite, "LeaseRevoke", [&](grpc::ClientContext* context) {
    return impl_->lease->LeaseRevoke(context, request, &response);
  });
}

absl::StatusOr<TxnResult> EtcdClient::Txn(const std::vector<Compare>& compares,
                                          const std::vector<Op>& success,
                                          const std::vector<Op>& failure) {
  pb::TxnRequest request;
  for (const Compare& c : compares) ToPb(c, request.add_compare());
  for (const Op& op : success) ToPb(op, request.add_success());
  for (const Op& op : failure) ToPb(op, request.add_failure());
  const CallKind kind = Writes(success) || Writes(failure) ? CallKind::kWrite : CallKind::kRead;
  pb::TxnResponse response;
  RETURN_IF_ERROR(impl_->Run(kind, "Txn", [&](grpc::ClientContext* context) {
    return impl_->kv->Txn(context, request, &response);
  }));
  TxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  for (const pb::ResponseOp& op : response.responses()) {
    if (op.response_case() == pb::ResponseOp::kResponseRange) {
      result.ranges.push_back(FromPb(op.response_range().kvs()));
    }
  }
  return result;
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::Range(const std::string& key,
                                                        const std::string& range_end, int64_t limit,
                                                        int64_t* revision) {
  pb::RangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  request.set_limit(limit);
  // Sort order NONE: etcd returns keys ascending and applies `limit` while
  // reading; an explicit sort would read the whole range first.
  pb::RangeResponse response;
  RETURN_IF_ERROR(impl_->Run(CallKind::kRead, "Range", [&](grpc::ClientContext* context) {
    return impl_->kv->Range(context, request, &response);
  }));
  if (revision != nullptr) *revision = response.header().revision();
  return FromPb(response.kvs());
}

absl::Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  pb::PutResponse response;
  return impl_->Run(CallKind::kWrite, "Put", [&](grpc::ClientContext* context) {
    return impl_->kv->Put(context, request, &response);
  });
}

absl::StatusOr<int64_t> EtcdClient::DeleteRange(const std::string& key,
                                                const std::string& range_end) {
  pb::DeleteRangeRequest request;
  request.set_key(key);
  request.set_range_end(range_end);
  pb::DeleteRangeResponse response;
  RETURN_IF_ERROR(impl_->Run(CallKind::kWrite, "DeleteRange", [&](grpc::ClientContext* context) {
    return impl_->kv->DeleteRange(context, request, &response);
  }));
  return response.deleted();
}

absl::Status EtcdClient::Compact(int64_t revision) {
  pb::CompactionRequest request;
  request.set_revision(revision);
  request.set_physical(false);
  pb::CompactionResponse response;
  return impl_->Run(CallKind::kWrite, "Compact", [&](grpc::ClientContext* context) {
    return impl_->kv->Compact(context, request, &response);
  });
}

}  // namespace logfs::etcd
