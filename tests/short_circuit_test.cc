// Short-circuit reads without a cluster: a real ReplicaStore in a temp
// dir, its ShortCircuitServer on a real Unix socket, and the client side
// (descriptor passing, CRC-checked reads, the replica cache).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

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
  EXPECT_EQ(2u, stats.evictions_by_count);
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

// The two eviction maps with real replica files (so mmap works): mapped
// replicas past the mmapped count, bytes or age are unmapped and wait in
// the descriptor map; past the total count or the descriptor age they
// close. A held reference keeps its mapping through all of it.
TEST_F(ShortCircuitTest, MappedReplicasAreUnmappedByCountBytesAndAgeThenClosed) {
  const std::string small = Bytes(100000), large = Bytes(200000);
  for (uint64_t id = 21; id <= 24; ++id) MakeReplica(id, id == 24 ? large : small);
  MakeReplica(25, small);
  absl::Time now = absl::FromUnixSeconds(1000);
  ReplicaCacheOptions options;
  options.max_evictable = 3;
  options.max_idle = absl::Seconds(60);
  options.max_evictable_mmapped = 2;
  options.max_evictable_mmapped_bytes = 250000;
  options.max_mmapped_idle = absl::Seconds(10);
  options.now = [&now] { return now; };
  ReplicaCache cache(options);
  // Opens `id`, maps it through the cache and checks the mapped bytes.
  auto map_and_release = [&](uint64_t id) {
    auto files = Open(id);
    ASSERT_TRUE(files.ok()) << files.status();
    ReplicaCache::Ref ref = cache.Insert({id, 1}, std::move(*files));
    EXPECT_TRUE(ref.mapped().empty());  // mapped on demand only
    const absl::string_view view = cache.Map(ref);
    EXPECT_EQ(id == 24 ? large : small, view);
    EXPECT_EQ(view.data(), ref.mapped().data());
    EXPECT_EQ(view.data(), cache.Map(ref).data());  // mapped once
  };
  ReplicaCache::Ref held;
  {
    auto files = Open(25);
    ASSERT_TRUE(files.ok()) << files.status();
    held = cache.Insert({25, 1}, std::move(*files));
    ASSERT_EQ(small, cache.Map(held));
  }
  map_and_release(21);
  map_and_release(22);
  ReplicaCacheStats stats = cache.stats();
  EXPECT_EQ(3u, stats.mmaps);
  EXPECT_EQ(3u, stats.mmapped);
  EXPECT_EQ(300000u, stats.mmapped_bytes);
  EXPECT_EQ(2u, stats.evictable_mmapped);
  // A third evictable mapping: 21, the oldest, is unmapped (count).
  now += absl::Seconds(1);
  map_and_release(23);
  stats = cache.stats();
  EXPECT_EQ(1u, stats.unmaps_by_count);
  EXPECT_EQ(2u, stats.evictable_mmapped);
  EXPECT_EQ(3u, stats.evictable);
  // 24 (200000 bytes): 22 goes by count, then 23 by bytes (23 + 24 would
  // map 300000 > 250000); four evictable replicas > 3: 21 closes.
  now += absl::Seconds(1);
  map_and_release(24);
  stats = cache.stats();
  EXPECT_EQ(2u, stats.unmaps_by_count);
  EXPECT_EQ(1u, stats.unmaps_by_bytes);
  EXPECT_EQ(1u, stats.evictions_by_count);
  EXPECT_EQ(1u, stats.evictable_mmapped);
  EXPECT_EQ(3u, stats.evictable);
  EXPECT_EQ(2u, stats.mmapped);  // 24 and the held 25
  EXPECT_EQ(300000u, stats.mmapped_bytes);
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({21, 1})));
  // A hit on an unmapped replica reads it with pread until it is mapped
  // again.
  {
    ReplicaCache::Ref again = cache.Lookup({22, 1});
    ASSERT_TRUE(static_cast<bool>(again));
    EXPECT_TRUE(again.mapped().empty());
    EXPECT_EQ(small.substr(5, 10), *ReadVerifiedReplica(again.files(), 5, 10));
    EXPECT_EQ(small.substr(70000, 30000), *ReadVerifiedMapped(cache.Map(again),
                                                              again.files().crc.get(), 70000,
                                                              30000));
  }
  // Released mapped again: 24 + 22 map 300000 bytes, so 24 is unmapped.
  stats = cache.stats();
  EXPECT_EQ(6u, stats.mmaps);
  EXPECT_EQ(2u, stats.unmaps_by_bytes);
  EXPECT_EQ(1u, stats.evictable_mmapped);
  // Age: 11 s on, the mapping waiting >= 10 s (22) goes; the replicas
  // stay open 60 s more, then close. The held one stays mapped and open.
  now += absl::Seconds(11);
  cache.Trim();
  stats = cache.stats();
  EXPECT_EQ(1u, stats.unmaps_by_age);
  EXPECT_EQ(0u, stats.evictable_mmapped);
  EXPECT_EQ(3u, stats.evictable);
  now += absl::Seconds(60);
  cache.Trim();
  stats = cache.stats();
  EXPECT_EQ(3u, stats.evictions_by_age);
  EXPECT_EQ(0u, stats.evictable);
  EXPECT_EQ(1u, stats.open_replicas);
  EXPECT_EQ(1u, stats.mmapped);
  EXPECT_EQ(small, held.mapped());
}

