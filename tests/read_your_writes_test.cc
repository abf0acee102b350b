// Regression tests: reads and stat on the mount that writes a file. Before
// the fix a read there stopped at the durable length, so a read right after
// write()s came back short (19 times in 20), a copy-truncate rotation lost
// lines whose write() had returned, and fstat of a block file being
// written said 0. Now the writing mount sees every byte whose write()
// returned: stat counts them, and a read of them waits until they are
// durable. Other mounts still see only durable bytes (DESIGN §2).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

class ReadYourWritesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto mc = MountedCluster::Start({});
    ASSERT_TRUE(mc.ok()) << mc.status();
    cluster_ = mc->release();
    MakeWalDir(*cluster_);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(nullptr, cluster_); }
  std::string P(const std::string& rel) { return cluster_->Path(rel); }

  static MountedCluster* cluster_;
};
MountedCluster* ReadYourWritesTest::cluster_ = nullptr;

// Everything a fresh descriptor reads, as cp(1) does.
std::string ReadAll(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return "<open failed>";
  std::string out;
  char buf[1 << 16];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  close(fd);
  return out;
}

TEST_F(ReadYourWritesTest, AReadAfterWritesReturnsEveryWrittenByte) {
  // 20 rounds of 100 unsynced writes, each followed at once by a read of
  // the whole file from another descriptor, and fstat of the writer's.
  int fd = open(P("wal/app.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  std::string expected;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 100; ++i) {
      std::string line = absl::StrCat("round ", round, " line ", i, "\n");
      ASSERT_EQ(static_cast<ssize_t>(line.size()), write(fd, line.data(), line.size()));
      expected += line;
    }
    struct stat st;
    ASSERT_EQ(0, fstat(fd, &st));
    EXPECT_EQ(static_cast<off_t>(expected.size()), st.st_size) << "round " << round;
    EXPECT_EQ(expected.size(), ReadAll(P("wal/app.log")).size()) << "round " << round;
  }
  EXPECT_TRUE(expected == ReadAll(P("wal/app.log")));
  ASSERT_EQ(0, close(fd));
}

TEST_F(ReadYourWritesTest, FstatOfABlockFileBeingWrittenCountsTheWrittenBytes) {
  // 3000 bytes stay in the writer's buffer (appends are 1 MiB): before the
  // fix fstat said 0 and a read returned nothing.
  int fd = open(P("block.sst").c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  const std::string data = Pattern(3000, 7);
  ASSERT_EQ(3000, write(fd, data.data(), data.size()));
  struct stat st;
  ASSERT_EQ(0, fstat(fd, &st));
  EXPECT_EQ(3000, st.st_size);
  ASSERT_EQ(0, stat(P("block.sst").c_str(), &st));
  EXPECT_EQ(3000, st.st_size);
  EXPECT_TRUE(data == ReadAll(P("block.sst")));
  ASSERT_EQ(0, close(fd));
  EXPECT_TRUE(data == ReadAll(P("block.sst")));
}

TEST_F(ReadYourWritesTest, CopyTruncateRotationKeepsEveryLineWrittenBeforeTheCopy) {
  // A writer appends numbered lines without fsync; 100 times, the rotation
  // notes the last line whose write() returned, copies the file (as cp
  // does) and empties it (truncate -s 0). Each copy must hold consecutive
  // lines up to at least that one; only lines written between the copy and
  // the truncate may be lost.
  const std::string log = P("wal/rotated.log");
  int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0);
  std::atomic<int64_t> last_returned{-1};
  std::atomic<bool> stop{false};
  std::atomic<int> write_errors{0};
  std::thread writer([&] {
    for (int64_t n = 0; !stop.load() && n < 10000000; ++n) {
      std::string line = absl::StrCat(n, "\n");
      if (write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
        ++write_errors;
        return;
      }
      last_returned = n;
      // A busy logger, not a tight loop: a reader that must wait for each
      // sync round at the tail (up to a millisecond) would chase a writer
      // as fast as itself for as long as it writes, as cp would on ext4.
      if (n % 10 == 9) usleep(1000);
    }
  });
  int64_t at_truncate = -1;  // the last line whose write() had returned then
  for (int rotation = 0; rotation < 100; ++rotation) {
    while (last_returned.load() <= at_truncate + 10 && write_errors.load() == 0) {
      std::this_thread::yield();  // wait for the writer to get ahead
    }
    const int64_t must_have = last_returned.load();
    const std::string copy = ReadAll(log);
    ASSERT_EQ(0, truncate(log.c_str(), 0)) << strerror(errno);
    at_truncate = last_returned.load();
    std::vector<std::string> lines = absl::StrSplit(copy, '\n', absl::SkipEmpty());
    ASSERT_FALSE(lines.empty()) << "rotation " << rotation;
    int64_t first = -1, prev = -1;
    for (const auto& l : lines) {
      int64_t n;
      ASSERT_TRUE(absl::SimpleAtoi(l, &n)) << "rotation " << rotation << ": '" << l << "'";
      if (first < 0) first = n;
      if (prev >= 0) {
        ASSERT_EQ(prev + 1, n) << "rotation " << rotation << ": a gap";
      }
      prev = n;
    }
    EXPECT_GE(prev, must_have) << "rotation " << rotation << ": the copy ends at line " << prev
                               << " but line " << must_have << " had been written";
  }
  stop = true;
  writer.join();
  EXPECT_EQ(0, write_errors.load());
  EXPECT_EQ(0, close(fd));
}

}  // namespace
}  // namespace logfs::testing
