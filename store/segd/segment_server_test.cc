// SegmentServer end to end on loopback: a real server with its own data
// dir, a fake meta made from an RpcServer, and RpcClients. Waits poll
// with deadlines; nothing sleeps for a condition.
#include "store/segd/segment_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "src/env/file_system.h"
#include "src/util/crc32c.h"
#include "store/format/logfs.pb.h"
#include "store/format/message_type.h"
#include "store/rpc/endpoint.h"
#include "store/rpc/io_threads.h"
#include "store/rpc/rpc_client.h"
#include "store/rpc/rpc_server.h"

namespace logfs::segd {
namespace {

constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr absl::Duration kWaitDeadline = absl::Seconds(10);

// Answers RegisterServer (id 7 for a new server) and Heartbeat (with the
// queued deletions), and remembers what it saw.
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

  void QueueDelete(uint64_t segment_id) {
    absl::MutexLock lock(&mu_);
    deletes_.push_back(segment_id);
  }
  int heartbeats() {
    absl::MutexLock lock(&mu_);
    return heartbeats_;
  }
  std::vector<proto::RegisterServerRequest> registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }

 private:
  void Handle(format::Frame frame, const rpc::Responder& responder) {
    absl::MutexLock lock(&mu_);
    if (frame.type == format::MessageType::kRegisterServer) {
      proto::RegisterServerRequest request;
      ASSERT_TRUE(request.ParseFromString(frame.message));
      registrations_.push_back(request);
      proto::RegisterServerResponse response;
      response.set_server_id(request.server_id() != 0 ? request.server_id() : 7);
      responder.Reply(response);
    } else if (frame.type == format::MessageType::kHeartbeat) {
      ++heartbeats_;
      proto::HeartbeatResponse response;
      for (uint64_t id : deletes_) response.add_delete_segments(id);
      deletes_.clear();
      responder.Reply(response);
    } else {
      responder.ReplyError(absl::UnimplementedError("fake meta"));
    }
  }

  std::unique_ptr<rpc::IoThreads> io_threads_;
  std::unique_ptr<rpc::RpcServer> server_;
  absl::Mutex mu_;
  std::vector<uint64_t> deletes_ ABSL_GUARDED_BY(mu_);
  int heartbeats_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<proto::RegisterServerRequest> registrations_ ABSL_GUARDED_BY(mu_);
};

// Polls `done` until true or the deadline.
template <typename Pred>
bool PollUntil(Pred done) {
  absl::Time deadline = absl::Now() + kWaitDeadline;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// Holds every Sync and WriteAtDurably of files whose path contains
// `part` until Open(): a disk that takes as long as a test wants for one
// file's fdatasync, and no longer for the others'.
class GatedSyncFileSystem : public env::FileSystemWrapper {
 public:
  explicit GatedSyncFileSystem(std::string part)
      : FileSystemWrapper(env::FileSystem::Default()), part_(std::move(part)) {}

  absl::StatusOr<std::unique_ptr<env::WritableFile>> NewWritableFile(
      const std::string& path, const env::WritableFileOptions& options) override {
    auto file = target()->NewWritableFile(path, options);
    if (!file.ok() || !absl::StrContains(path, part_)) return file;
    return std::unique_ptr<env::WritableFile>(new File(std::move(*file), this));
  }
  // Syncs held so far, waiting or let through.
  int held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }

 private:
  class File : public env::WritableFileWrapper {
   public:
    File(std::unique_ptr<env::WritableFile> target, GatedSyncFileSystem* fs)
        : WritableFileWrapper(std::move(target)), fs_(fs) {}
    absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) override {
      fs_->Wait();
      return target()->WriteAtDurably(offset, data);
    }
    absl::Status Sync() override {
      fs_->Wait();
      return target()->Sync();
    }

   private:
    GatedSyncFileSystem* const fs_;
  };

  void Wait() {
    absl::MutexLock lock(&mu_);
    ++held_;
    mu_.Await(absl::Condition(&open_));
  }

  const std::string part_;
  absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

class SegmentServerTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "segment_server_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl.data()));
    dir_ = tmpl;
    options_.data_dir = dir_ + "/segd";
    options_.listen_address = "127.0.0.1:0";
    options_.meta_address = meta_.address();
    options_.sync_interval_ms = 20;
    options_.heartbeat_interval_ms = 20;
    options_.rpc_timeout_ms = 5000;
  }
  void TearDown() override {
    StopServer();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(int io_threads = 3) {
    segd_io_ = std::make_unique<rpc::IoThreads>(io_threads);
    auto server = SegmentServer::Start(options_, segd_io_->io());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    client_ = NewClient();
  }
  void StopServer() {
    for (auto& client : clients_) client->Shutdown();
    clients_.clear();
    if (server_ != nullptr) server_->Stop();
    if (segd_io_ != nullptr) segd_io_->Join();
    server_.reset();
    segd_io_.reset();
  }
  std::shared_ptr<rpc::RpcClient> NewClient() {
    auto client = rpc::RpcClient::Create(client_io_.io(), server_->bound_address());
    clients_.push_back(client);
    return client;
  }

  absl::StatusOr<proto::SegmentInfoResponse> Create(uint64_t id, uint64_t epoch) {
    proto::CreateSegmentRequest request;
    request.set_segment_id(id);
    request.set_epoch(epoch);
    return CallInfo(format::MessageType::kCreateSegment, request);
  }
  // Writer w appends `records` synced 100-byte records of letter 'a' + w
  // to segment first_id + w through clients[w], all writers at once (one
  // client may serve every writer). Returns the appends that failed or
  // came back with a durable length short of them.
  int AppendConcurrently(uint64_t first_id, const std::vector<rpc::RpcClient*>& clients,
                         int records) {
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (size_t w = 0; w < clients.size(); ++w) {
      threads.emplace_back([&, w] {
        std::string record(100, static_cast<char>('a' + w));
        for (int i = 0; i < records; ++i) {
          auto info = Append(first_id + w, i * record.size(), record, true, clients[w]);
          if (!info.ok() || info->durable_length() < (i + 1) * record.size()) ++failures;
        }
      });
    }
    for (auto& t : threads) t.join();
    return failures.load();
  }
  absl::StatusOr<proto::SegmentInfoResponse> Append(uint64_t id, uint64_t offset,
                                                    const std::string& data, bool sync,
                                                    rpc::RpcClient* client = nullptr) {
    proto::AppendRequest request = MakeAppend(id, offset, data, sync);
    return CallInfo(format::MessageType::kAppend, request, data, client);
  }
  static proto::AppendRequest MakeAppend(uint64_t id, uint64_t offset, const std::string& data,
                                         bool sync) {
    proto::AppendRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    request.set_offset(offset);
    request.set_sync(sync);
    request.set_crc32c(util::Crc32c(data.data(), data.size()));
    return request;
  }
  absl::StatusOr<proto::SegmentInfoResponse> Info(uint64_t id) {
    proto::SegmentInfoRequest request;
    request.set_segment_id(id);
    return CallInfo(format::MessageType::kSegmentInfo, request);
  }
  absl::StatusOr<proto::SegmentInfoResponse> Seal(uint64_t id, uint64_t length) {
    proto::SealRequest request;
    request.set_segment_id(id);
    request.set_epoch(1);
    request.set_length(length);
    return CallInfo(format::MessageType::kSeal, request);
  }
  absl::StatusOr<std::string> Read(uint64_t id, uint64_t offset, uint32_t length) {
    proto::ReadRequest request;
    request.set_segment_id(id);
    request.set_offset(offset);
    request.set_length(length);
    proto::ReadResponse response;
    std::string data;
    absl::Status status =
        client_->Call(format::MessageType::kRead, request, &response, kCallTimeout, {}, &data);
    if (!status.ok()) return status;
    EXPECT_EQ(util::Crc32c(data.data(), data.size()), response.crc32c());
    return data;
  }
  absl::StatusOr<proto::SegmentInfoResponse> CallInfo(format::MessageType type,
                                                      const google::protobuf::MessageLite& request,
                                                      std::string data = {},
                                                      rpc::RpcClient* client = nullptr) {
    proto::SegmentInfoResponse response;
    absl::Status status = (client != nullptr ? client : client_.get())
                              ->Call(type, request, &response, kCallTimeout, std::move(data));
    if (!status.ok()) return status;
    return response;
  }

  // An append sent without waiting; `*done` fires with its outcome.
  struct Pending {
    absl::Notification done;
    absl::Status status;
    proto::SegmentInfoResponse response;
  };
  void AppendAsync(uint64_t id, uint64_t offset, const std::string& data, bool sync,
                   Pending* pending, rpc::CallBatch* batch = nullptr) {
    client_->AsyncCall(
        format::MessageType::kAppend, MakeAppend(id, offset, data, sync), data, kCallTimeout,
        [pending](absl::Status status, format::Frame frame) {
          pending->status = status;
          if (status.ok()) pending->response.ParseFromString(frame.message);
          pending->done.Notify();
        },
        batch);
  }

  std::string dir_;
  FakeMeta meta_;
  rpc::IoThreads client_io_{1};
  SegmentServerOptions options_;
  std::unique_ptr<rpc::IoThreads> segd_io_;
  std::unique_ptr<SegmentServer> server_;
  std::shared_ptr<rpc::RpcClient> client_;
  std::vector<std::shared_ptr<rpc::RpcClient>> clients_;
};

