// LocalRoutes against fake segment servers (RpcServers on loopback and on
// a Unix socket in a temp dir): a server that names this host's id and an
// RPC socket is called over that socket from the first call on; one of
// another host stays on TCP; a server that cannot be asked is asked again
// only after retry_after; concurrent learners ask once.
#include "store/client/local_routes.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "store/client/internal/fake_server.h"
#include "store/client/segd_client.h"
#include "store/rpc/io_threads.h"

namespace logfs::client {
namespace {

using format::MessageType;
using internal::FakeServer;

constexpr absl::Duration kTimeout = absl::Seconds(5);

class LocalRoutesTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/local_routes_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override {
    server_.reset();
    pool_.ShutdownAll();
    std::filesystem::remove_all(dir_);
  }

  // A segment server of host `host_id` with an RPC socket in the temp dir.
  void StartServer(const std::string& host_id) {
    const std::string path = socket_path();
    server_ = std::make_unique<FakeServer>(
        [host_id, path](const format::Frame& request, rpc::Responder responder) {
          if (request.type == MessageType::kShortCircuitInfo) {
            proto::ShortCircuitInfoResponse info;
            info.set_boot_id(host_id);
            info.set_rpc_socket_path(path);
            return responder.Reply(info);
          }
          responder.Reply(proto::SegmentInfoResponse());
        });
    ASSERT_TRUE(server_->server().ListenUnix(path).ok());
  }
  std::string socket_path() const { return dir_ + "/rpc.sock"; }
  uint64_t Requests(rpc::Transport transport) { return server_->server().requests_read(transport); }

  std::string dir_;
  rpc::IoThreads io_{1};
  rpc::ClientPool pool_{io_.io()};
  std::unique_ptr<FakeServer> server_;
};

TEST_F(LocalRoutesTest, AServerOnThisHostIsCalledOverItsUnixSocketFromTheFirstCall) {
  // Goal: the route is learned before the pool's first connection to the
  // server, so every call of SegdClient, blocking or not, goes over the
  // Unix socket; only the one question (ShortCircuitInfo) goes over TCP.
  StartServer("host-a");
  LocalRoutes routes(pool_, LocalRoutes::Options{"host-a"});
  SegdClient segd(pool_);
  segd.set_local_routes(&routes);
  ASSERT_TRUE(segd.CreateSegment(server_->address(), 9, 1, kTimeout).ok());
  ASSERT_TRUE(segd.SegmentInfoEach({server_->address()}, 9, kTimeout)[0].ok());
  absl::Notification appended;
  segd.AsyncAppend(server_->address(), proto::AppendRequest(),
                   std::make_shared<const std::string>("abcd"), kTimeout,
                   [&](absl::StatusOr<proto::SegmentInfoResponse> info) {
                     EXPECT_TRUE(info.ok()) << info.status();
                     appended.Notify();
                   });
  ASSERT_TRUE(appended.WaitForNotificationWithTimeout(kTimeout));

  EXPECT_EQ(1u, routes.probes());
  EXPECT_EQ(1u, routes.local_servers());
  EXPECT_EQ(1u, Requests(rpc::Transport::kTcp));  // the ShortCircuitInfo
  EXPECT_EQ(3u, Requests(rpc::Transport::kUnix));
  EXPECT_EQ(1u, pool_.Get(server_->address())->connects(rpc::Transport::kUnix));
  EXPECT_EQ(0u, pool_.Get(server_->address())->connects(rpc::Transport::kTcp));
}

TEST_F(LocalRoutesTest, AServerOfAnotherHostStaysOnTcp) {
  StartServer("host-b");
  LocalRoutes routes(pool_, LocalRoutes::Options{"host-a"});
  SegdClient segd(pool_);
  segd.set_local_routes(&routes);
  ASSERT_TRUE(segd.CreateSegment(server_->address(), 9, 1, kTimeout).ok());
  ASSERT_TRUE(segd.SegmentInfo(server_->address(), 9, kTimeout).ok());
  EXPECT_EQ(1u, routes.probes());
  EXPECT_EQ(0u, routes.local_servers());
  EXPECT_EQ(0u, Requests(rpc::Transport::kUnix));
  EXPECT_EQ(3u, Requests(rpc::Transport::kTcp));
}

TEST_F(LocalRoutesTest, AServerThatCannotBeAskedIsAskedAgainOnlyAfterRetryAfter) {
  // Goal: a server that does not answer the question stays on TCP and
  // costs the callers one question per retry_after, not one per call.
  // Method: a port nobody listens on (a server started and stopped), two
  // Learns in a row with retry_after of an hour and of a nanosecond.
  StartServer("host-a");
  const std::string address = server_->address();
  server_.reset();
  LocalRoutes patient(pool_, LocalRoutes::Options{"host-a", absl::Hours(1)});
  patient.Learn(address, kTimeout);
  patient.Learn(address, kTimeout);
  EXPECT_EQ(1u, patient.probes());
  LocalRoutes eager(pool_, LocalRoutes::Options{"host-a", absl::Nanoseconds(1)});
  eager.Learn(address, kTimeout);
  eager.Learn(address, kTimeout);
  EXPECT_EQ(2u, eager.probes());
  EXPECT_EQ(0u, eager.local_servers());
}

TEST_F(LocalRoutesTest, ConcurrentLearnersAskOnce) {
  StartServer("host-a");
  LocalRoutes routes(pool_, LocalRoutes::Options{"host-a"});
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] { routes.Learn(server_->address(), kTimeout); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(1u, routes.probes());
  EXPECT_EQ(1u, routes.local_servers());
  EXPECT_EQ(1u, Requests(rpc::Transport::kTcp));
}

}  // namespace
}  // namespace logfs::client
