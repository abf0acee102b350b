// End-to-end checksums through a real mount (DESIGN §4 "Checksums", §5
// "Remote reads"): a replica whose bytes change on disk is never served,
// the read moves to another replica, and meta drops the bad one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

std::string Pattern(size_t n) { return testing::Pattern(n, 1); }

bool Lists(const SegmentLine& segment, const std::string& address) {
  return std::find(segment.replicas.begin(), segment.replicas.end(), address) !=
         segment.replicas.end();
}

void FlipByte(const std::string& path, off_t offset) {
  int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  char byte = 0;
  ASSERT_EQ(1, ::pread(fd, &byte, 1, offset));
  byte = static_cast<char>(byte ^ 0x01);
  ASSERT_EQ(1, ::pwrite(fd, &byte, 1, offset));
  ::close(fd);
}

TEST(ChecksumTest, CorruptReplicaIsSkippedAndDroppedFromMeta) {
  // Goal: a flipped byte in one replica on disk costs the reader nothing
  // and the file loses that replica. Method: (a) write a block file (three
  // replicas, one segment); (b) flip one byte in the replica listed first,
  // the one reads try first; (c) remount, so the page cache cannot answer;
  // (d) the read returns exactly the original bytes; (e) meta's list stops
  // naming the corrupt replica (the report is asynchronous: poll).
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string path = (*mc)->Path("block.bin");
  const std::string data = Pattern(300 << 10);
  ASSERT_TRUE(WriteFile(path, data).ok());

  std::vector<SegmentLine> segments = Segments(path);
  ASSERT_EQ(1u, segments.size());
  ASSERT_EQ(3u, segments[0].replicas.size());
  const std::string bad_address = segments[0].replicas[0];
  int bad_index = -1;
  for (int i = 0; i < (*mc)->cluster().segment_servers(); ++i) {
    if ((*mc)->cluster().segd_address(i) == bad_address) bad_index = i;
  }
  ASSERT_GE(bad_index, 0) << bad_address;
  const std::string replica_file = absl::StrCat((*mc)->root(), "/data/segd", bad_index,
                                                "/segments/", segments[0].id, ".seg");
  FlipByte(replica_file, 200 << 10);

  ASSERT_TRUE((*mc)->Remount().ok());
  auto read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == data) << "read back " << read->size() << " bytes that differ";
  // The mount read the local replica itself first (short-circuit), found
  // the bad CRC and went over TCP, where the server found it too.
  EXPECT_GE(MountStats(path)["short_circuit_failures"], 1u);

  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    segments = Segments(path);
    if (segments.size() == 1 && !Lists(segments[0], bad_address)) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(1u, segments.size());
  EXPECT_FALSE(Lists(segments[0], bad_address)) << "meta still lists " << bad_address;
  EXPECT_EQ(2u, segments[0].replicas.size());
  // The remaining replicas still serve the whole file.
  ASSERT_TRUE((*mc)->Remount().ok());
  read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == data);
  // (f) re-replication restores three good replicas: fsck goes back to 0.
  const std::string fsck =
      absl::StrCat(LogfsBinary(), " fsck --meta=", (*mc)->cluster().meta_address());
  CommandResult last;
  const absl::Time fsck_deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < fsck_deadline) {
    last = RunCommand(fsck);
    if (last.exit_code == 0) break;
    absl::SleepFor(absl::Milliseconds(100));  // poll: re-replication runs in passes
  }
  EXPECT_EQ(0, last.exit_code) << last.output;
  segments = Segments(path);
  ASSERT_EQ(1u, segments.size());
  EXPECT_EQ(3u, segments[0].replicas.size());
  ASSERT_TRUE((*mc)->Remount().ok());
  read = ReadFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(*read == data);
}

}  // namespace
}  // namespace logfs::testing
