#!/bin/sh
# Prints logfs's version: the one place it comes from (README "Versions").
#
#   tag vX.Y.Z on HEAD              X.Y.Z
#   N commits after tag vX.Y.Z      X.Y.Z+gitN.SHA
#     ... with a newer VERSION      VERSION~gitC.SHA (C = commits in HEAD, as untagged)
#   no tag                          BASE~gitN.SHA    (BASE from the VERSION file:
#                                                      the release being worked
#                                                      towards; N = commits in HEAD)
#   uncommitted changes             the above + ".dirty"
#   no git (a source tarball)       the VERSION file, else 0.0.0
#
# Every form is a valid Debian upstream version (digits first, then only
# [0-9A-Za-z.+~]) that sorts after the one before it (the "~" of a build
# before the first tag sorts below the tag BASE itself), so `make deb` uses it
# as the package's version unchanged. $LOGFS_VERSION, if set, wins (a
# distributor's own number).
set -eu
cd "$(dirname "$0")/.."
if [ -n "${LOGFS_VERSION:-}" ]; then
  echo "$LOGFS_VERSION"
  exit 0
fi
base=$(head -n 1 VERSION 2>/dev/null || echo 0.0.0)
# Only this tree's own git: a tarball unpacked inside another repository
# takes the VERSION file.
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$(pwd -P)" ] ||
   ! desc=$(git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null); then
  echo "$base"
  exit 0
fi
dirty=
case "$desc" in *-dirty) dirty=.dirty; desc=${desc%-dirty} ;; esac
case "$desc" in
  v[0-9]*-*-g*)  # vX.Y.Z-N-gSHA
    sha=${desc##*-g}; rest=${desc%-g*}; n=${rest##*-}; tag=${rest%-*}
    if [ "$(printf '%s\n%s\n' "${tag#v}" "$base" | sort -V | tail -n 1)" != "${tag#v}" ]; then
      # VERSION names the next release: a build towards it sorts below it,
      # numbered as without a tag (a clone without tags gives the same).
      echo "$base~git$(git rev-list --count HEAD).$sha$dirty"
    else
      echo "${tag#v}+git$n.$sha$dirty"
    fi ;;
  v[0-9]*)
    echo "${desc#v}$dirty" ;;
  *)
    echo "$base~git$(git rev-list --count HEAD).$desc$dirty" ;;
esac
