// The bits of SetAttrRequest.to_set: which attributes a setattr changes.
// They are the values of libfuse's FUSE_SET_ATTR_* (fuse_lowlevel.h), so
// the FUSE layer passes the kernel's mask through unchanged; fuse/ops.cc
// static_asserts that they agree, since only fuse/ may include libfuse.
#pragma once

#include <cstdint>

namespace logfs::format {

inline constexpr uint32_t kSetAttrMode = 1 << 0;
inline constexpr uint32_t kSetAttrUid = 1 << 1;
inline constexpr uint32_t kSetAttrGid = 1 << 2;
inline constexpr uint32_t kSetAttrSize = 1 << 3;
inline constexpr uint32_t kSetAttrAtime = 1 << 4;
inline constexpr uint32_t kSetAttrMtime = 1 << 5;
inline constexpr uint32_t kSetAttrAtimeNow = 1 << 7;
inline constexpr uint32_t kSetAttrMtimeNow = 1 << 8;

}  // namespace logfs::format
