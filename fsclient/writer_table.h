// The writers of a client, one per file it has open for write, shared by
// every handle of that file (as the kernel shares one inode between file
// descriptions): how many handles hold it, and whether an open is taking
// the lease at meta (opening: a placeholder, no writer yet) or the last
// handle's close is sealing it (closing). An open of a file waits while
// either is in progress (Settled); calls that must see what a close left
// run after it (RunAfterClose), so no thread waits for a close.
//
// A value type over `Writer` (wal::FileWriter in the client, anything in
// tests): no I/O, no locking. Client holds one under its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "glog/logging.h"

namespace logfs::fsclient {

template <typename Writer>
class WriterTable {
 public:
  // No open or close of `ino` in progress: an open may go on.
  bool Settled(uint64_t ino) const {
    auto it = refs_.find(ino);
    return it == refs_.end() || (!it->second.closing && !it->second.opening);
  }
  bool Closing(uint64_t ino) const {
    auto it = refs_.find(ino);
    return it != refs_.end() && it->second.closing;
  }
  // The writer of `ino`, or null (none, or its open is still at meta).
  std::shared_ptr<Writer> Find(uint64_t ino) const {
    auto it = refs_.find(ino);
    return it == refs_.end() ? nullptr : it->second.writer;
  }

  // An open for write of a Settled file: the writer already there with
  // one more handle, or null after leaving a placeholder: the caller takes
  // the lease at meta, then Install()s the writer or Abandon()s.
  std::shared_ptr<Writer> Acquire(uint64_t ino) {
    CHECK(Settled(ino)) << "inode " << ino << ": an open while another open or a close runs";
    auto it = refs_.find(ino);
    if (it != refs_.end()) {
      ++it->second.handles;
      return it->second.writer;
    }
    refs_[ino].opening = true;
    return nullptr;
  }
  // The writer of a new file, or of an open Acquire left a placeholder
  // for: one handle.
  void Install(uint64_t ino, std::shared_ptr<Writer> writer) {
    Ref& ref = refs_[ino];
    CHECK(ref.writer == nullptr) << "inode " << ino << " has a writer already";
    ref = Ref();
    ref.writer = std::move(writer);
    ref.handles = 1;
  }
  // The open of a placeholder failed at meta.
  void Abandon(uint64_t ino) {
    auto it = refs_.find(ino);
    if (it != refs_.end() && it->second.opening) refs_.erase(it);
  }
  // A handle is released, also that of an open that failed after Acquire
  // gave it the writer (a refused truncate; the other handles may have
  // been released meanwhile): true if it was the last, and the writer is
  // now closing (the caller closes it, then calls Closed).
  bool Release(uint64_t ino) {
    auto it = refs_.find(ino);
    if (it == refs_.end() || --it->second.handles > 0) return false;
    it->second.closing = true;
    return true;
  }
  // Runs `call` after the close in progress of `ino` (from Closed); false,
  // keeping nothing, when no close is in progress.
  bool RunAfterClose(uint64_t ino, std::function<void()> call) {
    auto it = refs_.find(ino);
    if (it == refs_.end() || !it->second.closing) return false;
    it->second.after_close.push_back(std::move(call));
    return true;
  }
  // The close of `ino` ended: the writer goes; returns the calls to run
  // (outside the owner's lock).
  std::vector<std::function<void()>> Closed(uint64_t ino) {
    std::vector<std::function<void()>> after_close;
    auto it = refs_.find(ino);
    if (it == refs_.end()) return after_close;
    after_close = std::move(it->second.after_close);
    refs_.erase(it);
    return after_close;
  }

  // Files with a writer (not those whose open is still at meta).
  std::vector<uint64_t> WritingInos() const {
    std::vector<uint64_t> inos;
    for (const auto& [ino, ref] : refs_) {
      if (ref.writer != nullptr) inos.push_back(ino);
    }
    return inos;
  }

 private:
  struct Ref {
    std::shared_ptr<Writer> writer;
    int handles = 0;
    bool closing = false;  // last handle released, close in progress
    bool opening = false;  // lease being taken at meta; `writer` is still null
    std::vector<std::function<void()>> after_close;
  };
  absl::flat_hash_map<uint64_t, Ref> refs_;
};

}  // namespace logfs::fsclient
