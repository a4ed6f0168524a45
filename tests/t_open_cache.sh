#!/usr/bin/env bash
# t_open_cache.sh - a small frame whose chunks the daemon holds decoded is
# handed to the kernel's page cache whole when it is opened, so that its
# reads need no request (what `tar` of a tree of small frames gains).
#
# Frames a1, a2 (tiny), large (3 MiB, above the 1 MiB limit) and small
# (300 KiB): reading a1 then a2, in the listing's order, makes the daemon
# decode the next two (large, small) ahead (-o warm).  fincore, which
# opens a file and asks which of its pages are resident, must then find
# small whole and none of large, though neither was read; both read back
# right.  A frame changed behind the mount reads as it is now.  On a fresh
# mount, reading a1 alone (the listing's first frame) warms a2.
#
# Env: B2FS, B2F, PY (set by tests/run.sh).
set -u
cd "$(dirname "$0")/.."
if ! command -v fincore >/dev/null; then echo "skip open_cache: no fincore (util-linux)"; exit 0; fi
. tests/mount_lib.sh
mount_test_start open_cache

S=$TMP/src M=$TMP/mnt
mkdir -p "$S" "$M"
yes "a small frame handed to the page cache at its open" | head -c 307200 >"$TMP/small"
yes "a large frame read the usual way, request by request" | head -c 3145728 >"$TMP/large"
echo one >"$TMP/a1"
echo two >"$TMP/a2"
for f in a1 a2 large small; do
  if ! $T "$B2F" pack -c lz4 "$TMP/$f" "$S/$f.b2frame" >/dev/null 2>"$TMP/pack.err"; then
    nok open_cache_pack "b2f pack $f failed: $(head -c 300 "$TMP/pack.err")"; exit 0
  fi
done

if ! mount_bg main "$S" "$M" "warm=2"; then
  nok open_cache_mount "did not mount: $(head -c 300 "${LOGS[$M]}")"; exit 0
fi

# resident FILE: bytes of FILE in the page cache, as fincore sees them
# after its own open.
resident() { fincore --bytes --noheadings --output RES "$1" 2>/dev/null | tr -d ' '; }
# resident_soon FILE BYTES: resident FILE, asked every 50 ms until it is
# BYTES or 10 s have passed (the warming thread's turn, however loaded the
# machine).  Asked at once rather than after a fixed pause: a kernel that
# reclaims page-cache pages nobody has touched for a while (DAMON's
# proactive pageout on the development machine took a few pages of small
# in 3 of 24 runs with a 1 s pause, none in 16 with DAMON off) must not
# decide the test.
resident_soon() {
  local r i
  for i in $(seq 200); do
    r=$(resident "$1")
    [ "$r" = "$2" ] && break
    sleep 0.05
  done
  echo "$r"
}

ls "$M" >/dev/null
$T cat "$M/a1" >/dev/null
$T cat "$M/a2" >/dev/null
rs=$(resident_soon "$M/small" 307200)
rl=$(resident "$M/large")
if [ "$rs" = 307200 ] && [ "$rl" = 0 ]; then
  ok open_cache_small_whole
else
  nok open_cache_small_whole "resident after open: small $rs of 307200 bytes, large $rl (want 0)"
fi

bad=""
cmp -s "$M/small" "$TMP/small" || bad="$bad small"
cmp -s "$M/large" "$TMP/large" || bad="$bad large"
if [ -z "$bad" ]; then ok open_cache_bytes; else nok open_cache_bytes "differ:$bad"; fi

# Changed behind the mount (same size, other bytes): the next open shows
# the new bytes, also when they are handed over at the open.
yes "the same frame, rewritten behind the mount, other words" | head -c 307200 >"$TMP/small2"
$T "$B2F" pack -c lz4 "$TMP/small2" "$S/small.b2frame.new" >/dev/null 2>&1 &&
  mv "$S/small.b2frame.new" "$S/small.b2frame"
sleep 1.2 # the attribute timeout
if cmp -s "$M/small" "$TMP/small2"; then ok open_cache_changed; else nok open_cache_changed "old or mixed bytes after the change"; fi

unmount_fg "$M" main

# A fresh mount: opening the listing's first frame begins a pass in order,
# so the next (a2) is decoded ahead and handed to the page cache.
if ! mount_bg first "$S" "$M" "warm=2"; then
  nok open_cache_first_mount "did not mount: $(head -c 300 "${LOGS[$M]}")"; exit 0
fi
ls "$M" >/dev/null
$T cat "$M/a1" >/dev/null
r2=$(resident_soon "$M/a2" 4096)
if [ "$r2" = 4096 ]; then ok open_cache_first_pass; else
  nok open_cache_first_pass "a2 after reading only a1: $r2 bytes resident (want one page, 4096)"; fi
unmount_fg "$M" first
exit 0
