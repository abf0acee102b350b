// The file types an inode may have (Attr.mode's S_IFMT bits).
#pragma once

#include <sys/stat.h>

#include <cstdint>

namespace logfs::format {

// A special file: a FIFO, a Unix socket, or a character or block device
// node. It is metadata only (type, mode, owner, times, xattrs, and the
// device number of a device node): no kind, no logfs settings, no segments
// and no lease. Opening one is the kernel's business (a FIFO or a socket
// lives in the kernel of the host that opens it; device nodes are refused
// on logfs's nodev mounts). Thread-safe (pure).
inline bool IsSpecialFile(uint32_t mode) {
  return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

}  // namespace logfs::format
