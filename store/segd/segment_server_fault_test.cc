// SegmentServer on a FaultFileSystem, end to end on loopback with a fake
// meta: a journal fdatasync that fails fails every append waiting on that
// sync round and every later append, and the server says so in its log and
// in its heartbeats to meta. Waits poll with deadlines.
#include <glog/logging.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "src/util/crc32c.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"
#include "store/segd/journal.h"
#include "store/segd/segment_server.h"
#include "tests/fakes/fault_file_system.h"

namespace logfs::segd {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kWaitDeadline = absl::Seconds(10);

template <typename Pred>
bool PollUntil(Pred done) {
  const absl::Time deadline = absl::Now() + kWaitDeadline;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Registers servers as id 7 and remembers the last disk_failure a
// heartbeat carried.
class FakeMeta {
 public:
  FakeMeta()
      : io_threads_(std::make_unique<rpc::IoThreads>(1)),
        server_(std::make_unique<rpc::RpcServer>(
            io_threads_->io(),
            [this](format::Frame f, rpc::Responder r) { Handle(std::move(f), r); },
            format::IsMetaType)) {
    absl::Status status = server_->Listen("127.0.0.1:0");
    EXPECT_TRUE(status.ok()) << status;
  }
  ~FakeMeta() {
    server_->Stop();
    io_threads_->Join();  // before the RpcServer goes: connections point at it
    server_.reset();
  }
  std::string address() const { return server_->bound_address(); }
  std::string disk_failure() {
    absl::MutexLock lock(&mu_);
    return disk_failure_;
  }

 private:
  void Handle(format::Frame frame, const rpc::Responder& responder) {
    if (frame.type == format::MessageType::kRegisterServer) {
      proto::RegisterServerResponse response;
      response.set_server_id(7);
      responder.Reply(response);
    } else if (frame.type == format::MessageType::kHeartbeat) {
      proto::HeartbeatRequest request;
      ASSERT_TRUE(request.ParseFromString(frame.message));
      absl::MutexLock lock(&mu_);
      disk_failure_ = request.disk_failure();
      responder.Reply(proto::HeartbeatResponse());
    } else {
      responder.ReplyError(absl::UnimplementedError("fake meta"));
    }
  }

  std::unique_ptr<rpc::IoThreads> io_threads_;
  std::unique_ptr<rpc::RpcServer> server_;
  absl::Mutex mu_;
  std::string disk_failure_ ABSL_GUARDED_BY(mu_);
};

// Keeps the ERROR lines logged while it lives.
class ErrorLog : public google::LogSink {
 public:
  ErrorLog() { google::AddLogSink(this); }
  ~ErrorLog() override { google::RemoveLogSink(this); }
  void send(google::LogSeverity severity, const char* /*full_filename*/,
            const char* /*base_filename*/, int /*line*/, const google::LogMessageTime& /*time*/,
            const char* message, size_t message_len) override {
    if (severity < google::GLOG_ERROR) return;
    absl::MutexLock lock(&mu_);
    lines_.emplace_back(message, message_len);
  }
  bool Contains(absl::string_view a, absl::string_view b) {
    absl::MutexLock lock(&mu_);
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, a) && absl::StrContains(line, b)) return true;
    }
    return false;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

class SegmentServerFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/logfs-segdfault-XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
    options_.data_dir = dir_ + "/segd";
    options_.listen_address = "127.0.0.1:0";
    options_.meta_address = meta_.address();
    // No round but the ones sync appends ask for: the test decides which
    // appends share a round.
    options_.sync_interval_ms = 60000;
    options_.heartbeat_interval_ms = 20;
    options_.file_system = &fs_;
    segd_io_ = std::make_unique<rpc::IoThreads>(2);
    auto server = SegmentServer::Start(options_, segd_io_->io());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = rpc::RpcClient::Create(client_io_.io(), server_->bound_address());
  }
  void TearDown() override {
    if (client_ != nullptr) client_->Shutdown();
    if (server_ != nullptr) server_->Stop();
    if (segd_io_ != nullptr) segd_io_->Join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  absl::Status Create(uint64_t id) {
    proto::CreateSegmentRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    proto::SegmentInfoResponse response;
    return client_->Call(format::MessageType::kCreateSegment, request, &response, kCallTimeout);
  }
  struct Pending {
    absl::Notification done;
    absl::Status status;
  };
  void AppendAsync(uint64_t id, uint64_t offset, const std::string& data, bool sync,
                   Pending* pending) {
    proto::AppendRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    request.set_offset(offset);
    request.set_sync(sync);
    request.set_crc32c(util::Crc32c(data.data(), data.size()));
    client_->AsyncCall(format::MessageType::kAppend, request, data, kCallTimeout,
                       [pending](absl::Status status, format::Frame) {
                         pending->status = status;
                         pending->done.Notify();
                       });
  }
  absl::Status Append(uint64_t id, uint64_t offset, const std::string& data) {
    Pending pending;
    AppendAsync(id, offset, data, /*sync=*/true, &pending);
    pending.done.WaitForNotificationWithTimeout(kCallTimeout + absl::Seconds(1));
    return pending.status;
  }

  std::string dir_;
  testing::FaultFileSystem fs_;
  FakeMeta meta_;
  rpc::IoThreads client_io_{1};
  SegmentServerOptions options_;
  std::unique_ptr<rpc::IoThreads> segd_io_;
  std::unique_ptr<SegmentServer> server_;
  std::shared_ptr<rpc::RpcClient> client_;
};

