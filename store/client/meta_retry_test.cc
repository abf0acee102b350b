// Meta calls that ride out a meta restart (store/client/meta_retry.h): transport
// failures are retried within the window and then fail as "unreachable";
// meta's own answers, errors included, are final; a meta that comes back
// within the window answers the call. Real RpcServer and RpcClient on
// loopback.
#include "store/client/meta_retry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "store/format/error_codec.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/client_pool.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_server.h"

namespace logfs::client {
namespace {

// Answers StatFs with `error` (when set) or an empty StatFsResponse.
class FakeMeta {
 public:
  FakeMeta(const std::string& address, absl::Status error)
      : error_(std::move(error)), io_(std::make_unique<rpc::IoThreads>(1)) {
    server_ = std::make_unique<rpc::RpcServer>(
        io_->io(),
        [this](format::Frame, rpc::Responder r) {
          ++requests_;
          if (!error_.ok()) return r.ReplyError(error_);
          r.Reply(proto::StatFsResponse());
        },
        format::IsMetaType);
    absl::Status listening = server_->Listen(address);
    EXPECT_TRUE(listening.ok()) << listening;
  }
  ~FakeMeta() {
    server_->Stop();
    io_->Join();  // before the server goes: its connections run on it
    server_.reset();
  }
  std::string address() const { return server_->bound_address(); }
  int requests() const { return requests_.load(); }

 private:
  const absl::Status error_;
  std::atomic<int> requests_{0};
  std::unique_ptr<rpc::IoThreads> io_;
  std::unique_ptr<rpc::RpcServer> server_;
};

// A loopback address nothing listens on (a server's, once it is gone).
std::string FreeAddress() {
  FakeMeta meta("127.0.0.1:0", absl::OkStatus());
  return meta.address();
}

MetaRetryOptions Options(absl::Duration window) {
  MetaRetryOptions options;
  options.attempt_timeout = absl::Milliseconds(500);
  options.retry_window = window;
  return options;
}

TEST(MetaRetryTest, UnreachableMetaFailsAfterTheWindow) {
  // Goal: connection refused is retried until the window is over, then the
  // call fails with kUnavailable saying meta is unreachable.
  rpc::IoThreads io(1);
  auto client = rpc::RpcClient::Create(io.io(), FreeAddress());
  proto::StatFsResponse response;
  const absl::Time start = absl::Now();
  absl::Status s = CallMeta(*MetaEndpoints::Single(client), format::MessageType::kStatFs,
                            proto::Empty(), &response, Options(absl::Milliseconds(600)));
  const absl::Duration took = absl::Now() - start;
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "unreachable")) << s;
  EXPECT_GE(took, absl::Milliseconds(500));
  EXPECT_LT(took, absl::Milliseconds(2000));
  client->Shutdown();
}

TEST(MetaRetryTest, ZeroWindowFailsAtOnce) {
  rpc::IoThreads io(1);
  auto client = rpc::RpcClient::Create(io.io(), FreeAddress());
  proto::StatFsResponse response;
  const absl::Time start = absl::Now();
  absl::Status s = CallMeta(*MetaEndpoints::Single(client), format::MessageType::kStatFs,
                            proto::Empty(), &response, Options(absl::ZeroDuration()));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(400));
  client->Shutdown();
}

TEST(MetaRetryTest, MetaAnswerIsFinalEvenWhenUnavailable) {
  // Goal: an error meta sends back (here kUnavailable, as "too few live
  // segment servers") is not retried: it is an answer, not a lost call.
  FakeMeta meta("127.0.0.1:0", absl::UnavailableError("need 3 live segment servers"));
  rpc::IoThreads io(1);
  auto client = rpc::RpcClient::Create(io.io(), meta.address());
  proto::StatFsResponse response;
  absl::Status s = CallMeta(*MetaEndpoints::Single(client), format::MessageType::kStatFs,
                            proto::Empty(), &response, Options(absl::Seconds(10)));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(rpc::IsServerAnswer(s));
  EXPECT_EQ("need 3 live segment servers", s.message());
  EXPECT_EQ(1, meta.requests());
  client->Shutdown();
}

TEST(MetaRetryTest, MetaThatComesBackWithinTheWindowAnswers) {
  // Goal: a meta restarting on its address (down for 300 ms) answers the
  // call that was made while it was down, blocking and asynchronous alike.
  const std::string address = FreeAddress();
  rpc::IoThreads io(1);
  auto client = rpc::RpcClient::Create(io.io(), address);
  std::unique_ptr<FakeMeta> meta;
  std::thread restart([&] {
    absl::SleepFor(absl::Milliseconds(300));  // the restart's duration
    meta = std::make_unique<FakeMeta>(address, absl::OkStatus());
  });
  std::atomic<bool> async_done{false};
  absl::Status async_status = absl::UnknownError("not run");
  AsyncCallMeta(io.io(), MetaEndpoints::Single(client), format::MessageType::kStatFs,
                proto::Empty(), Options(absl::Seconds(10)), [&](absl::Status s, format::Frame) {
                  async_status = s;
                  async_done.store(true);
                });
  proto::StatFsResponse response;
  absl::Status s = CallMeta(*MetaEndpoints::Single(client), format::MessageType::kStatFs,
                            proto::Empty(), &response, Options(absl::Seconds(10)));
  restart.join();
  EXPECT_TRUE(s.ok()) << s;
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!async_done.load() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));  // poll the callback
  }
  ASSERT_TRUE(async_done.load());
  EXPECT_TRUE(async_status.ok()) << async_status;
  client->Shutdown();
  meta.reset();
}

