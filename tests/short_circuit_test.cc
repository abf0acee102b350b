// Short-circuit reads without a cluster: a real ReplicaStore in a temp
// dir, its ShortCircuitServer on a real Unix socket, and the client side
// (descriptor passing, CRC-checked reads, the replica cache).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "cache/replica_cache.h"
#include "cache/segment_reader.h"
#include "src/util/crc32c.h"
#include "store/format/logfs.pb.h"
#include "store/rpc/unix_socket.h"
#include "store/segd/replica_store.h"
#include "store/segd/short_circuit_server.h"

namespace logfs::cache {
namespace {

std::string Bytes(size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<char>(i * 131 + i / 977);
  return out;
}

class ShortCircuitTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/short_circuit_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
    ASSERT_EQ(0, ::chmod(dir_.c_str(), 0755));  // an unprivileged peer must reach the socket
    auto store = segd::ReplicaStore::Open(segd::ReplicaStoreOptions{dir_ + "/data", 1u << 20});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    auto server = segd::ShortCircuitServer::Start(socket_path(), store_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    server_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string socket_path() const { return dir_ + "/segd.sock"; }

  // A replica of `id` holding `data`, sealed unless `seal` is false.
  void MakeReplica(uint64_t id, const std::string& data, bool seal = true) {
    ASSERT_TRUE(store_->Create(id, 1).ok());
    ASSERT_TRUE(store_->Append(id, 1, 0, data, util::Crc32c(data.data(), data.size())).ok());
    if (seal) {
      ASSERT_TRUE(store_->Seal(id, 1, data.size()).ok());
    }
  }

  // Asks the server for `id` as SegmentReader does.
  absl::StatusOr<format::ReplicaFds> Open(uint64_t id) {
    auto socket = rpc::ConnectUnix(socket_path(), absl::Seconds(2));
    if (!socket.ok()) return socket.status();
    proto::ShortCircuitOpenRequest request;
    request.set_segment_id(id);
    absl::Status sent = rpc::SendUnixFrame(socket->get(), 0, format::MessageType::kShortCircuitOpen,
                                           9, request.SerializeAsString(), {});
    if (!sent.ok()) return sent;
    auto reply = rpc::ReceiveUnixFrame(socket->get(), absl::Now() + absl::Seconds(2));
    if (!reply.ok()) return reply.status();
    if (reply->frame.flags & format::kFlagError) {
      proto::ErrorResponse error;
      error.ParseFromString(reply->frame.message);
      return absl::Status(static_cast<absl::StatusCode>(error.code()), error.message());
    }
    EXPECT_EQ(9u, reply->frame.request_id);
    proto::ShortCircuitOpenResponse response;
    EXPECT_TRUE(response.ParseFromString(reply->frame.message));
    EXPECT_EQ(2u, reply->fds.size());
    format::ReplicaFds files;
    files.data = std::move(reply->fds[0]);
    files.crc = std::move(reply->fds[1]);
    files.length = response.length();
    return files;
  }

  std::string dir_;
  std::unique_ptr<segd::ReplicaStore> store_;
  std::unique_ptr<segd::ShortCircuitServer> server_;
};

TEST_F(ShortCircuitTest, SealedReplicaComesBackReadOnlyAndVerified) {
  const std::string data = Bytes(200000);  // 3 full CRC chunks and a partial one
  MakeReplica(5, data);
  auto files = Open(5);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(data.size(), files->length);
  EXPECT_EQ(1u, server_->opens());
  // Read-only: a write through the descriptor fails.
  EXPECT_EQ(-1, ::pwrite(files->data.get(), "x", 1, 0));
  EXPECT_EQ(EBADF, errno);
  // Whole, unaligned, and ending in the partial last chunk.
  EXPECT_EQ(data, *ReadVerifiedReplica(*files, 0, data.size()));
  EXPECT_EQ(data.substr(70000, 100), *ReadVerifiedReplica(*files, 70000, 100));
  EXPECT_EQ(data.substr(196000), *ReadVerifiedReplica(*files, 196000, 4000));
  EXPECT_EQ(absl::StatusCode::kOutOfRange, ReadVerifiedReplica(*files, 199999, 2).status().code());
}

TEST_F(ShortCircuitTest, DamagedReplicaFailsItsCrc) {
  const std::string data = Bytes(150000);
  MakeReplica(6, data);
  auto files = Open(6);
  ASSERT_TRUE(files.ok()) << files.status();
  // Flip one byte of chunk 1 on disk, as a bad sector would.
  int fd = ::open((dir_ + "/data/segments/6.seg").c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char flipped = static_cast<char>(data[70000] ^ 1);
  ASSERT_EQ(1, ::pwrite(fd, &flipped, 1, 70000));
  ::close(fd);
  EXPECT_EQ(data.substr(0, 1000), *ReadVerifiedReplica(*files, 0, 1000));  // chunk 0 is fine
  auto bad = ReadVerifiedReplica(*files, 69000, 2000);
  EXPECT_EQ(absl::StatusCode::kDataLoss, bad.status().code());
  EXPECT_NE(std::string::npos, bad.status().message().find("chunk 1")) << bad.status();
}

TEST_F(ShortCircuitTest, OnlySealedKnownReplicasAreHandedOut) {
  MakeReplica(7, "still growing", /*seal=*/false);
  EXPECT_EQ(absl::StatusCode::kFailedPrecondition, Open(7).status().code());
  EXPECT_EQ(absl::StatusCode::kNotFound, Open(8).status().code());
  EXPECT_EQ(0u, server_->opens());
}

TEST_F(ShortCircuitTest, GarbageClosesOnlyThatConnection) {
  MakeReplica(9, "sealed bytes");
  auto socket = rpc::ConnectUnix(socket_path(), absl::Seconds(2));
  ASSERT_TRUE(socket.ok()) << socket.status();
  const std::string garbage(100, 'G');
  ASSERT_EQ(static_cast<ssize_t>(garbage.size()),
            ::send(socket->get(), garbage.data(), garbage.size(), MSG_NOSIGNAL));
  char byte;
  const ssize_t got = ::recv(socket->get(), &byte, 1, 0);  // closed by the server
  EXPECT_TRUE(got == 0 || (got < 0 && errno == ECONNRESET)) << got;
  // A request of another type gets an error reply, not a crash.
  auto other = rpc::ConnectUnix(socket_path(), absl::Seconds(2));
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE(rpc::SendUnixFrame(other->get(), 0, format::MessageType::kRead, 1, "", {}).ok());
  auto reply = rpc::ReceiveUnixFrame(other->get(), absl::Now() + absl::Seconds(2));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(reply->frame.flags & format::kFlagError);
  // The server still serves.
  auto files = Open(9);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ("sealed bytes", *ReadVerifiedReplica(*files, 0, 12));
}

TEST_F(ShortCircuitTest, OtherUsersArePermissionDenied) {
  MakeReplica(10, "secret");
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    auto files = Open(10);
    _exit(files.status().code() == absl::StatusCode::kPermissionDenied ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(child, waitpid(child, &status, 0));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(0, WEXITSTATUS(status));
  EXPECT_EQ(0u, server_->opens());
}

// A uid listed in --short_circuit_uids (here nobody's) is served like
// root; the same peer was refused above without the listing.
TEST_F(ShortCircuitTest, ListedUidIsServed) {
  MakeReplica(12, "shared");
  server_.reset();
  auto server = segd::ShortCircuitServer::Start(socket_path(), store_.get(), {65534});
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    auto files = Open(12);
    _exit(files.ok() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(child, waitpid(child, &status, 0));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(0, WEXITSTATUS(status));
  EXPECT_EQ(1u, server_->opens());
}

TEST_F(ShortCircuitTest, SilentClientHoldsTheServerOnlyUntilItsDeadline) {
  MakeReplica(11, "bytes");
  server_.reset();  // again, with a short deadline per connection
  auto server =
      segd::ShortCircuitServer::Start(socket_path(), store_.get(), {}, absl::Milliseconds(200));
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = std::move(*server);
  auto silent = rpc::ConnectUnix(socket_path(), absl::Seconds(2));
  ASSERT_TRUE(silent.ok());
  ASSERT_EQ(1, ::send(silent->get(), "L", 1, MSG_NOSIGNAL));  // a header that never ends
  auto files = Open(11);  // served once the silent one's 200 ms are up
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(5u, files->length);
}

format::ReplicaFds DevNull(uint64_t length) {
  format::ReplicaFds files;
  files.data.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  files.length = length;
  return files;
}

TEST(ReplicaCacheTest, SharesReferencesAndEvictsByCountAndAge) {
  absl::Time now = absl::FromUnixSeconds(1000);
  ReplicaCacheOptions options;
  options.max_evictable = 2;
  options.max_idle = absl::Seconds(60);
  options.now = [&now] { return now; };
  ReplicaCache cache(options);
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({1, 1})));
  {
    ReplicaCache::Ref a = cache.Insert({1, 1}, DevNull(10));
    ReplicaCache::Ref b = cache.Lookup({1, 1});  // a hit: shares a's descriptors
    ASSERT_TRUE(static_cast<bool>(a) && static_cast<bool>(b));
    EXPECT_EQ(10u, b.files().length);
    EXPECT_EQ(a.files().data.get(), b.files().data.get());
    // A racing insert of the same key gets the first one.
    ReplicaCache::Ref c = cache.Insert({1, 1}, DevNull(99));
    EXPECT_EQ(10u, c.files().length);
    EXPECT_EQ(0u, cache.stats().evictable);  // referenced: not evictable
  }
  EXPECT_EQ(1u, cache.stats().evictable);
  EXPECT_EQ(1u, cache.stats().opens);
  // Three more released replicas: the oldest evictable ones go past 2.
  for (uint64_t id = 2; id <= 4; ++id) {
    now += absl::Seconds(1);
    cache.Insert({id, 1}, DevNull(id));
  }
  ReplicaCacheStats stats = cache.stats();
  EXPECT_EQ(2u, stats.evictable);
  EXPECT_EQ(2u, stats.evictions);
  EXPECT_EQ(2u, stats.open_replicas);
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({1, 1})));  // evicted first
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({2, 1})));
  EXPECT_TRUE(static_cast<bool>(cache.Lookup({4, 1})));
  // Age: everything released more than 60 s ago goes at the next trim,
  // but not what is referenced.
  ReplicaCache::Ref held = cache.Lookup({4, 1});
  now += absl::Seconds(61);
  cache.Trim();
  stats = cache.stats();
  EXPECT_EQ(1u, stats.open_replicas);
  EXPECT_EQ(0u, stats.evictable);
  EXPECT_EQ(4u, held.files().length);
}

TEST(ReplicaCacheTest, InvalidatedReplicaStaysValidForItsHoldersOnly) {
  ReplicaCache cache;
  ReplicaCache::Ref held = cache.Insert({1, 2}, DevNull(1));
  cache.Invalidate(held);
  cache.Invalidate(held);                                 // twice is harmless
  EXPECT_GE(fcntl(held.files().data.get(), F_GETFD), 0);  // still open for its holder
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({1, 2})));
  ReplicaCache::Ref fresh = cache.Insert({1, 2}, DevNull(2));
  EXPECT_EQ(2u, fresh.files().length);
  EXPECT_EQ(1u, held.files().length);
  EXPECT_EQ(1u, cache.stats().invalidations);
  EXPECT_EQ(1u, cache.stats().open_replicas);
}

}  // namespace
}  // namespace logfs::cache
