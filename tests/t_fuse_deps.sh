#!/usr/bin/env bash
# t_fuse_deps.sh - the daemon's files (fuse/*.c) depend on each other in one
# direction only (scripts/fuse-deps: calls of b2fs_* functions and uses of
# its globals between files, no cycle), and the checker itself sees a cycle
# when there is one (a copy of fuse/ with one call added against the order).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
P=$PY
[ -x "$P" ] || P=python3
out=$("$P" scripts/fuse-deps 2>&1)
if [ $? -eq 0 ]; then ok fuse_deps_one_way; else notok fuse_deps_one_way "$(grep '^cycle' <<<"$out")"; fi
TMP=$(mktemp -d /tmp/b2fs-t_fuse_deps.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
cp fuse/*.c "$TMP/"
# inode.c (the table, lowest) calling up into whandle.c must be caught
printf '\nvoid b2fs_test_up(void) { b2fs_frame_follow(0); }\n' >>"$TMP/inode.c"
if "$P" scripts/fuse-deps "$TMP" >/dev/null 2>&1; then
  notok fuse_deps_sees_cycle "a call from inode.c into whandle.c was not seen as a cycle"
else
  ok fuse_deps_sees_cycle
fi
