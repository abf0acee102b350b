// ReplicaCache::DropDeleted (issue 44): a cached replica whose data file
// its server unlinked leaves the cache at the next pass, closed and
// unmapped at once if no read holds it, else at its last release; a
// replica whose .crc was renamed over (a reopen) stays. Real files in a
// temp dir stand in for replica files, so st_nlink, mmap and
// /proc/self/{fd,maps} behave as in a mount.
#include "cache/replica_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace logfs::cache {
namespace {

class ReplicaCacheDeletionTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/replica_cache_test.XXXXXX";
    ASSERT_NE(nullptr, ::mkdtemp(tmpl));
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string PathOf(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `bytes` to <dir>/<name>.
  void WriteFile(const std::string& name, const std::string& bytes) {
    std::ofstream out(PathOf(name), std::ios::binary | std::ios::trunc);
    out << bytes;
    ASSERT_TRUE(out.good());
  }

  // Makes replica `id`'s files (<id>.seg holding `bytes`, an empty <id>.crc)
  // and opens them read-only, as a segment server hands them out.
  format::ReplicaFds MakeReplica(uint64_t id, const std::string& bytes) {
    const std::string name = std::to_string(id);
    WriteFile(name + ".seg", bytes);
    WriteFile(name + ".crc", "");
    format::ReplicaFds files;
    files.data.Reset(::open(PathOf(name + ".seg").c_str(), O_RDONLY | O_CLOEXEC));
    files.crc.Reset(::open(PathOf(name + ".crc").c_str(), O_RDONLY | O_CLOEXEC));
    EXPECT_TRUE(files.data.valid() && files.crc.valid());
    files.length = bytes.size();
    return files;
  }

  // How many of this process's descriptors name <dir>/<name>, deleted or not.
  int DescriptorsOf(const std::string& name) const {
    const std::string target = PathOf(name);
    int count = 0;
    for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
      std::error_code error;
      const std::string link = std::filesystem::read_symlink(fd.path(), error).string();
      if (!error && (link == target || link == target + " (deleted)")) ++count;
    }
    return count;
  }

  // Whether /proc/self/maps lists a mapping of <dir>/<name>.
  bool IsMapped(const std::string& name) const {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find(PathOf(name)) != std::string::npos) return true;
    }
    return false;
  }

  std::string dir_;
};

TEST_F(ReplicaCacheDeletionTest, DeletedReplicaIsClosedAtOnceOrAtItsLastRelease) {
  // Goal: what a segment server deletes stops taking space on its disk as
  // soon as no read holds it, whatever the eviction limits. Method: three
  // mapped replicas in a cache whose limits never evict; 1 unreferenced
  // and 2 held are deleted, 3's .crc is replaced as a reopen does; each
  // pass and release is checked against the process's descriptors and
  // mappings.
  absl::Time now = absl::FromUnixSeconds(1000);  // the clock never moves: no age eviction
  ReplicaCacheOptions options;
  options.max_evictable = 100;
  options.max_evictable_mmapped = 100;
  options.now = [&now] { return now; };
  ReplicaCache cache(options);
  const std::string bytes(10000, 'r');
  // (a) Three cached, mapped replicas; 2 stays referenced.
  for (uint64_t id : {uint64_t{1}, uint64_t{3}}) {
    ReplicaCache::Ref ref = cache.Insert({id, 7}, MakeReplica(id, bytes));
    ASSERT_EQ(bytes, cache.Map(ref));
  }
  ReplicaCache::Ref held = cache.Insert({2, 7}, MakeReplica(2, bytes));
  ASSERT_EQ(bytes, cache.Map(held));
  EXPECT_EQ(0u, cache.DropDeleted());  // nothing deleted yet
  ReplicaCacheStats stats = cache.stats();
  EXPECT_EQ(3u, stats.open_replicas);
  EXPECT_EQ(2u, stats.evictable);
  EXPECT_EQ(3u, stats.mmapped);

  // (b) The server deletes 1 and 2 (data file first, as ReplicaStore
  // does; the .crc too) and reopens 3 (a copy renamed over its .crc).
  for (const char* id : {"1", "2"}) {
    ASSERT_EQ(0, ::unlink(PathOf(std::string(id) + ".seg").c_str()));
    ASSERT_EQ(0, ::unlink(PathOf(std::string(id) + ".crc").c_str()));
  }
  WriteFile("3.crc.tmp", "");
  ASSERT_EQ(0, ::rename(PathOf("3.crc.tmp").c_str(), PathOf("3.crc").c_str()));
  EXPECT_EQ(1, DescriptorsOf("1.seg"));  // held by the cache: the space is still taken
  EXPECT_TRUE(IsMapped("1.seg"));

  // (c) One pass: 1 is closed and unmapped now; 2 leaves the cache but
  // stays readable for its holder; 3 stays.
  EXPECT_EQ(2u, cache.DropDeleted());
  EXPECT_EQ(0, DescriptorsOf("1.seg"));
  EXPECT_EQ(0, DescriptorsOf("1.crc"));
  EXPECT_FALSE(IsMapped("1.seg"));
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({1, 7})));
  EXPECT_FALSE(static_cast<bool>(cache.Lookup({2, 7})));
  EXPECT_TRUE(static_cast<bool>(cache.Lookup({3, 7})));
  EXPECT_EQ(1, DescriptorsOf("2.seg"));
  EXPECT_EQ(bytes, held.mapped());
  char byte = 0;
  EXPECT_EQ(1, ::pread(held.files().data.get(), &byte, 1, 9999));
  stats = cache.stats();
  EXPECT_EQ(2u, stats.deletions);
  EXPECT_EQ(1u, stats.open_replicas);
  EXPECT_EQ(1u, stats.evictable);
  EXPECT_EQ(1u, stats.mmapped);  // 3's; 2's mapping is its holder's now
  EXPECT_EQ(0u, cache.DropDeleted());  // 2 is not counted twice

  // (d) The last release of 2 closes and unmaps it.
  held = ReplicaCache::Ref();
  EXPECT_EQ(0, DescriptorsOf("2.seg"));
  EXPECT_EQ(0, DescriptorsOf("2.crc"));
  EXPECT_FALSE(IsMapped("2.seg"));
  EXPECT_EQ(1, DescriptorsOf("3.seg"));
  EXPECT_TRUE(IsMapped("3.seg"));
  EXPECT_EQ(2u, cache.stats().deletions);
}

TEST_F(ReplicaCacheDeletionTest, AReplicaMadeAgainUnderItsKeyIsOpenedAfresh) {
  // Goal: a replica deleted and made again with other bytes (a copy
  // back to the same server) is not served from the deleted one's
  // descriptors once a pass has run. Method: cache, replace the file,
  // pass, miss, insert the new one and read it.
  ReplicaCache cache(ReplicaCacheOptions{});
  { ReplicaCache::Ref ref = cache.Insert({5, 1}, MakeReplica(5, "old bytes")); }
  ASSERT_EQ(0, ::unlink(PathOf("5.seg").c_str()));
  format::ReplicaFds fresh = MakeReplica(5, "new bytes");
  EXPECT_EQ(1u, cache.DropDeleted());
  ASSERT_FALSE(static_cast<bool>(cache.Lookup({5, 1})));
  ReplicaCache::Ref ref = cache.Insert({5, 1}, std::move(fresh));
  EXPECT_EQ("new bytes", cache.Map(ref));
  EXPECT_EQ(0u, cache.DropDeleted());
  EXPECT_EQ(1, DescriptorsOf("5.seg"));
}

}  // namespace
}  // namespace logfs::cache