TEST(MetaRetryTest, BackoffDoublesToItsCapWithJitter) {
  for (int i = 0; i < 100; ++i) {
    absl::Duration first = MetaRetryDelay(1);
    EXPECT_GE(first, kMetaRetryDelayMin / 2);
    EXPECT_LE(first, kMetaRetryDelayMin);
    absl::Duration third = MetaRetryDelay(3);
    EXPECT_GE(third, kMetaRetryDelayMin * 2);
    EXPECT_LE(third, kMetaRetryDelayMin * 4);
    absl::Duration late = MetaRetryDelay(50);
    EXPECT_GE(late, kMetaRetryDelayMax / 2);
    EXPECT_LE(late, kMetaRetryDelayMax);
  }
}

// The endpoints of `addresses`, over one pool.
std::shared_ptr<MetaEndpoints> Endpoints(rpc::ClientPool& pool,
                                         std::vector<std::string> addresses) {
  return std::make_shared<MetaEndpoints>(
      std::move(addresses), [&pool](const std::string& address) { return pool.Get(address); });
}

TEST(MetaRetryTest, AStandbyNamingTheActiveSendsTheCallThereAtOnce) {
  FakeMeta active("127.0.0.1:0", absl::OkStatus());
  FakeMeta standby("127.0.0.1:0", format::NotActiveMetaError("a standby", active.address()));
  rpc::IoThreads io(1);
  rpc::ClientPool pool(io.io(), nullptr);
  // The active is not even listed: the standby's word is enough.
  auto meta = Endpoints(pool, {standby.address()});
  proto::StatFsResponse response;
  absl::Status s = CallMetaOnce(*meta, format::MessageType::kStatFs, proto::Empty(), &response,
                                absl::Seconds(2));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(1, standby.requests());
  EXPECT_EQ(1, active.requests());
  EXPECT_EQ(active.address(), meta->Current()->address());
  // Later calls go straight to the active.
  s = CallMetaOnce(*meta, format::MessageType::kStatFs, proto::Empty(), &response,
                   absl::Seconds(2));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(1, standby.requests());
  EXPECT_EQ(2, active.requests());

  std::atomic<bool> done{false};
  absl::Status async_status = absl::UnknownError("not run");
  auto again = Endpoints(pool, {standby.address()});
  MetaRetryOptions once = Options(absl::ZeroDuration());
  once.one_attempt = true;
  AsyncCallMeta(io.io(), again, format::MessageType::kStatFs, proto::Empty(), once,
                [&](absl::Status status, format::Frame) {
                  async_status = status;
                  done.store(true);
                });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done.load() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE(async_status.ok()) << async_status;
  EXPECT_EQ(3, active.requests());
  pool.ShutdownAll();
}

TEST(MetaRetryTest, DuringAnElectionTheCallMovesOnAndPausesUntilAnActiveAnswers) {
  // A standby that knows no active yet, a dead replica, then the active.
  FakeMeta standby("127.0.0.1:0", format::NotActiveMetaError("electing", ""));
  FakeMeta active("127.0.0.1:0", absl::OkStatus());
  rpc::IoThreads io(1);
  rpc::ClientPool pool(io.io(), nullptr);
  auto meta = Endpoints(pool, {standby.address(), FreeAddress(), active.address()});
  proto::StatFsResponse response;
  absl::Status s = CallMeta(*meta, format::MessageType::kStatFs, proto::Empty(), &response,
                            Options(absl::Seconds(10)));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(1, standby.requests());
  EXPECT_EQ(1, active.requests());
  pool.ShutdownAll();
}

TEST(MetaRetryTest, AStandbysRefusalIsRetriedUntilTheWindowEndsThenReportedAsIs) {
  FakeMeta standby("127.0.0.1:0", format::NotActiveMetaError("electing", ""));
  rpc::IoThreads io(1);
  rpc::ClientPool pool(io.io(), nullptr);
  auto meta = Endpoints(pool, {standby.address()});
  proto::StatFsResponse response;
  absl::Status s = CallMeta(*meta, format::MessageType::kStatFs, proto::Empty(), &response,
                            Options(absl::Milliseconds(600)));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "unreachable")) << s;
  EXPECT_GT(standby.requests(), 1);
  pool.ShutdownAll();
}

TEST(MetaEndpointsTest, ParseListKeepsOrderDropsDuplicatesAndNamesABadEntry) {
  auto list = MetaEndpoints::ParseList("127.0.0.1:7000,,[::1]:7001,127.0.0.1:7000,meta3:7002");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ((std::vector<std::string>{"127.0.0.1:7000", "[::1]:7001", "meta3:7002"}), *list);
  auto bad = MetaEndpoints::ParseList("127.0.0.1:7000,meta-two");
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, bad.status().code());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "meta-two")) << bad.status();
  EXPECT_EQ(absl::StatusCode::kInvalidArgument, MetaEndpoints::ParseList(",").status().code());
}

}  // namespace
}  // namespace logfs::client
