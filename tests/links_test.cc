// Hard links on real mounts of a real cluster (issue 44; docs/POSIX.md
// "Hard links"): link(2) of every non-directory, st_nlink and st_ino as
// ext4 shows them, unlink and rename of linked names, a file linked while
// it is written, what a second mount sees at once (coherence), links kept
// across a remount, and RocksDB's checkpoint and move-ingestion by stock
// ldb on the mount, which link SSTs instead of failing (EPERM before) or
// copying them. Also open(O_CREAT) without O_EXCL racing on two mounts:
// never EEXIST.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "tests/mounted_cluster.h"
#include "tests/segd_stats.h"

namespace logfs::testing {
namespace {

struct stat Stat(const std::string& path) {
  struct stat st;
  std::memset(&st, 0, sizeof(st));
  EXPECT_EQ(0, ::lstat(path.c_str(), &st)) << path << ": " << strerror(errno);
  return st;
}

int LinkErrno(const std::string& from, const std::string& to) {
  return ::link(from.c_str(), to.c_str()) == 0 ? 0 : errno;
}

using LinksTest = SharedClusterTest<2>;

TEST_F(LinksTest, ALinkIsOneInodeUnderTwoNamesOnEveryMount) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("l1").c_str(), 0755));
  ASSERT_EQ(0, ::mkdir(c.Path("l1/sub").c_str(), 0755));
  const std::string data = Pattern(300000, 1);
  ASSERT_TRUE(WriteFile(c.Path("l1/a"), data).ok());
  // Mount 1 looks both names up first: it caches "a" and that "sub/b" is
  // missing, both of which the link changes.
  EXPECT_EQ(1u, Stat(c.Path("l1/a", 1)).st_nlink);
  struct stat missing;
  EXPECT_NE(0, ::stat(c.Path("l1/sub/b", 1).c_str(), &missing));

  ASSERT_EQ(0, LinkErrno(c.Path("l1/a"), c.Path("l1/sub/b")));
  const struct stat a = Stat(c.Path("l1/a"));
  const struct stat b = Stat(c.Path("l1/sub/b"));
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(2u, a.st_nlink);
  EXPECT_EQ(2u, b.st_nlink);
  EXPECT_EQ(data.size(), static_cast<size_t>(b.st_size));
  EXPECT_EQ(data, *ReadFile(c.Path("l1/sub/b")));
  // The other mount sees the new name and the new count at once.
  const struct stat other = Stat(c.Path("l1/sub/b", 1));
  EXPECT_EQ(a.st_ino, other.st_ino);
  EXPECT_EQ(2u, other.st_nlink);
  EXPECT_EQ(2u, Stat(c.Path("l1/a", 1)).st_nlink);
  EXPECT_EQ(data, *ReadFile(c.Path("l1/sub/b", 1)));
  // `ls -i` shows one inode number for both names.
  CommandResult ls = RunCommand("ls -i " + c.Path("l1/a") + " " + c.Path("l1/sub/b"));
  ASSERT_EQ(0, ls.exit_code) << ls.output;
  EXPECT_EQ(2u, static_cast<size_t>(std::count(ls.output.begin(), ls.output.end(), '\n')));
  EXPECT_NE(std::string::npos, ls.output.find(absl::StrCat(a.st_ino, " ", c.Path("l1/a"))));
  EXPECT_NE(std::string::npos, ls.output.find(absl::StrCat(a.st_ino, " ", c.Path("l1/sub/b"))));

  // A sealed block file stays immutable under any name.
  const int fd = ::open(c.Path("l1/sub/b").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_EQ(-1, ::write(fd, "x", 1));
  EXPECT_EQ(EPERM, errno);
  ::close(fd);

  // Unlinking one name keeps the other, and the bytes, on both mounts.
  ASSERT_EQ(0, ::unlink(c.Path("l1/a").c_str()));
  EXPECT_EQ(1u, Stat(c.Path("l1/sub/b")).st_nlink);
  EXPECT_EQ(1u, Stat(c.Path("l1/sub/b", 1)).st_nlink);
  EXPECT_NE(0, ::access(c.Path("l1/a", 1).c_str(), F_OK));
  EXPECT_EQ(data, *ReadFile(c.Path("l1/sub/b", 1)));

  // Links survive the mounts going away and coming back.
  ASSERT_EQ(0, LinkErrno(c.Path("l1/sub/b"), c.Path("l1/c")));
  ASSERT_TRUE(c.Remount().ok());
  EXPECT_EQ(2u, Stat(c.Path("l1/c")).st_nlink);
  EXPECT_EQ(Stat(c.Path("l1/c")).st_ino, Stat(c.Path("l1/sub/b")).st_ino);
  EXPECT_EQ(data, *ReadFile(c.Path("l1/c")));
}

