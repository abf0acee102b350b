// The version logfs_build_info{version} reports.
#pragma once

namespace logfs::metrics {

// PLACEHOLDER until `logfs --version` (issue 15 item 1, another branch)
// lands: then this should be that string (from `git describe`), defined in
// that one place. Nothing else reads it.
inline constexpr char kBuildVersion[] = "0.0.0-dev";

}  // namespace logfs::metrics
