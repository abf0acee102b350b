// A segment server's fence against deposed metas (docs/meta_ha.md
// "Fencing"; the idea is HDFS NameNode HA's fencing by epoch, as in its
// quorum journal): the highest meta epoch the server has seen, kept in
// <data_dir>/meta_epoch ("E\n"), and the admission of meta commands and
// heartbeat answers against it.
//
// A command whose meta epoch is nonzero and below the highest is refused
// (format::MetaEpochFencedError); one above it raises the highest, durably
// (env::WriteFileAtomically: temp file, fdatasync, rename, directory sync)
// before the command runs. That synced write happens once per failover,
// never per command: an admission at the highest epoch takes a shared
// lock only.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/env/file_system.h"

namespace logfs::segd {

inline constexpr char kMetaEpochFileName[] = "meta_epoch";

class MetaFence {
 public:
  // Reads <data_dir>/meta_epoch (0 when absent); `data_dir` must exist.
  // kFailedPrecondition naming the file if it is unreadable or not one
  // decimal number. Keeps `fs`, which must outlive the fence.
  static absl::StatusOr<std::unique_ptr<MetaFence>> Open(env::FileSystem& fs,
                                                         const std::string& data_dir);

  // A shared hold on the fence: while one lives, the highest epoch does not
  // change, so a command admitted at epoch E runs to its end before a meta
  // of a higher epoch is admitted. Move-only; empty for epoch 0 commands.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& other) noexcept : mu_(other.mu_) { other.mu_ = nullptr; }
    Hold& operator=(Hold&& other) = delete;
    ~Hold();

   private:
    friend class MetaFence;
    explicit Hold(absl::Mutex* mu) : mu_(mu) {}
    absl::Mutex* mu_ = nullptr;  // reader-locked while set
  };

  // What epoch 0 means to Admit.
  enum class Zero {
    kAdmitted,  // a command of a writer or of a lone meta: never refused
    kCompared,  // a heartbeat answer: admitted only while the highest is 0
  };

  // Admits a command (or heartbeat answer) of `meta_epoch`: OK with a
  // hold, raising (and persisting) the highest first if `meta_epoch` is
  // above it; format::MetaEpochFencedError if below; the write's error if
  // the raise could not be persisted (the highest then stays).
  absl::StatusOr<Hold> Admit(uint64_t meta_epoch, Zero zero = Zero::kAdmitted)
      ABSL_LOCKS_EXCLUDED(mu_);

  uint64_t highest() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  MetaFence(env::FileSystem& fs, std::string path, uint64_t highest)
      : fs_(fs), path_(std::move(path)), highest_(highest) {}
  // Raises the highest to `meta_epoch` if above it, durably.
  absl::Status RaiseTo(uint64_t meta_epoch) ABSL_LOCKS_EXCLUDED(mu_);

  env::FileSystem& fs_;
  const std::string path_;

  // Reader-held by every Hold; writer-held (with the file write) by a raise.
  mutable absl::Mutex mu_;
  uint64_t highest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace logfs::segd