TEST_F(LinksTest, LinkFailsAsLinkTwoSays) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("l2").c_str(), 0755));
  ASSERT_EQ(0, ::mkdir(c.Path("l2/dir").c_str(), 0755));
  ASSERT_TRUE(WriteFile(c.Path("l2/f"), "f").ok());
  ASSERT_TRUE(WriteFile(c.Path("l2/g"), "g").ok());
  EXPECT_EQ(EPERM, LinkErrno(c.Path("l2/dir"), c.Path("l2/dirlink")));
  EXPECT_EQ(EEXIST, LinkErrno(c.Path("l2/f"), c.Path("l2/g")));
  EXPECT_EQ(ENOENT, LinkErrno(c.Path("l2/none"), c.Path("l2/x")));
  EXPECT_EQ(ENOENT, LinkErrno(c.Path("l2/f"), c.Path("l2/nodir/x")));
  EXPECT_EQ(1u, Stat(c.Path("l2/f")).st_nlink);
}

TEST_F(LinksTest, SymlinksFifosAndSocketsLinkToo) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("l3").c_str(), 0755));
  ASSERT_EQ(0, ::symlink("target", c.Path("l3/s").c_str()));
  ASSERT_EQ(0, ::mkfifo(c.Path("l3/p").c_str(), 0644));
  ASSERT_EQ(0, ::mknod(c.Path("l3/k").c_str(), S_IFSOCK | 0644, 0));
  for (const char* name : {"s", "p", "k"}) {
    const std::string from = c.Path(absl::StrCat("l3/", name));
    const std::string to = c.Path(absl::StrCat("l3/", name, "2"));
    ASSERT_EQ(0, LinkErrno(from, to)) << name;
    EXPECT_EQ(2u, Stat(to).st_nlink) << name;
    EXPECT_EQ(Stat(from).st_ino, Stat(to).st_ino) << name;
    EXPECT_EQ(Stat(from).st_mode, Stat(to).st_mode) << name;
  }
  char target[16] = {};
  EXPECT_EQ(6, ::readlink(c.Path("l3/s2").c_str(), target, sizeof(target)));
  EXPECT_STREQ("target", target);
}

TEST_F(LinksTest, RenameOverALinkedNameDropsOneLink) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("l4").c_str(), 0755));
  ASSERT_TRUE(WriteFile(c.Path("l4/x"), "x").ok());
  ASSERT_TRUE(WriteFile(c.Path("l4/y"), "y").ok());
  ASSERT_EQ(0, LinkErrno(c.Path("l4/y"), c.Path("l4/y2")));
  // Two names of one inode: rename(2) does nothing and succeeds.
  ASSERT_EQ(0, ::rename(c.Path("l4/y").c_str(), c.Path("l4/y2").c_str()));
  EXPECT_EQ(2u, Stat(c.Path("l4/y")).st_nlink);
  // Another file over one of them.
  ASSERT_EQ(0, ::rename(c.Path("l4/x").c_str(), c.Path("l4/y2").c_str()));
  EXPECT_EQ("x", *ReadFile(c.Path("l4/y2")));
  EXPECT_EQ("y", *ReadFile(c.Path("l4/y")));
  EXPECT_EQ(1u, Stat(c.Path("l4/y")).st_nlink);
  EXPECT_EQ(1u, Stat(c.Path("l4/y", 1)).st_nlink);
  EXPECT_EQ("x", *ReadFile(c.Path("l4/y2", 1)));
}