TEST_F(SegmentServerTest, AppendReadSealDeleteRoundTrip) {
  StartServer();
  // (a) create, synced and unsynced appends: each answer covers its bytes.
  ASSERT_TRUE(Create(1, 1).ok());
  auto first = Append(1, 0, "hello", /*sync=*/true);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(5u, first->length());
  EXPECT_EQ(5u, first->durable_length());
  auto second = Append(1, 5, " world", /*sync=*/false);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_GE(second->durable_length(), 11u);
  auto again = Append(1, 5, " world", /*sync=*/true);  // exact resend
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(11u, again->length());
  // (b) reads, and the append errors.
  EXPECT_EQ("hello world", *Read(1, 0, 100));
  EXPECT_EQ("world", *Read(1, 6, 5));
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Read(1, 12, 1).status().code());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Append(1, 3, "x", true).status().code());
  proto::AppendRequest bad_crc = MakeAppend(1, 11, "abc", true);
  bad_crc.set_crc32c(bad_crc.crc32c() ^ 1);
  EXPECT_EQ(absl::StatusCode::kDataLoss,
            CallInfo(format::MessageType::kAppend, bad_crc, "abc").status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, Append(2, 0, "x", true).status().code());
  // (c) sync, seal (truncating), then appends are refused.
  proto::SyncRequest sync;
  sync.set_segment_id(1);
  sync.set_epoch(1);
  auto synced = CallInfo(format::MessageType::kSync, sync);
  ASSERT_TRUE(synced.ok()) << synced.status();
  EXPECT_EQ(11u, synced->durable_length());
  EXPECT_EQ(absl::StatusCode::kOutOfRange, Seal(1, 12).status().code());
  auto sealed = Seal(1, 8);
  ASSERT_TRUE(sealed.ok()) << sealed.status();
  EXPECT_TRUE(sealed->sealed());
  EXPECT_EQ(8u, sealed->length());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, Append(1, 8, "x", true).status().code());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, Seal(1, 7).status().code());
  EXPECT_TRUE(Seal(1, 8).ok());
  EXPECT_EQ("hello wo", *Read(1, 0, 100));
  // (d) delete.
  proto::DeleteSegmentRequest del;
  del.set_segment_id(1);
  proto::Empty empty;
  ASSERT_TRUE(client_->Call(format::MessageType::kDeleteSegment, del, &empty, kCallTimeout).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, Info(1).status().code());
  EXPECT_TRUE(client_->Call(format::MessageType::kDeleteSegment, del, &empty, kCallTimeout).ok());
}

