// SegmentServer against meta replicas (docs/meta_ha.md): the meta-epoch
// fence of its commands and heartbeat answers, and registration and
// heartbeats with a list of metas. Real server on loopback, fake metas
// made from RpcServers; waits poll with deadlines, nothing sleeps for a
// condition.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "src/env/posix_file.h"
#include "src/util/crc32c.h"
#include "store/format/error_codec.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/format/meta_fence_error.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/segment_server.h"

namespace logfs::segd {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kWaitDeadline = absl::Seconds(10);

template <typename Pred>
bool PollUntil(Pred done, absl::Duration deadline = kWaitDeadline) {
  const absl::Time end = absl::Now() + deadline;
  while (!done()) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// A meta replica: active (registers servers, answers heartbeats with its
// epoch and the queued deletions) or standby (refuses RegisterServer with
// NotActiveMetaError naming `active_address`, answers heartbeats
// `standby` with the queued deletions, which a server must not act on).
class FakeMetaReplica {
 public:
  FakeMetaReplica()
      : io_threads_(std::make_unique<rpc::IoThreads>(1)),
        server_(std::make_unique<rpc::RpcServer>(
            io_threads_->io(),
            [this](format::Frame f, rpc::Responder r) { Handle(std::move(f), r); },
            format::IsMetaType)) {
    absl::Status status = server_->Listen("127.0.0.1:0");
    EXPECT_TRUE(status.ok()) << status;
  }
  ~FakeMetaReplica() {
    server_->Stop();
    io_threads_->Join();
    server_.reset();
  }
  std::string address() const { return server_->bound_address(); }

  void SetAnswers(uint64_t meta_epoch, bool standby, std::string active_address = "") {
    absl::MutexLock lock(&mu_);
    meta_epoch_ = meta_epoch;
    standby_ = standby;
    active_address_ = std::move(active_address);
  }
  void QueueDelete(uint64_t segment_id) {
    absl::MutexLock lock(&mu_);
    deletes_.push_back(segment_id);
  }
  int heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  int registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  int refused_registrations() {
    absl::MutexLock lock(&mu_);
    return refused_registrations_;
  }

 private:
  void Handle(format::Frame frame, const rpc::Responder& responder) {
    absl::MutexLock lock(&mu_);
    if (frame.type == format::MessageType::kRegisterServer) {
      proto::RegisterServerRequest request;
      ASSERT_TRUE(request.ParseFromString(frame.message));
      if (standby_) {
        ++refused_registrations_;
        return responder.ReplyError(format::NotActiveMetaError("standby", active_address_));
      }
      ++registrations_;
      proto::RegisterServerResponse response;
      response.set_server_id(request.server_id() != 0 ? request.server_id() : 7);
      responder.Reply(response);
    } else if (frame.type == format::MessageType::kHeartbeat) {
      ++heartbeats_;
      proto::HeartbeatResponse response;
      for (uint64_t id : deletes_) response.add_delete_segments(id);
      deletes_.clear();
      response.set_meta_epoch(meta_epoch_);
      response.set_standby(standby_);
      responder.Reply(response);
    } else {
      responder.ReplyError(absl::UnimplementedError("fake meta"));
    }
  }

  std::unique_ptr<rpc::IoThreads> io_threads_;
  std::unique_ptr<rpc::RpcServer> server_;
  absl::Mutex mu_;
  uint64_t meta_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool standby_ ABSL_GUARDED_BY(mu_) = false;
  std::string active_address_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> deletes_ ABSL_GUARDED_BY(mu_);
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int refused_registrations_ ABSL_GUARDED_BY(mu_) = 0;
};

// A meta that hangs: its socket listens, the kernel completes connections
// into its backlog, and nothing is ever read or answered.
class HungMeta {
 public:
  HungMeta() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(0, ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
    EXPECT_EQ(0, ::listen(fd_, 16));
    socklen_t len = sizeof(addr);
    EXPECT_EQ(0, ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len));
    port_ = ntohs(addr.sin_port);
  }
  ~HungMeta() { ::close(fd_); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

class SegmentServerHaTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "segment_server_ha_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl.data()));
    dir_ = tmpl;
    options_.data_dir = dir_ + "/segd";
    options_.listen_address = "127.0.0.1:0";
    options_.meta_address = active_.address();
    options_.sync_interval_ms = 20;
    options_.heartbeat_interval_ms = 20;
    options_.rpc_timeout_ms = 5000;
  }
  void TearDown() override {
    StopServer();
    std::filesystem::remove_all(dir_);
  }

  void StartServer() {
    segd_io_ = std::make_unique<rpc::IoThreads>(2);
    auto server = SegmentServer::Start(options_, segd_io_->io());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = rpc::RpcClient::Create(client_io_.io(), server_->bound_address());
  }
  void StopServer() {
    if (client_ != nullptr) client_->Shutdown();
    client_.reset();
    if (server_ != nullptr) server_->Stop();
    if (segd_io_ != nullptr) segd_io_->Join();
    server_.reset();
    segd_io_.reset();
  }

  absl::StatusOr<proto::SegmentInfoResponse> Call(format::MessageType type,
                                                  const google::protobuf::MessageLite& request,
                                                  std::string data = {}) {
    proto::SegmentInfoResponse response;
    absl::Status status = client_->Call(type, request, &response, kCallTimeout, std::move(data));
    if (!status.ok()) return status;
    return response;
  }
  absl::StatusOr<proto::SegmentInfoResponse> Create(uint64_t id, uint64_t epoch,
                                                    uint64_t meta_epoch) {
    proto::CreateSegmentRequest request;
    request.set_segment_id(id);
    request.set_epoch(epoch);
    request.set_meta_epoch(meta_epoch);
    return Call(format::MessageType::kCreateSegment, request);
  }
  absl::StatusOr<proto::SegmentInfoResponse> Append(uint64_t id, uint64_t offset,
                                                    const std::string& data) {
    proto::AppendRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    request.set_offset(offset);
    request.set_sync(true);
    request.set_crc32c(util::Crc32c(data.data(), data.size()));
    return Call(format::MessageType::kAppend, request, data);
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(uint64_t id, uint64_t epoch, uint64_t length,
                                                  uint64_t meta_epoch) {
    proto::SealRequest request;
    request.set_segment_id(id);
    request.set_epoch(epoch);
    request.set_length(length);
    request.set_meta_epoch(meta_epoch);
    return Call(format::MessageType::kSeal, request);
  }
  absl::Status Delete(uint64_t id, uint64_t meta_epoch) {
    proto::DeleteSegmentRequest request;
    request.set_segment_id(id);
    request.set_meta_epoch(meta_epoch);
    proto::Empty response;
    return client_->Call(format::MessageType::kDeleteSegment, request, &response, kCallTimeout);
  }
  absl::StatusOr<proto::SegmentInfoResponse> Copy(uint64_t id, uint64_t meta_epoch) {
    proto::CopySegmentRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    request.set_length(5);
    request.add_source_addresses("127.0.0.1:1");  // never reached when refused
    request.set_meta_epoch(meta_epoch);
    return Call(format::MessageType::kCopySegment, request);
  }
  absl::StatusOr<proto::SegmentInfoResponse> Info(uint64_t id) {
    proto::SegmentInfoRequest request;
    request.set_segment_id(id);
    return Call(format::MessageType::kSegmentInfo, request);
  }
  static void ExpectFenced(const absl::Status& status, uint64_t meta_epoch, uint64_t highest) {
    EXPECT_EQ(absl::StatusCode::kFailedPrecondition, status.code()) << status;
    EXPECT_EQ(absl::StrCat("fenced: meta epoch ", meta_epoch, " is below ", highest,
                           ", the highest this server has seen"),
              status.message());
  }

  std::string dir_;
  FakeMetaReplica active_;
  rpc::IoThreads client_io_{1};
  SegmentServerOptions options_;
  std::unique_ptr<rpc::IoThreads> segd_io_;
  std::unique_ptr<SegmentServer> server_;
  std::shared_ptr<rpc::RpcClient> client_;
};

TEST_F(SegmentServerHaTest, CommandsBelowTheSeenMetaEpochAreRefusedAndTouchNothing) {
  StartServer();
  ASSERT_TRUE(Create(1, 1, /*meta_epoch=*/7).ok());  // raises the fence to 7
  ASSERT_TRUE(Append(1, 0, "hello").ok());
  ExpectFenced(Seal(1, 2, 3, /*meta_epoch=*/4).status(), 4, 7);
  ExpectFenced(Create(1, 5, /*meta_epoch=*/6).status(), 6, 7);
  ExpectFenced(Delete(1, /*meta_epoch=*/4), 4, 7);
  ExpectFenced(Copy(1, /*meta_epoch=*/4).status(), 4, 7);
  ExpectFenced(Create(2, 1, /*meta_epoch=*/3).status(), 3, 7);
  // The replica is as the writer left it: open, epoch 1, all its bytes.
  auto info = Info(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(1u, info->epoch());
  EXPECT_EQ(5u, info->length());
  EXPECT_FALSE(info->sealed());
  EXPECT_EQ(absl::StatusCode::kNotFound, Info(2).status().code());
  // The active's own epoch, and a higher one, are served.
  ASSERT_TRUE(Seal(1, 2, 5, /*meta_epoch=*/7).ok());
  ASSERT_TRUE(Delete(1, /*meta_epoch=*/8).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, Info(1).status().code());
  ExpectFenced(Create(3, 1, /*meta_epoch=*/7).status(), 7, 8);
  EXPECT_EQ("8\n", *env::ReadSmallFile(options_.data_dir + "/meta_epoch", 64));
}

TEST_F(SegmentServerHaTest, SeenMetaEpochSurvivesARestart) {
  StartServer();
  ASSERT_TRUE(Create(1, 1, /*meta_epoch=*/7).ok());
  ASSERT_TRUE(Append(1, 0, "hello").ok());
  StopServer();
  StartServer();
  ExpectFenced(Seal(1, 2, 5, /*meta_epoch=*/6).status(), 6, 7);
  auto info = Info(1);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(info->sealed());
  EXPECT_TRUE(Seal(1, 2, 5, /*meta_epoch=*/7).ok());
}

TEST_F(SegmentServerHaTest, StartFailsClearlyOnACorruptMetaEpochFile) {
  std::filesystem::create_directories(options_.data_dir);
  ASSERT_TRUE(env::WriteFileAtomically(options_.data_dir + "/meta_epoch", "seven\n").ok());
  rpc::IoThreads io(1);
  auto server = SegmentServer::Start(options_, io.io());
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, server.status().code());
  EXPECT_NE(std::string::npos, server.status().message().find("meta_epoch is corrupt"))
      << server.status();
  io.Join();
}

TEST_F(SegmentServerHaTest, MetaEpochZeroIsNeverRefused) {
  StartServer();
  ASSERT_TRUE(Create(9, 1, /*meta_epoch=*/7).ok());
  // A writer's create and seal, and a lone meta's delete, carry 0.
  ASSERT_TRUE(Create(1, 1, 0).ok());
  ASSERT_TRUE(Append(1, 0, "hello").ok());
  auto sealed = Seal(1, 1, 5, 0);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_TRUE(sealed->sealed());
  ASSERT_TRUE(Delete(1, 0).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, Info(1).status().code());
}

TEST_F(SegmentServerHaTest, HeartbeatAnswersOfAStandbyOrALowerEpochAreNotActedOn) {
  active_.SetAnswers(/*meta_epoch=*/3, /*standby=*/false);
  StartServer();
  ASSERT_TRUE(Create(1, 1, /*meta_epoch=*/7).ok());
  // A deposed active (epoch 3) asks for the deletion: ignored.
  active_.QueueDelete(1);
  int seen = active_.heartbeats();
  ASSERT_TRUE(PollUntil([&] { return active_.heartbeats() >= seen + 3; }));
  EXPECT_TRUE(Info(1).ok());
  // A standby of a higher epoch likewise.
  active_.SetAnswers(/*meta_epoch=*/9, /*standby=*/true);
  active_.QueueDelete(1);
  seen = active_.heartbeats();
  ASSERT_TRUE(PollUntil([&] { return active_.heartbeats() >= seen + 3; }));
  EXPECT_TRUE(Info(1).ok());
  // The active of the highest epoch is obeyed.
  active_.SetAnswers(/*meta_epoch=*/7, /*standby=*/false);
  active_.QueueDelete(1);
  ASSERT_TRUE(PollUntil([&] { return absl::IsNotFound(Info(1).status()); }));
}

TEST_F(SegmentServerHaTest, RegistersWithTheActiveAStandbyNamesAndHeartbeatsToBoth) {
  FakeMetaReplica standby;
  standby.SetAnswers(/*meta_epoch=*/0, /*standby=*/true, active_.address());
  active_.SetAnswers(/*meta_epoch=*/5, /*standby=*/false);
  options_.meta_address = absl::StrCat(standby.address(), ",", active_.address());
  StartServer();
  EXPECT_EQ(1, standby.refused_registrations());
  EXPECT_EQ(0, standby.registrations());
  EXPECT_EQ(1, active_.registrations());
  EXPECT_EQ(7u, server_->server_id());
  ASSERT_TRUE(PollUntil([&] { return standby.heartbeats() >= 3 && active_.heartbeats() >= 3; }));
  // The standby's deletions are not acted on; the active's are.
  ASSERT_TRUE(Create(1, 1, 0).ok());
  ASSERT_TRUE(Create(2, 1, 0).ok());
  standby.QueueDelete(1);
  active_.QueueDelete(2);
  ASSERT_TRUE(PollUntil([&] { return absl::IsNotFound(Info(2).status()); }));
  const int seen = standby.heartbeats();
  ASSERT_TRUE(PollUntil([&] { return standby.heartbeats() >= seen + 2; }));
  EXPECT_TRUE(Info(1).ok());
}

TEST_F(SegmentServerHaTest, AHungMetaDoesNotDelayHeartbeatsToTheOthers) {
  HungMeta hung;
  options_.rpc_timeout_ms = 30000;  // a heartbeat to `hung` waits this long
  options_.meta_address = absl::StrCat(active_.address(), ",", hung.address());
  StartServer();
  // 50 beats at 20 ms take about a second; behind a hung call, 50 times
  // 30 s. The deadline is below one rpc_timeout_ms.
  const int seen = active_.heartbeats();
  EXPECT_TRUE(PollUntil([&] { return active_.heartbeats() >= seen + 50; }, absl::Seconds(20)));
}

}  // namespace
}  // namespace logfs::segd