TEST_F(SegmentServerFaultTest, FailedJournalSyncFailsTheWholeRoundEveryLaterAppendAndTellsMeta) {
  // Goal: fsyncgate at the server. Method: (a) an acked append; (b) eight
  // unsynced appends to eight segments wait, then one sync append starts
  // the round whose journal fdatasync fails: all nine fail; (c) later
  // appends fail too, on old and new segments, though the disk works
  // again; (d) the log and the next heartbeats say why.
  ErrorLog errors;
  constexpr int kWaiters = 8;
  for (uint64_t id = 1; id <= kWaiters + 1; ++id) ASSERT_TRUE(Create(id).ok());
  ASSERT_TRUE(Append(1, 0, "acked").ok());
  EXPECT_EQ("", meta_.disk_failure());

  fs_.FailSyncs(std::string("/") + kJournalFileName);
  const uint64_t appends_before = server_->counters().appends;
  std::vector<std::unique_ptr<Pending>> waiters;
  for (uint64_t id = 2; id <= kWaiters + 1; ++id) {
    waiters.push_back(std::make_unique<Pending>());
    AppendAsync(id, 0, "waits for the round", /*sync=*/false, waiters.back().get());
  }
  // Every one is written and waiting before the round starts.
  ASSERT_TRUE(PollUntil([&] { return server_->counters().appends == appends_before + kWaiters; }));
  waiters.push_back(std::make_unique<Pending>());
  AppendAsync(1, 5, " sync", /*sync=*/true, waiters.back().get());
  for (auto& w : waiters) {
    ASSERT_TRUE(w->done.WaitForNotificationWithTimeout(kCallTimeout + absl::Seconds(1)));
    EXPECT_EQ(absl::StatusCode::kDataLoss, w->status.code()) << w->status;
  }

  fs_.ClearFaults();
  const uint64_t journal_syncs = fs_.file_syncs(std::string("/") + kJournalFileName);
  EXPECT_EQ(absl::StatusCode::kDataLoss, Append(2, 0, "later").code());
  ASSERT_TRUE(Create(100).ok());  // creates need no journal
  EXPECT_EQ(absl::StatusCode::kDataLoss, Append(100, 0, "new segment").code());
  EXPECT_EQ(journal_syncs, fs_.file_syncs(std::string("/") + kJournalFileName));

  EXPECT_TRUE(errors.Contains("journal", "every later append on this server fails"));
  ASSERT_TRUE(PollUntil([&] { return !meta_.disk_failure().empty(); }));
  EXPECT_TRUE(absl::StrContains(meta_.disk_failure(), "journal")) << meta_.disk_failure();
}

}  // namespace
}  // namespace logfs::segd
