// A progress line for long admin scans (`logfs fsck`): "LABEL: checked
// N/M UNIT (P%), ETA 1m05s". On a terminal it is one line rewritten in
// place with '\r' (at most one update per `tty_interval`, as rsync's and
// curl's meters do); otherwise (a pipe, a log file) a plain line whenever
// another `plain_percent_step` percent is done or `plain_interval` passed,
// so logs get a few lines, not a line per item. The ETA is the elapsed
// time scaled by what is left (a constant rate since the start).
//
// Thread-safety: not thread-safe; one thread calls Update and Finish.
// Errors: writes to `out` are not checked (progress is best effort).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace logfs::util {

struct ProgressMeterOptions {
  std::string label = "progress";  // "fsck"
  std::string verb = "checked";
  std::string unit = "items";  // "segments"
  bool tty = false;            // rewrite one line with '\r'
  absl::Duration tty_interval = absl::Milliseconds(200);
  absl::Duration plain_interval = absl::Seconds(5);
  int plain_percent_step = 10;  // 1..100
};

class ProgressMeter {
 public:
  // Writes to `out` (borrowed; stderr in the tools), which must outlive
  // this object. `now` is the clock (tests pass a fake one).
  ProgressMeter(
      FILE* out, ProgressMeterOptions options,
      std::function<absl::Time()> now = [] { return absl::Now(); });

  // `done` of `total` items (done <= total; total may grow). Writes a
  // line only when due (see above).
  void Update(uint64_t done, uint64_t total);
  // Writes the last state once (ending the '\r' line with '\n' on a
  // terminal) unless it was the last written; nothing when Update was
  // never called (the scan failed before it knew its total). Idempotent;
  // Update after it writes nothing.
  void Finish();

  // "LABEL: checked N/M UNIT (P%), ETA X" for the state given; no newline.
  // Pure; thread-safe.
  static std::string FormatLine(const ProgressMeterOptions& options, uint64_t done, uint64_t total,
                                absl::Duration elapsed);
  // "0s", "42s", "3m07s", "2h05m"; "?" when unknown (negative).
  static std::string FormatEta(absl::Duration eta);

 private:
  void Write(absl::Time now);

  FILE* const out_;
  const ProgressMeterOptions options_;
  const std::function<absl::Time()> now_;
  const absl::Time start_;
  uint64_t done_ = 0;
  uint64_t total_ = 0;
  bool written_current_ = false;  // the last state given has been written
  bool finished_ = false;
  bool updated_ = false;
  bool wrote_any_ = false;
  absl::Time last_write_ = absl::InfinitePast();
  int last_percent_step_ = 0;  // plain mode: steps of plain_percent_step written
  size_t last_length_ = 0;     // tty mode: to blank the rest of a shorter line
};

}  // namespace logfs::util
