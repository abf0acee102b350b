#include "src/util/progress_meter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_split.h"

namespace logfs::util {
namespace {

// What a meter wrote to an in-memory FILE.
class Captured {
 public:
  Captured() : file_(open_memstream(&buf_, &size_)) {}
  ~Captured() {
    if (file_ != nullptr) std::fclose(file_);
    std::free(buf_);
  }
  FILE* file() { return file_; }
  std::string text() {
    std::fflush(file_);
    return std::string(buf_, size_);
  }

 private:
  char* buf_ = nullptr;
  size_t size_ = 0;
  FILE* file_;
};

TEST(ProgressMeterTest, FormatsLineAndEta) {
  ProgressMeterOptions options;
  options.label = "fsck";
  options.unit = "segments";
  EXPECT_EQ("fsck: checked 25/100 segments (25%), ETA 30s",
            ProgressMeter::FormatLine(options, 25, 100, absl::Seconds(10)));
  EXPECT_EQ("fsck: checked 0/100 segments (0%), ETA ?",
            ProgressMeter::FormatLine(options, 0, 100, absl::Seconds(3)));
  EXPECT_EQ("fsck: checked 0/0 segments (100%), ETA 0s",
            ProgressMeter::FormatLine(options, 0, 0, absl::Seconds(3)));
  EXPECT_EQ("3m07s", ProgressMeter::FormatEta(absl::Seconds(187)));
  EXPECT_EQ("2h05m", ProgressMeter::FormatEta(absl::Minutes(125)));
}

TEST(ProgressMeterTest, TtyRewritesOneLineRateLimited) {
  // Goal: on a terminal, one '\r' line at most every tty_interval, padded
  // over a longer earlier line, ended by Finish with the final count and a
  // newline. Method: a fake clock; 1000 updates within 1 s.
  absl::Time now = absl::UnixEpoch();
  Captured out;
  ProgressMeterOptions options;
  options.label = "fsck";
  options.unit = "segments";
  options.tty = true;
  ProgressMeter meter(out.file(), options, [&] { return now; });
  for (int i = 1; i <= 1000; ++i) {
    now += absl::Milliseconds(1);
    meter.Update(i, 1000);
  }
  meter.Finish();
  const std::string text = out.text();
  std::vector<std::string> updates = absl::StrSplit(text.substr(1), '\r');
  // At t=1ms (the first), then every 200 ms: 5 + the final one.
  EXPECT_EQ(6u, updates.size()) << text;
  EXPECT_EQ(0, text.find("\rfsck: checked 1/1000 segments (0%), ETA ")) << text;
  EXPECT_EQ("fsck: checked 1000/1000 segments (100%), ETA 0s\n", updates.back());
  EXPECT_EQ(1, std::count(text.begin(), text.end(), '\n'));
}

TEST(ProgressMeterTest, PlainLinesEveryStepOrInterval) {
  // Goal: not a terminal: a line per 10% (not per item), one when 5 s pass
  // without one, and the final line once.
  absl::Time now = absl::UnixEpoch();
  Captured out;
  ProgressMeterOptions options;
  options.label = "fsck";
  options.unit = "segments";
  ProgressMeter meter(out.file(), options, [&] { return now; });
  for (int i = 1; i <= 100; ++i) meter.Update(i, 100);
  now += absl::Seconds(6);
  meter.Update(100, 200);  // the total grew: 50%, under the next step
  meter.Finish();
  meter.Finish();
  const std::string text = out.text();
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(11u, lines.size()) << text;
  EXPECT_EQ("fsck: checked 10/100 segments (10%), ETA 0s", lines[0]);
  EXPECT_EQ("fsck: checked 100/100 segments (100%), ETA 0s", lines[9]);
  EXPECT_EQ("fsck: checked 100/200 segments (50%), ETA 6s", lines[10]);
  EXPECT_EQ(std::string::npos, text.find('\r'));
}

TEST(ProgressMeterTest, FinishWithoutUpdateWritesNothing) {
  // A scan that failed before it knew its total shows no "0/0" line.
  Captured out;
  ProgressMeterOptions options;
  options.tty = true;
  ProgressMeter meter(out.file(), options);
  meter.Finish();
  EXPECT_EQ("", out.text());
}

}  // namespace
}  // namespace logfs::util