TEST_F(LinksTest, AFileBeingWrittenMayBeLinkedAndKeepsItsOneWriter) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("l5").c_str(), 0755));
  ASSERT_EQ(0, ::setxattr(c.Path("l5").c_str(), "user.logfs.kind", "wal", 3, 0));
  const int fd = ::open(c.Path("l5/w").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(6, ::write(fd, "first\n", 6));
  ASSERT_EQ(0, ::fsync(fd));
  ASSERT_EQ(0, LinkErrno(c.Path("l5/w"), c.Path("l5/w2")));
  ASSERT_EQ(7, ::write(fd, "second\n", 7));
  ASSERT_EQ(0, ::fsync(fd));
  // One inode, one lease: the other name is not a second writer.
  const int other = ::open(c.Path("l5/w2", 1).c_str(), O_WRONLY | O_APPEND);
  EXPECT_EQ(-1, other);
  EXPECT_EQ(EBUSY, errno);
  if (other >= 0) ::close(other);
  EXPECT_EQ("first\nsecond\n", *ReadFile(c.Path("l5/w2", 1)));
  EXPECT_EQ(2u, Stat(c.Path("l5/w2")).st_nlink);
  ASSERT_EQ(0, ::close(fd));
  EXPECT_EQ("first\nsecond\n", *ReadFile(c.Path("l5/w2")));
}

// `logfs clone SRC DST` (docs/OPERATIONS.md "Clones"): a second file that
// lists the first's sealed segments, made by meta alone: no append on any
// segment server, the same bytes on every mount; removing one keeps the
// other's data, and the replicas go only with the last file.
TEST_F(LinksTest, LogfsCloneCopiesASealedFileWithoutWritingAByte) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("cl").c_str(), 0755));
  const std::string data = Pattern(6 << 20, 9);
  ASSERT_TRUE(WriteFile(c.Path("cl/src"), data).ok());
  const std::vector<SegmentLine> segments = Segments(c.Path("cl/src"));
  ASSERT_FALSE(segments.empty());
  SegdStats segds(c);
  const uint64_t appends_before = segds.TotalAppends();
  CommandResult clone = RunCommand(
      absl::StrCat(LogfsBinary(), " clone ", c.Path("cl/src"), " ", c.Path("cl/dst"), " 2>&1"));
  ASSERT_EQ(0, clone.exit_code) << clone.output;
  EXPECT_EQ(appends_before, segds.TotalAppends()) << "a clone wrote to the segment servers";
  EXPECT_NE(Stat(c.Path("cl/src")).st_ino, Stat(c.Path("cl/dst")).st_ino);
  EXPECT_EQ(1u, Stat(c.Path("cl/dst")).st_nlink);
  EXPECT_EQ(data, *ReadFile(c.Path("cl/dst", 1)));
  ASSERT_EQ(segments.size(), Segments(c.Path("cl/dst")).size());
  EXPECT_EQ(segments[0].id, Segments(c.Path("cl/dst"))[0].id);
  // A name that exists, a directory, a missing file: refused, exit 2 / 1.
  CommandResult exists = RunCommand(
      absl::StrCat(LogfsBinary(), " clone ", c.Path("cl/src"), " ", c.Path("cl/dst"), " 2>&1"));
  EXPECT_EQ(2, exists.exit_code) << exists.output;
  CommandResult dir = RunCommand(
      absl::StrCat(LogfsBinary(), " clone ", c.Path("cl"), " ", c.Path("cl/x"), " 2>&1"));
  EXPECT_EQ(1, dir.exit_code) << dir.output;

  // The source goes: the clone keeps every byte.
  ASSERT_EQ(0, ::unlink(c.Path("cl/src").c_str()));
  DropKernelCaches();
  EXPECT_EQ(data, *ReadFile(c.Path("cl/dst")));
  // The clone goes too: the replicas are deleted on their servers.
  ASSERT_EQ(0, ::unlink(c.Path("cl/dst").c_str()));
  auto replica_files = [&] {
    int found = 0;
    for (int i = 0; i < c.cluster().segment_servers(); ++i) {
      for (const SegmentLine& segment : segments) {
        struct stat st;
        const std::string file =
            absl::StrCat(c.root(), "/data/segd", i, "/segments/", segment.id, ".seg");
        if (::stat(file.c_str(), &st) == 0) ++found;
      }
    }
    return found;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (replica_files() > 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(0, replica_files()) << "replicas of a file no one lists any more are kept";
}

// A file written in sealed segments of `pieces`' sizes: a close(2) of a
// dup of the descriptor (FUSE flush) seals the segment written so far,
// and the next write starts another.
void WriteInSegments(const std::string& path, const std::string& data,
                     const std::vector<size_t>& pieces) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << path << ": " << strerror(errno);
  size_t at = 0;
  for (size_t piece : pieces) {
    ASSERT_EQ(static_cast<ssize_t>(piece), ::write(fd, data.data() + at, piece));
    at += piece;
    ASSERT_EQ(0, ::close(::dup(fd)));
  }
  ASSERT_EQ(data.size(), at);
  ASSERT_EQ(0, ::close(fd));
}

