// Regression test: replacing a file by rename (`echo x > tmp && mv tmp
// CURRENT`, as RocksDB's CURRENT and every config writer do) while other
// processes open the name. The name always exists, so every open must
// succeed and read the old or the new content, on the renaming mount and
// on another mount. Before the fix about 2% of the opens failed with
// ENOENT: the kernel held a dentry for the replaced inode and opened that
// inode, which meta no longer had; now meta answers ESTALE for it, and the
// VFS looks the name up again.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/mounted_cluster.h"

namespace logfs::testing {
namespace {

constexpr absl::Duration kLoopTime = absl::Seconds(4);

class RenameOverTest : public SharedClusterTest<2> {
 protected:

  struct Outcome {
    int renames = 0;
    int opens = 0;
    std::map<int, int> errors;  // errno -> count
    int bad_contents = 0;
    std::string last_bad;
  };

  // Renames over `dir`/CURRENT on mount 0 for kLoopTime while a reader on
  // mount `reader_mount` opens and reads it in a loop.
  static Outcome RunLoop(const std::string& dir, int reader_mount) {
    const std::string w = cluster_->Path(dir, 0);
    const std::string r = cluster_->Path(dir, reader_mount);
    EXPECT_EQ(0, mkdir(w.c_str(), 0755));
    EXPECT_TRUE(WriteFile(w + "/CURRENT", "v0\n").ok());
    Outcome out;
    std::atomic<bool> stop{false};
    std::thread writer([&] {
      for (int n = 1; !stop.load() && n < 100000; ++n) {
        std::string tmp = w + "/tmp";
        if (!WriteFile(tmp, absl::StrCat("v", n, "\n")).ok()) break;
        if (rename(tmp.c_str(), (w + "/CURRENT").c_str()) != 0) break;
        out.renames = n;
      }
    });
    const absl::Time end = absl::Now() + kLoopTime;
    const std::string name = r + "/CURRENT";
    while (absl::Now() < end) {
      ++out.opens;
      int fd = open(name.c_str(), O_RDONLY);
      if (fd < 0) {
        ++out.errors[errno];
        continue;
      }
      char buf[64];
      ssize_t n = read(fd, buf, sizeof(buf));
      close(fd);
      std::string got(buf, n > 0 ? n : 0);
      // Either content: "v<number>\n", never empty or torn.
      bool good = got.size() >= 3 && got[0] == 'v' && got.back() == '\n' &&
                  got.find_first_not_of("0123456789", 1) == got.size() - 1;
      if (!good) {
        ++out.bad_contents;
        out.last_bad = got;
      }
    }
    stop = true;
    writer.join();
    return out;
  }

};

std::string Errors(const std::map<int, int>& errors) {
  std::string out;
  for (const auto& [err, count] : errors) absl::StrAppend(&out, strerror(err), " x", count, "; ");
  return out;
}

TEST_F(RenameOverTest, ReadersOnTheRenamingMountAlwaysOpenTheOldOrTheNewFile) {
  Outcome out = RunLoop("same", 0);
  EXPECT_GT(out.renames, 20);
  EXPECT_GT(out.opens, 100);
  EXPECT_TRUE(out.errors.empty()) << Errors(out.errors) << "of " << out.opens << " opens, "
                                  << out.renames << " renames";
  EXPECT_EQ(0, out.bad_contents) << "last: '" << out.last_bad << "'";
}

TEST_F(RenameOverTest, ReadersOnAnotherMountAlwaysOpenTheOldOrTheNewFile) {
  Outcome out = RunLoop("other", 1);
  EXPECT_GT(out.renames, 20);
  EXPECT_GT(out.opens, 100);
  EXPECT_TRUE(out.errors.empty()) << Errors(out.errors) << "of " << out.opens << " opens, "
                                  << out.renames << " renames";
  EXPECT_EQ(0, out.bad_contents) << "last: '" << out.last_bad << "'";
}

}  // namespace
}  // namespace logfs::testing
