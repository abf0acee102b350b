// Client::CopyRange: copy_file_range(2) of whole sealed segments by
// reference (meta's CopyRange; docs/POSIX.md, "Copies").
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "fsclient/client.h"
#include "src/status/posix_error.h"

namespace logfs::fsclient {
namespace {

// The bytes of the longest run of whole sealed segments of `inode` that
// starts at `offset` and ends at or before `offset + length`; 0 if
// `offset` is no segment's start or the segment there is open.
uint64_t WholeSegmentsFrom(const proto::Inode& inode, uint64_t offset, uint64_t length) {
  uint64_t run = 0;
  bool started = false;
  for (const proto::Segment& segment : inode.segments()) {
    if (!started) {
      if (segment.file_offset() + segment.length() <= offset && segment.sealed()) continue;
      if (segment.file_offset() != offset) return 0;
      started = true;
    }
    if (!segment.sealed() || segment.length() == 0 || run + segment.length() > length) break;
    run += segment.length();
  }
  return run;
}

absl::Status CopyBytes(absl::string_view why) {
  return PosixError(EOPNOTSUPP, absl::StrCat("copy bytes: ", why));
}

}  // namespace

absl::StatusOr<uint64_t> Client::CopyRange(OpenFile& source, uint64_t offset, OpenFile& dst,
                                           uint64_t dst_offset, uint64_t length) {
  if (dst.writer == nullptr) return CopyBytes("the destination is not written by this mount");
  if (source.ino == dst.ino) return CopyBytes("a copy within one file");
  absl::StatusOr<proto::Inode> inode = deps_->GetInode(source.ino);
  if (!inode.ok()) return CopyBytes(inode.status().message());
  const uint64_t run = WholeSegmentsFrom(*inode, offset, length);
  if (run == 0) {
    return CopyBytes(absl::StrCat("bytes [", offset, ", ", offset + length, ") of inode ",
                                  source.ino, " hold no whole sealed segment at their start"));
  }
  proto::CopyRangeRequest request;
  request.set_ino(source.ino);
  request.set_offset(offset);
  request.set_length(run);
  request.set_dst_ino(dst.ino);
  request.set_dst_offset(dst_offset);
  request.set_mount_id(deps_->mount_id());
  // One id for every attempt, so that meta applies the copy once.
  *request.mutable_call() = deps_->NextCallId();
  absl::StatusOr<uint64_t> appended =
      dst.writer->AppendSegments(dst_offset, [&](uint64_t lease_epoch) {
        request.set_lease_epoch(lease_epoch);
        return deps_->CopyRange(request);
      });
  if (appended.ok() || AttachedErrno(appended.status()) == EIO) return appended;
  // Refused (by the writer's state or by meta), nothing changed.
  return CopyBytes(appended.status().message());
}

}  // namespace logfs::fsclient
