// The listing behind one opendir handle: "." and "..", then the
// directory's entries, fetched from meta one page at a time (docs/rpc.md
// "Readdir"). It holds one page and the cursor (the page's last name),
// never the whole directory, so a directory of any size lists in bounded
// memory.
//
// Positions and offsets follow the FUSE convention: "." is position 0, the
// entry at position i is handed to the kernel with offset i + 1, and a
// readdir at offset `off` continues at position `off`. Positions count the
// entries as this stream hands them out, so an offset the kernel got from
// us stays valid however the directory changes meanwhile:
// - offset 0 (opendir, rewinddir) starts a fresh listing;
// - an offset in the current page, or at its end, continues from there
//   (the next page is fetched after the cursor: "start after this name"
//   neither repeats nor skips a name that stayed, whatever was added or
//   removed, which `rm -rf` relies on);
// - any other offset (seekdir to an earlier telldir) lists again from the
//   start and skips to that position, so it names the same entry only if
//   the directory did not change (POSIX leaves that case unspecified).
// Entries returned by one call never span two pages, so the kernel's next
// offset always lies in the current page or at its end.
//
// Not thread-safe: the caller serializes calls on one stream.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "store/format/logfs.pb.h"

namespace logfs::fuse {

class DirStream {
 public:
  // Fetches the page of entries after `start_after` ("" for the first):
  // meta's Readdir. Its errors are returned as they are.
  using FetchPage =
      std::function<absl::StatusOr<proto::ReaddirResponse>(const std::string& start_after)>;

  // `ino` is the directory ("." and ".." carry it). Keeps `fetch`.
  DirStream(uint64_t ino, FetchPage fetch);

  // Fetches the first page (opendir), so that a directory that cannot be
  // listed fails at open; the first read at offset 0 then uses this page.
  absl::Status Open();

  // The entries from position `position` on, up to the end of the page
  // that holds it; empty at the end of the directory. The span stays
  // valid until the next call. Errors: those of the fetch; kInternal if
  // meta says more entries follow but sends none.
  absl::StatusOr<absl::Span<const proto::DirEntry>> EntriesAt(uint64_t position);

  // Where the listing stands, for a successor daemon (HandedOffDir's
  // fields but fh and ino); Restore makes a new stream of the same
  // directory stand there, so that the kernel's next offset continues
  // where it did.
  void Export(proto::HandedOffDir* out) const;
  void Restore(const proto::HandedOffDir& in);

 private:
  absl::Status Restart();
  absl::Status NextPage();
  // Makes the page after the cursor current.
  absl::Status Load(const std::string& start_after, bool first);

  const uint64_t ino_;
  const FetchPage fetch_;

  std::vector<proto::DirEntry> page_;  // the first page starts with "." and ".."
  uint64_t page_position_ = 0;         // position of page_[0]
  std::string cursor_;                 // last name fetched ("" before any)
  bool more_ = false;                  // entries may follow page_
  bool loaded_ = false;                // page_ holds a fetched page
  bool fresh_ = false;                 // first page fetched by Open, not yet read
};

}  // namespace logfs::fuse