// copy_file_range(2) of [off_in, off_in + len) of `from` into `to_fd` at
// its offset, looping over short counts as cp does; the bytes copied.
ssize_t CopyFileRange(const std::string& from, int to_fd, off_t off_in, size_t len) {
  const int in = ::open(from.c_str(), O_RDONLY);
  if (in < 0) return -1;
  size_t done = 0;
  while (done < len) {
    const ssize_t n = ::copy_file_range(in, &off_in, to_fd, nullptr, len - done, 0);
    if (n < 0) {
      ::close(in);
      return -1;
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(in);
  return static_cast<ssize_t>(done);
}

std::vector<std::string> SegmentIds(const std::string& path) {
  std::vector<std::string> ids;
  for (const SegmentLine& segment : Segments(path)) ids.push_back(segment.id);
  return ids;
}

// copy_file_range(2), and `cp`, of a sealed file into a new one on the
// mount (issue 44): the copy lists the source's sealed segments (meta's
// CopyRange), no segment server appends a byte, every mount reads the
// same bytes, a write after the copy goes on after them, and the copy
// keeps its bytes when the source goes.
TEST_F(LinksTest, CopyFileRangeOfSealedSegmentsAppendsThemWithoutWritingAByte) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("cr").c_str(), 0755));
  const std::vector<size_t> pieces = {1 << 20, 2 << 20, 123457};
  const std::string data = Pattern(pieces[0] + pieces[1] + pieces[2], 11);
  WriteInSegments(c.Path("cr/src"), data, pieces);
  const std::vector<std::string> ids = SegmentIds(c.Path("cr/src"));
  ASSERT_EQ(3u, ids.size());
  SegdStats segds(c);
  const uint64_t appends_before = segds.TotalAppends();

  // `cp` (coreutils 9 uses copy_file_range).
  CommandResult cp = RunCommand("cp " + c.Path("cr/src") + " " + c.Path("cr/cp") + " 2>&1");
  ASSERT_EQ(0, cp.exit_code) << cp.output;
  EXPECT_EQ(appends_before, segds.TotalAppends()) << "cp wrote to the segment servers";
  EXPECT_EQ(ids, SegmentIds(c.Path("cr/cp")));
  EXPECT_EQ(data, *ReadFile(c.Path("cr/cp", 1)));

  // copy_file_range(2) itself, then a write after the copied bytes.
  const int fd = ::open(c.Path("cr/dst").c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_EQ(static_cast<ssize_t>(data.size()),
            CopyFileRange(c.Path("cr/src"), fd, 0, data.size()));
  EXPECT_EQ(appends_before, segds.TotalAppends()) << "a copy wrote to the segment servers";
  const std::string tail = Pattern(70000, 12);
  ASSERT_EQ(static_cast<ssize_t>(tail.size()), ::write(fd, tail.data(), tail.size()));
  ASSERT_EQ(0, ::close(fd));
  EXPECT_EQ(data + tail, *ReadFile(c.Path("cr/dst")));
  EXPECT_EQ(data + tail, *ReadFile(c.Path("cr/dst", 1)));
  const std::vector<std::string> dst_ids = SegmentIds(c.Path("cr/dst"));
  ASSERT_EQ(4u, dst_ids.size());
  EXPECT_EQ(ids, std::vector<std::string>(dst_ids.begin(), dst_ids.begin() + 3));

  // The source goes: both copies keep every byte.
  ASSERT_EQ(0, ::unlink(c.Path("cr/src").c_str()));
  DropKernelCaches();
  EXPECT_EQ(data + tail, *ReadFile(c.Path("cr/dst")));
  EXPECT_EQ(data, *ReadFile(c.Path("cr/cp", 1)));
}

