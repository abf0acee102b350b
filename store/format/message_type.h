// RPC message types carried in the frame header (docs/wire_format.md).
// Values are part of the wire format: never renumber, only add.
#pragma once

#include <cstdint>

namespace logfs::format {

enum class MessageType : uint16_t {
  kInvalid = 0,
  // meta server
  kRegisterServer = 1,
  kHeartbeat = 2,
  kLookup = 3,
  kGetAttr = 4,
  kSetAttr = 5,
  kCreate = 6,
  kUnlink = 7,
  kRename = 8,
  kReadlink = 9,
  kReaddir = 10,
  kSetXattr = 11,
  kGetXattr = 12,
  kListXattr = 13,
  kRemoveXattr = 14,
  kStatFs = 15,
  kOpen = 16,
  kRelease = 17,
  kOpenWrite = 18,
  kSealSegment = 19,
  kNewMount = 20,
  kMountHeartbeat = 21,
  kGetInode = 22,
  kReportBadReplica = 23,
  kListServers = 24,
  kListSegments = 25,
  kRecoverLease = 26,
  kMetaState = 27,        // served by standbys too (docs/meta_ha.md)
  kCheckpoint = 28,       // served by standbys too
  kReadCheckpoint = 29,   // served by standbys too
  kWatchCache = 30,      // added in 0.2 (docs/coherence.md)
  kLink = 31,            // added in 0.2 (hard links)
  kClone = 32,           // added in 0.2 (metadata-only copies)
  kSnapshot = 33,        // added in 0.2 (directory snapshots)
  kCopyRange = 34,       // added in 0.2 (copy_file_range of whole sealed segments)
  kCheckShares = 35,     // added in 0.2 (fsck of the share records)
  kMetaTypeEnd = 36,
  // segment server
  kCreateSegment = 100,
  kAppend = 101,
  kSync = 102,
  kRead = 103,
  kSegmentInfo = 104,
  kSeal = 105,
  kDeleteSegment = 106,
  kCopySegment = 107,
  kServerStats = 108,
  kShortCircuitInfo = 109,  // TCP: where this server's Unix socket is
  kShortCircuitOpen = 110,  // Unix socket only: descriptors of a sealed replica
  kSegdTypeEnd = 111,
};

inline bool IsMetaType(uint16_t t) {
  return t >= 1 && t < static_cast<uint16_t>(MessageType::kMetaTypeEnd);
}
inline bool IsSegdType(uint16_t t) {
  return t >= 100 && t < static_cast<uint16_t>(MessageType::kSegdTypeEnd);
}

}  // namespace logfs::format
