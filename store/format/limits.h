// Bounds on what meta stores per inode and returns in one response, and the
// worst-case encoded sizes that prove every meta response fits in one frame
// (kMaxMessageBytes). A response that grows with user data either pages
// (Readdir, ListSegments, ListServers) or has its growth refused where the
// data is added (segments per file, xattrs per inode), with the errno that
// docs/rpc.md "Limits" lists.
#pragma once

#include <cstddef>
#include <cstdint>

#include "store/format/frame.h"

namespace logfs::format {

// ---------------------------------------------------------------- limits

// Largest replica Read a segment server answers in one call (and so the
// chunk a copy or a short-circuit read moves at once).
inline constexpr uint64_t kReadBytesMax = 8u << 20;
static_assert(kReadBytesMax <= kMaxDataBytes, "a full Read answer fits in one frame");
// Largest Append a writer sends in one frame; a longer run of buffered
// bytes goes out as several.
inline constexpr uint64_t kAppendBytesMax = 8u << 20;
static_assert(kAppendBytesMax <= kMaxDataBytes, "an Append fits in one frame");
// Largest write(2) the kernel hands the mount at once (FUSE max_write).
inline constexpr uint32_t kFuseWriteBytesMax = 1u << 20;
static_assert(kFuseWriteBytesMax <= kAppendBytesMax, "one FUSE write goes out in one Append");

inline constexpr size_t kNameBytesMax = 255;            // one path component (ENAMETOOLONG)
inline constexpr size_t kSymlinkTargetBytesMax = 4095;  // PATH_MAX - 1 (ENAMETOOLONG)
inline constexpr size_t kXattrNameBytesMax = 255;       // XATTR_NAME_MAX (ERANGE)
inline constexpr size_t kXattrValueBytesMax = 64 << 10;  // XATTR_SIZE_MAX (E2BIG)
// listxattr: the names of one inode, each with its NUL, the user.logfs.*
// ones meta lists included, at most XATTR_LIST_MAX (ENOSPC at setxattr).
inline constexpr size_t kXattrListBytesMax = 64 << 10;
// Names plus values of one inode's stored xattrs (ENOSPC at setxattr).
inline constexpr size_t kXattrBytesPerInodeMax = 256 << 10;
inline constexpr uint32_t kReplicationMax = 16;
// Fewest replicas a new segment gets when too few servers are live for its
// file's replication (files with a lower ack quorum go down to that).
inline constexpr uint32_t kDegradedReplicasMin = 2;
// A segment server's "host:port" and host name (EINVAL at RegisterServer).
inline constexpr size_t kServerAddressBytesMax = 255;
inline constexpr size_t kServerHostBytesMax = 255;
// A segment server's failure domain, "rack/host" (EINVAL at RegisterServer),
// and the reason a failed server reports (cut to this many bytes).
inline constexpr size_t kFailureDomainBytesMax = 255;
inline constexpr size_t kDiskFailureBytesMax = 255;
// Why meta cannot dial a server's advertised address (ServerStatus.unreachable).
inline constexpr size_t kUnreachableBytesMax = 255;
// Encoded bytes of one inode as meta replies it (segments with their
// replica addresses; xattrs are left out): a roll, or the first write after
// an open, whose new segment would take the reply past this fails with
// EFBIG, as HDFS bounds blocks per file
// (dfs.namenode.fs-limits.max-blocks-per-file). A budget in bytes, not a
// count of segments, because a segment's size depends on its replication
// and its servers' addresses: about 30 000 segments of 3 replicas with
// loopback addresses, 900 of 16 replicas with 255-byte ones. A WAL reopened
// for append gets a new segment each time; O_TRUNC or truncate(0) empties
// the list. NamespaceOptions::inode_reply_bytes_max lowers it for tests.
inline constexpr size_t kInodeReplyBytesMax = kMaxMessageBytes - (64 << 10);

// One Readdir page: at most this many entries and this many bytes of
// encoded entries (the reply says whether more follow).
inline constexpr size_t kReaddirPageEntriesMax = 4096;
inline constexpr size_t kReaddirPageBytesMax = 512 << 10;
// One ListServers page.
inline constexpr size_t kListServersPageMax = 1024;
// Encoded files of one ListSegments page (a page always holds at least one
// file, and any file fits: see below).
inline constexpr size_t kListSegmentsPageBytesMax = kMaxMessageBytes - 1024;

// ---------------------------------------------------- worst-case encodings

namespace internal {

constexpr size_t VarintBytes(uint64_t value) {
  size_t n = 1;
  while (value >= 128) {
    value >>= 7;
    ++n;
  }
  return n;
}
// A field with a one-byte tag (field numbers below 16).
inline constexpr size_t kVarintFieldBytesMax = 1 + 10;  // any integer, enum or negative
inline constexpr size_t kUint32FieldBytesMax = 1 + 5;
inline constexpr size_t kBoolFieldBytes = 1 + 1;
constexpr size_t LengthFieldBytes(size_t payload) { return 1 + VarintBytes(payload) + payload; }

// proto::DirEntry: name, ino, mode.
inline constexpr size_t kDirEntryBytesMax =
    LengthFieldBytes(kNameBytesMax) + kVarintFieldBytesMax + kUint32FieldBytesMax;
// proto::Replica: server_id, address.
inline constexpr size_t kReplicaBytesMax =
    kVarintFieldBytesMax + LengthFieldBytes(kServerAddressBytesMax);
// proto::Segment: id, epoch, replicas, length, sealed, file_offset, ack_quorum.
inline constexpr size_t kSegmentBytesMax = 4 * kVarintFieldBytesMax + kBoolFieldBytes +
                                           kUint32FieldBytesMax +
                                           kReplicationMax * LengthFieldBytes(kReplicaBytesMax);
// proto::Attr: ino, size, 3 times and kind (varints); mode, uid, gid, nlink;
// open_for_write.
inline constexpr size_t kAttrBytesMax =
    6 * kVarintFieldBytesMax + 4 * kUint32FieldBytesMax + kBoolFieldBytes;
// proto::ServerStatus.
inline constexpr size_t kServerStatusBytesMax =
    kVarintFieldBytesMax + LengthFieldBytes(kServerAddressBytesMax) +
    LengthFieldBytes(kServerHostBytesMax) + kBoolFieldBytes + 3 * kVarintFieldBytesMax +
    LengthFieldBytes(kDiskFailureBytesMax) + LengthFieldBytes(kFailureDomainBytesMax) +
    LengthFieldBytes(kUnreachableBytesMax);

}  // namespace internal

// Readdir: a full page of the longest names, plus `more`.
static_assert(kReaddirPageEntriesMax * internal::LengthFieldBytes(internal::kDirEntryBytesMax) +
                      internal::kBoolFieldBytes <=
                  kMaxMessageBytes,
              "a Readdir page must fit in one frame");
static_assert(kReaddirPageBytesMax + internal::kBoolFieldBytes <= kMaxMessageBytes,
              "the Readdir byte budget must fit in one frame");
// GetInode, Open, OpenWrite, SealSegment, RecoverLease: one InodeResponse,
// with room for the segment that the check admits last.
static_assert(internal::LengthFieldBytes(kInodeReplyBytesMax +
                                         internal::LengthFieldBytes(internal::kSegmentBytesMax)) <=
                  kMaxMessageBytes,
              "an inode at its byte budget must fit in one frame");
// ListSegments: any one file fits in a page; a page and next_ino in a frame.
static_assert(internal::LengthFieldBytes(kInodeReplyBytesMax +
                                         internal::LengthFieldBytes(internal::kSegmentBytesMax)) <=
                  kListSegmentsPageBytesMax,
              "every file must fit in a ListSegments page");
static_assert(kListSegmentsPageBytesMax + internal::kVarintFieldBytesMax <= kMaxMessageBytes,
              "a ListSegments page must fit in one frame");
// ListServers: a page and next_server_id.
static_assert(kListServersPageMax * internal::LengthFieldBytes(internal::kServerStatusBytesMax) +
                      internal::kVarintFieldBytesMax <=
                  kMaxMessageBytes,
              "a ListServers page must fit in one frame");
// ListXattr: each name costs at most 3 bytes of framing more than its
// share of kXattrListBytesMax (which counts its NUL, so a name is >= 2).
static_assert(3 * kXattrListBytesMax <= kMaxMessageBytes, "listxattr must fit in one frame");
static_assert(internal::LengthFieldBytes(kXattrValueBytesMax) <= kMaxMessageBytes,
              "getxattr must fit in one frame");
static_assert(kXattrValueBytesMax + kXattrNameBytesMax <= kXattrBytesPerInodeMax,
              "one xattr of the largest size must fit in an inode");

}  // namespace logfs::format