TEST_F(SegmentServerTest, UnsyncedAppendIsAnsweredWithinSyncInterval) {
  StartServer();
  ASSERT_TRUE(Create(1, 1).ok());
  Pending pending;
  absl::Time start = absl::Now();
  AppendAsync(1, 0, "no sync asked", /*sync=*/false, &pending);
  ASSERT_TRUE(pending.done.WaitForNotificationWithTimeout(kWaitDeadline));
  absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(pending.status.ok()) << pending.status;
  EXPECT_EQ(13u, pending.response.durable_length());
  // One interval plus an fdatasync; generous for loaded CI machines.
  EXPECT_LT(took, absl::Milliseconds(options_.sync_interval_ms) + absl::Seconds(1));
}

TEST_F(SegmentServerTest, SealAnswersWaitersBelowAndFailsWaitersPastIt) {
  // (a) a sync interval so long that unsynced appends stay pending;
  // (b) seal between them; (c) the first is durable, the second is cut off.
  options_.sync_interval_ms = 600000;
  StartServer();
  ASSERT_TRUE(Create(1, 1).ok());
  Pending below, past;
  AppendAsync(1, 0, "keep", false, &below);
  AppendAsync(1, 4, "drop", false, &past);
  ASSERT_TRUE(PollUntil([&] { return Info(1).ok() && Info(1)->length() == 8; }));
  EXPECT_FALSE(below.done.HasBeenNotified());
  ASSERT_TRUE(Seal(1, 4).ok());
  ASSERT_TRUE(below.done.WaitForNotificationWithTimeout(kWaitDeadline));
  ASSERT_TRUE(below.status.ok()) << below.status;
  EXPECT_EQ(4u, below.response.durable_length());
  ASSERT_TRUE(past.done.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, past.status.code());
}

TEST_F(SegmentServerTest, SealOnASlowDiskHoldsUpNoOtherSegment) {
  // (a) one io thread, as segd runs by default, and a disk whose syncs of
  // segment 1's data file wait until the test lets them through;
  // (b) segment 1's seal waits in its fdatasync; (c) meanwhile segment 2
  // is created, appended to with sync and read, and answered; (d) once the
  // disk is through, the seal is answered too and holds every byte.
  GatedSyncFileSystem disk("/1.seg");
  options_.file_system = &disk;
  std::thread sealer;
  // Even on failure: the seal must finish, and the server stop before the
  // disk goes.
  absl::Cleanup finish = [&] {
    disk.Open();
    if (sealer.joinable()) sealer.join();
    StopServer();
  };
  StartServer(/*io_threads=*/1);
  ASSERT_TRUE(Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "sealed", /*sync=*/true).ok());
  absl::Notification sealed;
  absl::StatusOr<proto::SegmentInfoResponse> seal;
  sealer = std::thread([&] {
    seal = Seal(1, 6);
    sealed.Notify();
  });
  ASSERT_TRUE(PollUntil([&] { return disk.held() > 0; }));
  auto other = NewClient();
  proto::CreateSegmentRequest create;
  create.set_segment_id(2);
  create.set_epoch(1);
  EXPECT_TRUE(CallInfo(format::MessageType::kCreateSegment, create, {}, other.get()).ok());
  auto appended = Append(2, 0, "not held", /*sync=*/true, other.get());
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(8u, appended->durable_length());
  EXPECT_EQ("sealed", *Read(1, 0, 100));  // reads of the replica being sealed too
  // Appends to the replica being sealed are refused, not queued behind it.
  auto late = Append(1, 6, "late", /*sync=*/true, other.get());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, late.status().code()) << late.status();
  EXPECT_FALSE(sealed.HasBeenNotified());
  disk.Open();
  ASSERT_TRUE(sealed.WaitForNotificationWithTimeout(kWaitDeadline));
  ASSERT_TRUE(seal.ok()) << seal.status();
  EXPECT_TRUE(seal->sealed());
  EXPECT_EQ(6u, seal->durable_length());
  EXPECT_EQ("sealed", *Read(1, 0, 100));
}

