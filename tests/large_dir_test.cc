// Regression test for issue 11 item 4: a directory whose listing does not
// fit in one RPC frame. Meta used to send the whole listing in one
// ReaddirResponse; past kMaxMessageBytes (4 MiB) the mount dropped the
// frame ("oversized frame message") and `ls`, `find` and `rm -rf` failed
// with EIO. Readdir now pages (docs/rpc.md "Readdir").
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

// 16 500 names of 255 bytes: about 4.5 MB of directory entries, over the
// old 4 MiB frame limit, and 9 readdir pages (store/format/limits.h).
constexpr int kEntries = 16500;
constexpr size_t kNameBytes = 255;
constexpr int kCreatorThreads = 16;

std::string Name(int i) {
  std::string name = absl::StrFormat("%08d-", i);
  name.resize(kNameBytes, 'n');
  return name;
}

// Every name readdir(3) returns, with how often it came.
std::map<std::string, int> ReadAll(DIR* d) {
  std::map<std::string, int> seen;
  errno = 0;
  while (dirent* e = readdir(d)) ++seen[e->d_name];
  EXPECT_EQ(0, errno) << "readdir";
  return seen;
}

// Goal: ls, ls -f, find, readdir(3) and rm -rf work on a directory larger
// than one frame. Method: (a) create kEntries files with mknod from many
// threads; (b) count them with ls, ls -f and find; (c) readdir in C++
// sees every name exactly once; rewinddir starts over; a seekdir back to
// a telldir position resumes there; (d) rm -rf removes the directory.
TEST(LargeDirTest, ListAndRemoveDirectoryLargerThanOneFrame) {
  auto mc = MountedCluster::Start({});
  ASSERT_TRUE(mc.ok()) << mc.status();
  const std::string dir = (*mc)->Path("big");
  ASSERT_EQ(0, mkdir(dir.c_str(), 0755));

  // (a)
  std::atomic<int> next{0};
  std::atomic<int> failures{0};
  std::atomic<int> last_errno{0};
  std::vector<std::thread> creators;
  for (int t = 0; t < kCreatorThreads; ++t) {
    creators.emplace_back([&] {
      for (int i = next++; i < kEntries; i = next++) {
        if (mknod(absl::StrCat(dir, "/", Name(i)).c_str(), S_IFREG | 0644, 0) != 0) {
          last_errno = errno;
          ++failures;
        }
      }
    });
  }
  for (auto& t : creators) t.join();
  ASSERT_EQ(0, failures.load()) << "mknod: " << strerror(last_errno.load());

  // (b)
  auto ls = RunCommand(absl::StrCat("ls ", dir, " | wc -l"));
  EXPECT_EQ(0, ls.exit_code) << ls.output;
  EXPECT_EQ(absl::StrCat(kEntries, "\n"), ls.output);
  auto ls_f = RunCommand(absl::StrCat("ls -f ", dir, " | wc -l"));
  EXPECT_EQ(0, ls_f.exit_code) << ls_f.output;
  EXPECT_EQ(absl::StrCat(kEntries + 2, "\n"), ls_f.output);  // with . and ..
  auto find = RunCommand(absl::StrCat("find ", dir, " | wc -l"));
  EXPECT_EQ(0, find.exit_code) << find.output;
  EXPECT_EQ(absl::StrCat(kEntries + 1, "\n"), find.output);  // with the directory

  // (c)
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(nullptr, d) << strerror(errno);
  std::map<std::string, int> seen = ReadAll(d);
  EXPECT_EQ(static_cast<size_t>(kEntries + 2), seen.size());
  EXPECT_EQ(1, seen["."]);
  EXPECT_EQ(1, seen[".."]);
  int missing_or_repeated = 0;
  for (int i = 0; i < kEntries; ++i) missing_or_repeated += seen[Name(i)] == 1 ? 0 : 1;
  EXPECT_EQ(0, missing_or_repeated);
  rewinddir(d);
  EXPECT_EQ(seen, ReadAll(d));
  rewinddir(d);
  for (int i = 0; i < kEntries / 2; ++i) ASSERT_NE(nullptr, readdir(d)) << i;
  const long middle = telldir(d);
  dirent* at_middle = readdir(d);
  ASSERT_NE(nullptr, at_middle);
  const std::string middle_name = at_middle->d_name;
  for (int i = 0; i < kEntries / 4; ++i) ASSERT_NE(nullptr, readdir(d)) << i;
  seekdir(d, middle);
  at_middle = readdir(d);
  ASSERT_NE(nullptr, at_middle);
  EXPECT_EQ(middle_name, at_middle->d_name);
  closedir(d);

  // (d)
  auto rm = RunCommand(absl::StrCat("rm -rf ", dir));
  EXPECT_EQ(0, rm.exit_code) << rm.output;
  struct stat st;
  EXPECT_EQ(-1, stat(dir.c_str(), &st));
  EXPECT_EQ(ENOENT, errno);
}

}  // namespace
}  // namespace logfs::testing
