#include "src/util/progress_meter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace logfs::util {

ProgressMeter::ProgressMeter(FILE* out, ProgressMeterOptions options,
                             std::function<absl::Time()> now)
    : out_(out), options_(std::move(options)), now_(std::move(now)), start_(now_()) {
  // A terminal shows the first state at once; a log starts with the first
  // step or interval.
  if (!options_.tty) last_write_ = start_;
}

std::string ProgressMeter::FormatEta(absl::Duration eta) {
  if (eta < absl::ZeroDuration()) return "?";
  const int64_t s = absl::ToInt64Seconds(eta + absl::Milliseconds(500));
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
}

std::string ProgressMeter::FormatLine(const ProgressMeterOptions& options, uint64_t done,
                                      uint64_t total, absl::Duration elapsed) {
  const int percent =
      total == 0 ? 100 : static_cast<int>(std::min<uint64_t>(done, total) * 100 / total);
  absl::Duration eta = absl::InfiniteDuration();
  if (done >= total) {
    eta = absl::ZeroDuration();
  } else if (done > 0) {
    eta = elapsed * (static_cast<double>(total - done) / static_cast<double>(done));
  } else {
    eta = absl::Seconds(-1);  // no rate yet
  }
  return absl::StrFormat("%s: %s %d/%d %s (%d%%), ETA %s", options.label, options.verb, done, total,
                         options.unit, percent, FormatEta(eta));
}

void ProgressMeter::Update(uint64_t done, uint64_t total) {
  if (finished_) return;
  updated_ = true;
  if (done != done_ || total != total_) written_current_ = false;
  done_ = done;
  total_ = total;
  if (written_current_) return;
  const absl::Time now = now_();
  if (options_.tty) {
    if (now - last_write_ >= options_.tty_interval) Write(now);
    return;
  }
  const int step = std::clamp(options_.plain_percent_step, 1, 100);
  const int percent_steps =
      total == 0 ? 0 : static_cast<int>(std::min(done, total) * 100 / total) / step;
  if (percent_steps > last_percent_step_ || now - last_write_ >= options_.plain_interval) {
    Write(now);
  }
}

void ProgressMeter::Finish() {
  if (finished_) return;
  if (updated_ && !written_current_) Write(now_());
  if (options_.tty && wrote_any_) std::fputc('\n', out_);
  std::fflush(out_);
  finished_ = true;
}

void ProgressMeter::Write(absl::Time now) {
  std::string line = FormatLine(options_, done_, total_, now - start_);
  if (options_.tty) {
    const size_t length = line.size();
    // Blank what a longer earlier line left behind.
    if (length < last_length_) line.append(last_length_ - length, ' ');
    last_length_ = length;
    std::fputc('\r', out_);
    std::fputs(line.c_str(), out_);
  } else {
    std::fputs(line.c_str(), out_);
    std::fputc('\n', out_);
    const int step = std::clamp(options_.plain_percent_step, 1, 100);
    last_percent_step_ =
        total_ == 0 ? 0 : static_cast<int>(std::min(done_, total_) * 100 / total_) / step;
  }
  std::fflush(out_);
  last_write_ = now;
  written_current_ = true;
  wrote_any_ = true;
}

}  // namespace logfs::util