TEST_F(SegmentServerTest, AnAppendToADeletedReplicaIsNeverAnsweredFromItsSuccessor) {
  // Goal: an append waiting for its sync, whose replica is deleted (a copy
  // into this server starts over, deleting what it finds) and created
  // again under the same id, is answered kNotFound, not with the new
  // replica's durable length (found by the segd fuzzer as an append left
  // unanswered). Method: (a) a sync interval so long that an unsynced
  // append stays pending; (b) a CopySegment from a closed port deletes the
  // replica and fails; (c) the id is created again and gets a synced
  // append of as many bytes; (d) the first append fails, the second holds.
  options_.sync_interval_ms = 600000;
  StartServer();
  // (a)
  ASSERT_TRUE(Create(1, 1).ok());
  Pending lost;
  AppendAsync(1, 0, "lost", /*sync=*/false, &lost);
  ASSERT_TRUE(PollUntil([&] { return Info(1).ok() && Info(1)->length() == 4; }));
  // (b)
  proto::CopySegmentRequest copy;
  copy.set_segment_id(1);
  copy.set_epoch(1);
  copy.set_length(4);
  copy.add_source_addresses("127.0.0.1:1");
  EXPECT_FALSE(CallInfo(format::MessageType::kCopySegment, copy).ok());
  EXPECT_EQ(absl::StatusCode::kNotFound, Info(1).status().code());
  // (c)
  ASSERT_TRUE(Create(1, 1).ok());
  auto kept = Append(1, 0, "kept", /*sync=*/true);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(4u, kept->durable_length());
  // (d)
  ASSERT_TRUE(lost.done.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(absl::StatusCode::kNotFound, lost.status.code()) << lost.status;
  EXPECT_EQ("kept", *Read(1, 0, 100));
}

TEST_F(SegmentServerTest, StopAnswersPendingAppends) {
  options_.sync_interval_ms = 600000;
  StartServer();
  ASSERT_TRUE(Create(1, 1).ok());
  Pending pending;
  AppendAsync(1, 0, "pending", false, &pending);
  ASSERT_TRUE(PollUntil([&] { return server_->counters().appends == 1; }));
  server_->Stop();
  ASSERT_TRUE(pending.done.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(absl::StatusCode::kUnavailable, pending.status.code());
}

TEST_F(SegmentServerTest, GarbageFrameClosesOnlyThatConnection) {
  StartServer();
  ASSERT_TRUE(Create(1, 1).ok());
  // (a) raw TCP: 28 bytes with a bad magic; the server must hang up.
  auto endpoint = rpc::ParseEndpoint(server_->bound_address());
  ASSERT_TRUE(endpoint.ok());
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(endpoint->port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  timeval timeout{10, 0};
  ASSERT_EQ(0, ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)));
  std::string garbage(28, 'x');
  ASSERT_EQ(28, ::write(fd, garbage.data(), garbage.size()));
  char byte;
  EXPECT_EQ(0, ::read(fd, &byte, 1));  // EOF, not a timeout (-1)
  ::close(fd);
  // (b) the other connection still works.
  auto info = Append(1, 0, "still fine", true);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(10u, info->durable_length());
}

TEST_F(SegmentServerTest, ConcurrentSyncedAppendsShareFdatasyncs) {
  // 8 writers, one segment and one connection each, append synced records
  // in a loop. Group commit must cover several appends per round.
  StartServer();
  constexpr int kWriters = 8;
  constexpr int kAppendsPerWriter = 25;
  std::vector<std::shared_ptr<rpc::RpcClient>> owned;
  std::vector<rpc::RpcClient*> clients;
  for (int w = 0; w < kWriters; ++w) {
    ASSERT_TRUE(Create(100 + w, 1).ok());
    owned.push_back(NewClient());
    clients.push_back(owned.back().get());
  }
  SegmentServerCounters before = server_->counters();
  EXPECT_EQ(0, AppendConcurrently(100, clients, kAppendsPerWriter));
  SegmentServerCounters after = server_->counters();
  uint64_t appends = after.appends - before.appends;
  uint64_t rounds = after.sync_rounds - before.sync_rounds;
  EXPECT_EQ(static_cast<uint64_t>(kWriters * kAppendsPerWriter), appends);
  EXPECT_LT(rounds, appends) << "fdatasyncs " << after.fdatasyncs - before.fdatasyncs;
  EXPECT_GE(after.fdatasyncs - before.fdatasyncs, rounds);
}

TEST_F(SegmentServerTest, GroupCommitRepliesShareSocketWrites) {
  // 8 writers share one client connection, as a mount's files do. The
  // replies of a group-commit round leave in one socket write, in order.
  StartServer();
  constexpr int kWriters = 8;
  constexpr int kAppendsPerWriter = 25;
  for (int w = 0; w < kWriters; ++w) ASSERT_TRUE(Create(200 + w, 1).ok());
  auto client = NewClient();
  SegmentServerCounters before = server_->counters();
  EXPECT_EQ(0, AppendConcurrently(200, std::vector<rpc::RpcClient*>(kWriters, client.get()),
                                  kAppendsPerWriter));
  SegmentServerCounters after = server_->counters();
  uint64_t responses = after.responses - before.responses;
  uint64_t writes = after.response_writes - before.response_writes;
  EXPECT_EQ(static_cast<uint64_t>(kWriters * kAppendsPerWriter), responses);
  EXPECT_LT(writes, responses) << "rounds " << after.sync_rounds - before.sync_rounds;
  // Every record is where its writer put it.
  for (int w = 0; w < kWriters; ++w) {
    auto data = Read(200 + w, 0, kAppendsPerWriter * 100);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(std::string(kAppendsPerWriter * 100, static_cast<char>('a' + w)), *data);
  }
}

TEST_F(SegmentServerTest, CallBatchWritesQueuedCallsInOrderOnlyAtFlush) {
  // A FileWriter queues an append's calls under its lock with a CallBatch
  // and writes them once it has released the lock. With no other caller on
  // the connection, queued calls do not leave before the flush; and they
  // leave in call order: the server refuses an append at any offset but
  // the end.
  StartServer();
  ASSERT_TRUE(Create(300, 1).ok());  // the connection is up and idle
  constexpr int kRecords = 40;
  std::vector<Pending> pending(kRecords);
  std::string expected;
  {
    rpc::CallBatch batch;
    for (int i = 0; i < kRecords; ++i) {
      std::string record(10, static_cast<char>('A' + i % 26));
      AppendAsync(300, expected.size(), record, i == kRecords - 1, &pending[i], &batch);
      expected += record;
    }
    // Nothing was written, so nothing can have been answered.
    for (const Pending& p : pending) EXPECT_FALSE(p.done.HasBeenNotified());
  }  // the batch's destructor writes them
  for (Pending& p : pending) {
    ASSERT_TRUE(p.done.WaitForNotificationWithTimeout(kWaitDeadline));
    ASSERT_TRUE(p.status.ok()) << p.status;
  }
  EXPECT_EQ(expected.size(), pending.back().response.durable_length());
  auto data = Read(300, 0, expected.size());
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(expected, *data);
}

TEST_F(SegmentServerTest, FlushHandsWhatTheSocketDoesNotTakeToTheIoThread) {
  // 32 MiB of batched appends fill the socket: the flushing thread writes
  // what it takes, the io thread the rest, still in order.
  StartServer();
  ASSERT_TRUE(Create(301, 1).ok());
  constexpr int kRecords = 32;
  constexpr size_t kRecordBytes = 1u << 20;
  std::vector<Pending> pending(kRecords);
  {
    rpc::CallBatch batch;
    for (int i = 0; i < kRecords; ++i) {
      std::string record(kRecordBytes, static_cast<char>('a' + i % 26));
      AppendAsync(301, i * kRecordBytes, record, i == kRecords - 1, &pending[i], &batch);
    }
  }
  for (Pending& p : pending) {
    ASSERT_TRUE(p.done.WaitForNotificationWithTimeout(kWaitDeadline));
    ASSERT_TRUE(p.status.ok()) << p.status;
  }
  EXPECT_EQ(kRecords * kRecordBytes, pending.back().response.durable_length());
  for (int i = 0; i < kRecords; i += 7) {
    auto data = Read(301, i * kRecordBytes, kRecordBytes);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(std::string(kRecordBytes, static_cast<char>('a' + i % 26)), *data);
  }
}

TEST_F(SegmentServerTest, BurstOfSyncedAppendsSharesOneRoundLedAfterTheLast) {
  // Synced appends that arrive in one read owe their round to the last
  // request of the read, whatever its type: one round covers them all.
  // With no sync-interval tick, a lost round would leave them unanswered.
  options_.sync_interval_ms = 600000;
  StartServer();
  ASSERT_TRUE(Create(302, 1).ok());
  constexpr int kRecords = 20;
  std::vector<Pending> pending(kRecords);
  absl::Notification info_done;
  SegmentServerCounters before = server_->counters();
  {
    rpc::CallBatch batch;  // one gathered write, so one read at the server
    for (int i = 0; i < kRecords; ++i) {
      AppendAsync(302, i * 10, std::string(10, 'x'), /*sync=*/true, &pending[i], &batch);
    }
    proto::SegmentInfoRequest info;
    info.set_segment_id(302);
    client_->AsyncCall(
        format::MessageType::kSegmentInfo, info, {}, kCallTimeout,
        [&](absl::Status, format::Frame) { info_done.Notify(); }, &batch);
  }
  for (Pending& p : pending) {
    ASSERT_TRUE(p.done.WaitForNotificationWithTimeout(kWaitDeadline));
    ASSERT_TRUE(p.status.ok()) << p.status;
    EXPECT_GE(p.response.durable_length(), 10u * kRecords);
  }
  ASSERT_TRUE(info_done.WaitForNotificationWithTimeout(kWaitDeadline));
  EXPECT_EQ(1u, server_->counters().sync_rounds - before.sync_rounds);
}

TEST_F(SegmentServerTest, RegistersHeartbeatsAndDeletesWhatMetaSays) {
  StartServer();
  auto registrations = meta_.registrations();
  ASSERT_EQ(1u, registrations.size());
  EXPECT_EQ(server_->bound_address(), registrations[0].address());
  EXPECT_EQ(0u, registrations[0].server_id());
  EXPECT_EQ(7u, server_->server_id());
  ASSERT_TRUE(PollUntil([&] { return meta_.heartbeats() >= 2; }));
  ASSERT_TRUE(Create(3, 1).ok());
  meta_.QueueDelete(3);
  ASSERT_TRUE(PollUntil([&] { return absl::IsNotFound(Info(3).status()); }));
}

TEST_F(SegmentServerTest, RestartKeepsServerIdAndData) {
  StartServer();
  ASSERT_TRUE(Create(1, 1).ok());
  ASSERT_TRUE(Append(1, 0, "persist me", true).ok());
  StopServer();
  StartServer();
  auto registrations = meta_.registrations();
  ASSERT_EQ(2u, registrations.size());
  EXPECT_EQ(7u, registrations[1].server_id());
  EXPECT_EQ("persist me", *Read(1, 0, 100));
  auto info = Info(1);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(10u, info->durable_length());
}

TEST_F(SegmentServerTest, StartFailsOnDataDirThatIsAFile) {
  options_.data_dir = dir_ + "/file";
  ASSERT_EQ(0, ::close(::creat(options_.data_dir.c_str(), 0644)));
  rpc::IoThreads io(1);
  auto server = SegmentServer::Start(options_, io.io());
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, server.status().code()) << server.status();
}

TEST_F(SegmentServerTest, StartFailsWhenAddressIsBusy) {
  options_.listen_address = meta_.address();
  rpc::IoThreads io(1);
  auto server = SegmentServer::Start(options_, io.io());
  EXPECT_EQ(absl::StatusCode::kUnavailable, server.status().code()) << server.status();
}

TEST_F(SegmentServerTest, StartFailsWhenMetaIsUnreachable) {
  // A port that was just free: bind, read it, close.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)));
  socklen_t len = sizeof(addr);
  ASSERT_EQ(0, ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len));
  ::close(fd);
  options_.meta_address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  options_.rpc_timeout_ms = 500;
  rpc::IoThreads io(1);
  auto server = SegmentServer::Start(options_, io.io());
  EXPECT_EQ(absl::StatusCode::kUnavailable, server.status().code()) << server.status();
}

}  // namespace
}  // namespace logfs::segd
