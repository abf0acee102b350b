// The user.logfs.* extended attributes: one list shared by meta (which
// stores and validates the settable ones), the mount (which answers the
// computed ones) and the tools (which read them). See docs/rpc.md.
#pragma once

namespace logfs::format {

inline constexpr char kLogfsXattrPrefix[] = "user.logfs.";
// Settable on directories (inherited) and on files without data.
inline constexpr char kKindXattr[] = "user.logfs.kind";  // "wal" | "block"
inline constexpr char kReplicationXattr[] = "user.logfs.replication";
inline constexpr char kAckQuorumXattr[] = "user.logfs.ack_quorum";
// Read-only, computed by the mount. A segment listing longer than
// kSegmentsXattrBytesMax is paged: user.logfs.segments is then one line,
// "N segments in P pages: user.logfs.segments.0 to user.logfs.segments.P-1",
// and each page (kSegmentsXattr + ".K") holds the next lines that fit.
inline constexpr char kSegmentsXattr[] = "user.logfs.segments";
// Below the kernel's XATTR_SIZE_MAX (64 KiB), with room for one more line.
inline constexpr size_t kSegmentsXattrBytesMax = 60 << 10;
inline constexpr char kDurableLengthXattr[] = "user.logfs.durable_length";
// Read-only, on a mount's root or any path: for `logfs umount` / `recover`.
inline constexpr char kMountPidXattr[] = "user.logfs.mount_pid";
inline constexpr char kMetaAddressXattr[] = "user.logfs.meta_address";
// Read-only, any path: the path of the cluster secret file the mount uses
// (ENODATA without one), for tools that dial its servers (`logfs bench`).
inline constexpr char kClusterSecretFileXattr[] = "user.logfs.cluster_secret_file";
// Read-only, any path: the mount's writer counters (wal/writer_counters.h).
inline constexpr char kStatsXattr[] = "user.logfs.stats";
// Write-only, any path, root only: setting it (any value) empties the
// mount's block cache, as /proc/sys/vm/drop_caches does the kernel's.
inline constexpr char kDropBlockCacheXattr[] = "user.logfs.drop_block_cache";

}  // namespace logfs::format
