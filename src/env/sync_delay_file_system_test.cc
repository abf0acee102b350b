#include "src/env/sync_delay_file_system.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "src/status/posix_error.h"

namespace logfs::env {
namespace {

TEST(ParseSyncDelayTest, TakesARangeOrOneValueInMs) {
  auto range = ParseSyncDelay("20-50");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(absl::Milliseconds(20), range->min);
  EXPECT_EQ(absl::Milliseconds(50), range->max);
  auto one = ParseSyncDelay("30");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(absl::Milliseconds(30), one->min);
  EXPECT_EQ(absl::Milliseconds(30), one->max);
  for (const char* bad : {"", "x", "50-20", "20-", "-20", "1-2-3"}) {
    EXPECT_EQ(EINVAL, AttachedErrno(ParseSyncDelay(bad).status())) << bad;
  }
}

TEST(SyncDelayFileSystemTest, SyncsWaitWithinTheRangeOnlyWhileTheSwitchExists) {
  // Goal: every Sync of a file it opens waits at least the range's
  // minimum while the switch file exists, and the other calls pass
  // through. (That it does not wait without the switch is not timed.)
  std::string tmpl = ::testing::TempDir() + "logfs-sync-delay-XXXXXX";
  ASSERT_NE(nullptr, mkdtemp(tmpl.data()));
  const std::string dir = tmpl;
  const std::string on = dir + "/slow";
  SyncDelayFileSystem fs(FileSystem::Default(),
                         SyncDelay{absl::Milliseconds(30), absl::Milliseconds(40), on});
  WritableFileOptions options;
  options.create = true;
  auto file = fs.NewWritableFile(dir + "/f", options);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE((*file)->WriteAt(0, "abc").ok());
  // (a) Switched off: it syncs (how fast is the disk's business).
  ASSERT_TRUE((*file)->Sync().ok());
  // (b) Switched on: at least 30 ms.
  std::ofstream(on).put('1');
  const absl::Time start = absl::Now();
  ASSERT_TRUE((*file)->Sync().ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  // (c) Everything else passes through.
  char buf[3];
  auto n = (*file)->ReadAt(0, 3, buf);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ("abc", std::string(buf, *n));
  ASSERT_TRUE((*file)->Close().ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace logfs::env
