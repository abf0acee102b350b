#!/usr/bin/env bash
# Builds the Debian package from this source tree into BUILDDIR/deb/ and
# runs lintian on it (`make deb` calls this after `make bin`).
#
#   packaging/make-deb.sh [BUILDDIR]     (default build)
#
# It runs `debian/rules binary` in the source tree rather than
# dpkg-buildpackage, which would write the .deb and .changes into the
# parent directory: dh_builddeb --destdir puts the .deb in BUILDDIR/deb/
# instead, and dh_auto_build's `make bin` reuses the current build.
# debhelper's leftovers in debian/ are in .gitignore.
# Prints the .deb's path last. Exit 1 on a build failure or a lintian error
# (warnings are printed, not fatal).
set -euo pipefail
cd "$(dirname "$0")/.."
builddir=${1:-build}
version=$(packaging/version.sh)
out=$builddir/deb
mkdir -p "$out"
rm -f "$out"/logfs_*.deb
# No -dbgsym package: the symbols stay in build/logfs.
export DEB_BUILD_OPTIONS="noddebs ${DEB_BUILD_OPTIONS:-}"
export VERSION=$version BUILDDIR=$builddir DEB_DESTDIR=$out
rm -rf debian/logfs debian/.debhelper
debian/rules binary >"$out/build.log" 2>&1 || {
  tail -40 "$out/build.log" >&2
  echo "make-deb: debian/rules binary failed; log in $out/build.log" >&2
  exit 1
}
rm -rf debian/logfs debian/.debhelper debian/files debian/*.substvars debian/*.debhelper debian/*.debhelper.log \
  debian/debhelper-build-stamp
deb=$out/logfs_${version}_amd64.deb
[ -f "$deb" ] || { echo "make-deb: $deb was not built" >&2; exit 1; }
# lintian's exit code is 1 on errors only with --fail-on error. Its
# scratch files (it leaves an mldbm-elf-* behind) go under the build dir,
# not /tmp.
mkdir -p "$out/lintian-tmp"
TMPDIR=$(cd "$out/lintian-tmp" && pwd) lintian --fail-on error --tag-display-limit 0 "$deb" |
  tee "$out/lintian.txt"
rm -rf "$out/lintian-tmp"
echo "$deb"
