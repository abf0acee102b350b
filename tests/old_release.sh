#!/usr/bin/env bash
# Builds the logfs binary of an earlier release, for the mixed-version
# fault test (tests/mixed_version_fault_test.cc), and prints its path.
#
#   tests/old_release.sh [TAG]
#
# TAG: a release tag (vX.Y.Z) of this repository; default the newest one
# reachable from HEAD that is not HEAD itself (the previous release). The
# tree is `git archive TAG` in build/release-TAG-COMMIT/src, built there with its
# own Makefile (`make bin`); a binary built before is reused. Exit 1 if
# there is no such tag or the build fails (its output on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:-}
if [ -z "$tag" ]; then
  head=$(git rev-parse HEAD)
  for t in $(git tag --list 'v[0-9]*' --sort=-v:refname --merged HEAD); do
    if [ "$(git rev-list -n 1 "$t")" != "$head" ]; then tag=$t; break; fi
  done
fi
if [ -z "$tag" ] || ! git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
  echo "old_release.sh: no release tag ${tag:-before HEAD} (git tag --list 'v*')" >&2
  exit 1
fi
# Keyed by the commit, so a moved tag builds anew.
commit=$(git rev-parse "$tag^{commit}")
dir=build/release-$tag-${commit:0:12}
if [ ! -x "$dir/src/build/logfs" ]; then
  rm -rf "$dir"
  mkdir -p "$dir/src"
  git archive "$tag" | tar -x -C "$dir/src"
  # Its own make: nothing of a calling make's jobserver, variables or
  # version override reaches it.
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u LOGFS_VERSION -u BUILDDIR \
    make -C "$dir/src" -j"$(nproc)" bin >"$dir/build.log" 2>&1 || {
    tail -n 30 "$dir/build.log" >&2
    exit 1
  }
fi
echo "$PWD/$dir/src/build/logfs"
