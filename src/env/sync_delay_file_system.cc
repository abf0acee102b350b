#include "src/env/sync_delay_file_system.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "src/status/posix_error.h"

namespace logfs::env {
namespace {

// Delays the two calls that sync; forwards the rest.
class SyncDelayFile : public WritableFileWrapper {
 public:
  SyncDelayFile(std::unique_ptr<WritableFile> target, SyncDelayFileSystem* fs)
      : WritableFileWrapper(std::move(target)), fs_(fs) {}

  absl::Status WriteAtDurably(uint64_t offset, absl::string_view data) override {
    fs_->Delay();
    return target()->WriteAtDurably(offset, data);
  }
  absl::Status Sync() override {
    fs_->Delay();
    return target()->Sync();
  }

 private:
  SyncDelayFileSystem* const fs_;
};

}  // namespace

absl::StatusOr<SyncDelay> ParseSyncDelay(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '-');
  uint32_t min = 0;
  uint32_t max = 0;
  if (parts.size() > 2 || !absl::SimpleAtoi(parts.front(), &min) ||
      !absl::SimpleAtoi(parts.back(), &max) || max < min) {
    return PosixError(EINVAL, absl::StrCat("sync delay '", text, "' is not MS or MIN-MAX (ms)"));
  }
  return SyncDelay{absl::Milliseconds(min), absl::Milliseconds(max), ""};
}

SyncDelayFileSystem::SyncDelayFileSystem(FileSystem* target, SyncDelay delay)
    : FileSystemWrapper(target), delay_(delay), random_(std::random_device()()) {}

absl::StatusOr<std::unique_ptr<WritableFile>> SyncDelayFileSystem::NewWritableFile(
    const std::string& path, const WritableFileOptions& options) {
  absl::StatusOr<std::unique_ptr<WritableFile>> file = target()->NewWritableFile(path, options);
  if (!file.ok()) return file;
  return std::unique_ptr<WritableFile>(new SyncDelayFile(std::move(*file), this));
}

void SyncDelayFileSystem::Delay() {
  if (!delay_.only_while.empty() && access(delay_.only_while.c_str(), F_OK) != 0) return;
  const int64_t min_us = absl::ToInt64Microseconds(delay_.min);
  const int64_t max_us = absl::ToInt64Microseconds(delay_.max);
  int64_t us = min_us;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (max_us > min_us) us += static_cast<int64_t>(random_() % (max_us - min_us + 1));
  }
  absl::SleepFor(absl::Microseconds(us));
}

}  // namespace logfs::env