TEST_F(ShortCircuitTest, MappingCanBeTurnedOffAndFailsSoftly) {
  MakeReplica(31, "sealed bytes");
  ReplicaCacheOptions off;
  off.mmap = false;
  ReplicaCache no_mmap(off);
  auto files = Open(31);
  ASSERT_TRUE(files.ok()) << files.status();
  ReplicaCache::Ref ref = no_mmap.Insert({31, 1}, std::move(*files));
  EXPECT_TRUE(no_mmap.Map(ref).empty());
  EXPECT_EQ(0u, no_mmap.stats().mmaps);
  // /dev/null cannot be mapped: counted once, read with pread after.
  ReplicaCache cache;
  ReplicaCache::Ref null = cache.Insert({32, 1}, DevNull(10));
  EXPECT_TRUE(cache.Map(null).empty());
  EXPECT_TRUE(cache.Map(null).empty());
  EXPECT_EQ(1u, cache.stats().mmap_failures);
  EXPECT_EQ(0u, cache.stats().mmapped);
}

// 16 readers read replicas through one small cache (a trim at nearly every
// release: mappings come and go, descriptors close) while a writer deletes
// replicas and makes them again with new contents, as a server does when a
// replica moves away and back, and another thread trims. Each 8-byte record
// of a replica holds (segment id, generation, index), so a read that got
// bytes from a closed descriptor reused for another file, from an unmapped
// or remapped range, or from two generations at once would show it. A
// reader holding a replica its server deleted reads that replica's bytes,
// which its descriptor keeps (as HDFS's short-circuit readers do), while
// the trimmer drops deleted replicas from the cache under it.
TEST_F(ShortCircuitTest, SixteenReadersWhileReplicasAreTrimmedDeletedAndRecreated) {
  constexpr uint64_t kFirstId = 40, kIds = 6, kRecords = 25600;  // 200 KiB each
  auto contents = [](uint64_t id, uint64_t generation) {
    std::string out(kRecords * 8, '\0');
    for (uint64_t k = 0; k < kRecords; ++k) {
      const uint64_t record = id << 40 | generation << 20 | k;
      std::memcpy(&out[k * 8], &record, 8);
    }
    return out;
  };
  auto make = [&](uint64_t id, uint64_t generation) {
    const std::string data = contents(id, generation);
    return store_->Create(id, 1).ok() &&
           store_->Append(id, 1, 0, data, util::Crc32c(data.data(), data.size())).ok() &&
           store_->Seal(id, 1, data.size()).ok();
  };
  for (uint64_t id = kFirstId; id < kFirstId + kIds; ++id) ASSERT_TRUE(make(id, 0));
  ReplicaCacheOptions options;
  options.max_evictable = 2;
  options.max_evictable_mmapped = 1;
  options.max_evictable_mmapped_bytes = 300000;
  options.max_mmapped_idle = absl::Milliseconds(1);
  options.max_idle = absl::Milliseconds(3);
  ReplicaCache cache(options);

  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  std::atomic<bool> writer_done{false};
  std::atomic<uint64_t> reads{0}, mapped_reads{0}, bad_records{0}, failures{0},
      newer_generations{0};
  auto reader = [&](uint64_t seed) {
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    auto next = [&x] {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      return x;
    };
    for (int i = 0; i < 20000 && absl::Now() < deadline; ++i) {
      const uint64_t id = kFirstId + next() % kIds;
      ReplicaCache::Ref ref = cache.Lookup({id, 1});
      if (!ref) {
        auto files = Open(id);
        if (!files.ok()) continue;  // deleted, or not sealed yet: try another
        ref = cache.Insert({id, 1}, std::move(*files));
      }
      const uint64_t first = next() % kRecords;
      const uint64_t count = 1 + next() % std::min<uint64_t>(kRecords - first, 4096);
      absl::StatusOr<std::string> data;
      if (next() % 2 == 0 && !cache.Map(ref).empty()) {
        auto view = ReadVerifiedMapped(ref.mapped(), ref.files().crc.get(), first * 8, count * 8);
        if (view.ok()) data = std::string(*view); else data = view.status();
        mapped_reads.fetch_add(1);
      } else {
        data = ReadVerifiedReplica(ref.files(), first * 8, count * 8);
      }
      if (!data.ok()) {
        failures.fetch_add(1);
        ADD_FAILURE() << "segment " << id << ": " << data.status();
        continue;
      }
      reads.fetch_add(1);
      uint64_t generation = 0;
      for (uint64_t k = 0; k < count; ++k) {
        uint64_t record;
        std::memcpy(&record, data->data() + k * 8, 8);
        if (k == 0) generation = record >> 20 & 0xfffff;
        if (record != (id << 40 | generation << 20 | (first + k))) {
          bad_records.fetch_add(1);
          break;
        }
      }
      if (generation > 0) newer_generations.fetch_add(1);
      if (next() % 64 == 0) cache.Invalidate(ref);  // as a failed read does
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) threads.emplace_back(reader, t + 1);
  std::thread trimmer([&] {
    while (!writer_done.load() && absl::Now() < deadline) {
      cache.DropDeleted();  // as SegmentReader::Trim: deleted replicas leave first
      cache.Trim();
    }
  });
  uint64_t recreated = 0;
  for (uint64_t generation = 1; generation < 200 && absl::Now() < deadline; ++generation) {
    const uint64_t id = kFirstId + generation % kIds;
    ASSERT_TRUE(store_->Delete(id).ok());
    ASSERT_TRUE(make(id, generation));
    ++recreated;
  }
  writer_done.store(true);
  for (auto& t : threads) t.join();
  trimmer.join();

  EXPECT_EQ(0u, bad_records.load());
  EXPECT_EQ(0u, failures.load());
  EXPECT_GT(reads.load(), 1000u);
  EXPECT_GT(mapped_reads.load(), 100u);
  EXPECT_GT(recreated, 5u);
  EXPECT_GT(newer_generations.load(), 0u);  // replicas made again were read
  const ReplicaCacheStats stats = cache.stats();
  EXPECT_GT(stats.mmaps, 0u);
  EXPECT_GT(stats.unmaps_by_count + stats.unmaps_by_bytes + stats.unmaps_by_age, 0u);
  EXPECT_GT(stats.evictions(), 0u);
  EXPECT_GT(stats.invalidations, 0u);
  EXPECT_LE(stats.evictable, options.max_evictable);
}

}  // namespace
}  // namespace logfs::cache
