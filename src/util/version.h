// The version of this logfs build.
#pragma once

namespace logfs {

// "0.1.0~git301.347811e" and the like: packaging/version.sh's output when
// the binary was built (git describe, else the VERSION file), the same
// string as the Debian package's version. Static storage; any thread.
const char* Version();

}  // namespace logfs
