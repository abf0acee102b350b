#include "store/segd/meta_fence.h"

#include <glog/logging.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/env/posix_file.h"
#include "src/status/macros.h"
#include "src/status/status_text.h"
#include "store/format/meta_fence_error.h"

namespace logfs::segd {

absl::StatusOr<std::unique_ptr<MetaFence>> MetaFence::Open(env::FileSystem& fs,
                                                           const std::string& data_dir) {
  const std::string path = absl::StrCat(data_dir, "/", kMetaEpochFileName);
  absl::StatusOr<std::string> text = env::ReadSmallFile(fs, path, 64);
  uint64_t highest = 0;
  if (absl::IsNotFound(text.status())) {
    // A data dir that never saw an elected meta.
  } else if (!text.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, ": ", StatusText(text.status())));
  } else if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &highest)) {
    return absl::FailedPreconditionError(absl::StrCat(path,
                                                      " is corrupt (not one decimal meta epoch): '",
                                                      absl::CHexEscape(text->substr(0, 20)), "'"));
  }
  return std::unique_ptr<MetaFence>(new MetaFence(fs, path, highest));
}

MetaFence::Hold::~Hold() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (mu_ != nullptr) mu_->ReaderUnlock();
}

absl::StatusOr<MetaFence::Hold> MetaFence::Admit(uint64_t meta_epoch,
                                                 Zero zero) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (meta_epoch == 0 && zero == Zero::kAdmitted) return Hold();
  // Two rounds at most: after a raise to meta_epoch the highest is at
  // least meta_epoch, so the second round admits or refuses.
  for (int round = 0; round < 2; ++round) {
    mu_.ReaderLock();
    if (meta_epoch == highest_) return Hold(&mu_);
    if (meta_epoch < highest_) {
      const uint64_t highest = highest_;
      mu_.ReaderUnlock();
      return format::MetaEpochFencedError(meta_epoch, highest);
    }
    mu_.ReaderUnlock();
    RETURN_IF_ERROR(RaiseTo(meta_epoch));
  }
  LOG(FATAL) << "meta epoch " << meta_epoch << " neither admitted nor refused after its raise";
  return absl::InternalError("unreachable");
}

absl::Status MetaFence::RaiseTo(uint64_t meta_epoch) {
  absl::MutexLock lock(&mu_);
  if (meta_epoch <= highest_) return absl::OkStatus();
  absl::Status written = env::WriteFileAtomically(fs_, path_, absl::StrCat(meta_epoch, "\n"));
  if (!written.ok()) {
    return absl::Status(written.code(), absl::StrCat("cannot persist meta epoch ", meta_epoch,
                                                     " in ", path_, ": ", written.message()));
  }
  LOG(INFO) << "meta epoch raised from " << highest_ << " to " << meta_epoch;
  highest_ = meta_epoch;
  return absl::OkStatus();
}

uint64_t MetaFence::highest() const {
  absl::ReaderMutexLock lock(&mu_);
  return highest_;
}

}  // namespace logfs::segd
