#include "src/util/version.h"

// Written by the Makefile (packaging/version.sh) into $(BUILDDIR)/gen and
// rewritten only when the version changes, so only this file recompiles.
#include "src/util/version_gen.h"

namespace logfs {

const char* Version() { return LOGFS_VERSION_STRING; }

}  // namespace logfs