// What is not whole sealed segments at the destination's end is copied as
// bytes (the kernel's own copy after logfs answers EOPNOTSUPP), and right.
TEST_F(LinksTest, CopyFileRangeOfPartialSegmentsCopiesBytes) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("cp").c_str(), 0755));
  const std::vector<size_t> pieces = {1 << 20, 1 << 20};
  const std::string data = Pattern(2 << 20, 13);
  WriteInSegments(c.Path("cp/src"), data, pieces);
  ASSERT_EQ(2u, Segments(c.Path("cp/src")).size());

  // Inside a segment.
  int fd = ::open(c.Path("cp/mid").c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  EXPECT_EQ(5000, CopyFileRange(c.Path("cp/src"), fd, 1000, 5000));
  ASSERT_EQ(0, ::close(fd));
  EXPECT_EQ(data.substr(1000, 5000), *ReadFile(c.Path("cp/mid")));

  // The first segment and part of the second: the segment by reference
  // (a short count), the rest as bytes.
  fd = ::open(c.Path("cp/head").c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  const size_t head = (1 << 20) + 4096;
  EXPECT_EQ(static_cast<ssize_t>(head), CopyFileRange(c.Path("cp/src"), fd, 0, head));
  ASSERT_EQ(0, ::close(fd));
  EXPECT_EQ(data.substr(0, head), *ReadFile(c.Path("cp/head", 1)));
  const std::vector<SegmentLine> segments = Segments(c.Path("cp/head"));
  ASSERT_EQ(2u, segments.size());
  EXPECT_EQ(Segments(c.Path("cp/src"))[0].id, segments[0].id);

  // Bytes written first: the destination's open segment takes bytes.
  fd = ::open(c.Path("cp/after").c_str(), O_CREAT | O_WRONLY | O_EXCL, 0644);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(3, ::write(fd, "abc", 3));
  EXPECT_EQ(static_cast<ssize_t>(data.size()), CopyFileRange(c.Path("cp/src"), fd, 0, data.size()));
  ASSERT_EQ(0, ::close(fd));
  EXPECT_EQ("abc" + data, *ReadFile(c.Path("cp/after")));
}

// Two mounts open one new name with O_CREAT|O_WRONLY (no O_EXCL) at once,
// as `>> log` on two hosts does: one creates it; the other opens what the
// first created (or gets EBUSY while the first writes it), never EEXIST,
// which only O_EXCL may give. Before the fix: EEXIST in 150 of 150 races.
TEST_F(LinksTest, CreateWithoutExclusiveNeverFailsWithEexist) {
  MountedCluster& c = *cluster_;
  ASSERT_EQ(0, ::mkdir(c.Path("race").c_str(), 0755));
  constexpr int kRaces = 150;
  std::map<int, int> errors;  // errno -> count, over both mounts
  int opened = 0;
  for (int race = 0; race < kRaces; ++race) {
    const std::string name = absl::StrCat("race/f", race);
    std::atomic<int> ready{0};
    int result[2] = {0, 0};
    std::vector<std::thread> threads;
    for (int m = 0; m < 2; ++m) {
      threads.emplace_back([&, m] {
        const std::string path = c.Path(name, m);
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
        result[m] = fd >= 0 ? 0 : errno;
        if (fd >= 0) {
          (void)!::write(fd, "x", 1);
          ::close(fd);
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int m = 0; m < 2; ++m) {
      if (result[m] == 0) {
        ++opened;
      } else {
        ++errors[result[m]];
      }
    }
  }
  EXPECT_EQ(0, errors[EEXIST]) << "EEXIST from an open without O_EXCL";
  for (const auto& [error, count] : errors) {
    EXPECT_TRUE(error == EBUSY || error == EEXIST) << count << " opens failed: " << strerror(error);
  }
  EXPECT_GE(opened, kRaces);
  // O_EXCL still refuses an existing name.
  EXPECT_EQ(-1, ::open(c.Path("race/f0", 1).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644));
  EXPECT_EQ(EEXIST, errno);
}

// RocksDB on the mount (the posix FileSystem, through FUSE): stock ldb's
// checkpoint links every SST (it failed with EPERM before links) and
// writes only the small files RocksDB always writes anew (MANIFEST,
// CURRENT, OPTIONS); ingest_extern_sst --move_files links the SST in.
TEST_F(LinksTest, StockLdbCheckpointAndMoveIngestionLinkOnTheMount) {
  MountedCluster& c = *cluster_;
  constexpr int kSsts = 20;
  constexpr int kKeysPerSst = 200;
  const std::string db_path = c.Path("ckdb");
  {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.disable_auto_compactions = true;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(options, db_path, &raw);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::unique_ptr<rocksdb::DB> db(raw);
    for (int sst = 0; sst < kSsts; ++sst) {
      for (int k = 0; k < kKeysPerSst; ++k) {
        ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), absl::StrCat("key", sst, "_", k),
                            Pattern(500, sst * kKeysPerSst + k))
                        .ok());
      }
      ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
    }
  }
  std::vector<std::string> ssts;
  for (const auto& entry : std::filesystem::directory_iterator(db_path)) {
    if (absl::EndsWith(entry.path().string(), ".sst")) ssts.push_back(entry.path().filename());
  }
  ASSERT_EQ(static_cast<size_t>(kSsts), ssts.size());

  SegdStats segds(c);
  const uint64_t appends_before = segds.TotalAppends();
  const std::string ckpt = c.Path("ckdb_checkpoint");
  CommandResult checkpoint = RunCommand(absl::StrCat(
      "timeout -s KILL 120 ldb --db=", db_path, " checkpoint --checkpoint_dir=", ckpt, " 2>&1"));
  ASSERT_EQ(0, checkpoint.exit_code) << checkpoint.output;
  const uint64_t appends = segds.TotalAppends() - appends_before;
  for (const std::string& sst : ssts) {
    const struct stat original = Stat(db_path + "/" + sst);
    const struct stat linked = Stat(ckpt + "/" + sst);
    EXPECT_EQ(original.st_ino, linked.st_ino) << sst << " was copied, not linked";
    EXPECT_EQ(2u, original.st_nlink) << sst;
  }
  // Copying would append every SST to 3 replicas (>= 60 appends); the
  // checkpoint writes a MANIFEST, CURRENT and OPTIONS file only.
  EXPECT_LT(appends, static_cast<uint64_t>(kSsts)) << appends << " appends for a checkpoint";
  CommandResult scan = RunCommand(
      absl::StrCat("timeout -s KILL 120 ldb --db=", ckpt, " --try_load_options --hex scan 2>&1 | wc -l"));
  ASSERT_EQ(0, scan.exit_code) << scan.output;
  EXPECT_EQ(absl::StrCat(kSsts * kKeysPerSst, "\n"), scan.output);

  // An external SST made by ldb, moved (linked, then unlinked) into
  // another DB: the same inode, now under the DB's name.
  const std::string ext = c.Path("ckdb_ext.sst");
  // write_extern_sst takes "key ==> value" lines, in key order, on stdin.
  CommandResult write = RunCommand(absl::StrCat(
      "for i in $(seq 1000 1099); do echo \"ext$i ==> w$i\"; done | timeout -s KILL 120 ldb --db=",
      ckpt, " --try_load_options write_extern_sst ", ext, " 2>&1"));
  ASSERT_EQ(0, write.exit_code) << write.output;
  const ino_t ext_ino = Stat(ext).st_ino;
  const std::string dst = c.Path("ckdb_ingest");
  CommandResult create = RunCommand(absl::StrCat("timeout -s KILL 120 ldb --db=", dst,
                                                 " --create_if_missing put k v 2>&1"));
  ASSERT_EQ(0, create.exit_code) << create.output;
  CommandResult ingest = RunCommand(absl::StrCat("timeout -s KILL 120 ldb --db=", dst,
                                                 " ingest_extern_sst ", ext, " --move_files 2>&1"));
  ASSERT_EQ(0, ingest.exit_code) << ingest.output;
  bool found = false;
  for (const auto& entry : std::filesystem::directory_iterator(dst)) {
    if (absl::EndsWith(entry.path().string(), ".sst") && Stat(entry.path()).st_ino == ext_ino) {
      found = true;
    }
  }
  EXPECT_TRUE(found) << "the ingested SST is not the external file's inode: it was copied";
  CommandResult count = RunCommand(
      absl::StrCat("timeout -s KILL 120 ldb --db=", dst, " --try_load_options --hex scan 2>&1 | wc -l"));
  EXPECT_EQ(absl::StrCat(100 + 1, "\n"), count.output);
}

}  // namespace
}  // namespace logfs::testing
