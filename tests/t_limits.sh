#!/usr/bin/env bash
# t_limits.sh - the daemon short of file descriptors.  Every inode the
# kernel keeps holds one, and the kernel keeps them until its memory runs
# short: past a mark below the limit the daemon asks it to drop the
# coldest names (fuse/shed.c), so a tree of more entries than the limit is
# read and copied into the mount whole, with no EMFILE.  A file made
# through the mount holds one descriptor, not two (its writer once kept a
# directory of its own: in a plain directory until cfad0e8, in a
# python-blosc2 store's group later).  The daemon must commit what was
# written and exit cleanly at unmount (it once aborted there: the C
# library could not load libgcc_s for the workers' cancellation).  Runs
# the release daemon: the sanitizers' runtime loads libgcc_s itself and
# would hide that.
set -u
cd "$(dirname "$0")/.."
: "${B2FS_RELEASE:=build/b2fs}" "${B2F:=build/san/b2f}"
B2FS=$B2FS_RELEASE
[ -x "$B2FS" ] || { echo "skip limits: no $B2FS (make all)"; exit 0; }
[ -e /dev/fuse ] || { echo "skip limits: no /dev/fuse"; exit 0; }
command -v prlimit >/dev/null || { echo "skip limits: no prlimit"; exit 0; }
TMP=$(mktemp -d /tmp/b2fs-t_limits.XXXXXX)
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/src/d" "$TMP/mnt" "$TMP/tree"
printf 'frame %s\n' $(seq 20) >"$TMP/one"
"$B2F" pack "$TMP/one" "$TMP/src/d/f000.b2frame" || { nok limits_pack "b2f pack failed"; exit 0; }
for i in $(seq 1 399); do cp "$TMP/src/d/f000.b2frame" "$TMP/src/d/f$(printf %03d "$i").b2frame"; done
for i in $(seq 1 600); do printf 'line %s\n' "$i" >"$TMP/tree/f$i"; done
PYB2=${PYB2:-$PWD/build/venv/bin/python}
store=0
if [ -x "$PYB2" ] && "$PYB2" -c 'import sys, blosc2
s = blosc2.DictStore(sys.argv[1], mode="w"); s["/g/first"] = blosc2.SChunk(); s.close()' \
  "$TMP/src/s.b2d" 2>/dev/null; then store=1; fi

# 300 descriptors for 400 frames, 230 files renamed, then 600 new files twice.
LOGS[$TMP/mnt]=$TMP/limits.log
prlimit --nofile=300:300 "$B2FS" "$TMP/src" "$TMP/mnt" -f 2>"$TMP/limits.log" &
PIDS[$TMP/mnt]=$!
for _ in $(seq 300); do mountpoint -q "$TMP/mnt" && break; sleep 0.1; done
if ! mountpoint -q "$TMP/mnt"; then nok limits_mount "daemon did not mount"; exit 0; fi
pid=${PIDS[$TMP/mnt]}
fds() { ls "/proc/$pid/fd" | wc -l; }
printf 'written before\n' >"$TMP/mnt/w" # a frame of our own
printf 'and after\n' >>"$TMP/mnt/w"

# New values of a store's group: one descriptor each (150: below the mark).
if [ "$store" = 1 ]; then
  mkdir "$TMP/few" && cp "$TMP"/tree/f{1..150} "$TMP/few/"
  n0=$(fds)
  if cp -r "$TMP/few" "$TMP/mnt/s/g/few" 2>"$TMP/cp.err"; then
    n1=$(fds)
    if [ $((n1 - n0)) -le 160 ]; then ok limits_store_one_fd
    else nok limits_store_one_fd "150 new values took $((n1 - n0)) descriptors"; fi
  else nok limits_store_one_fd "$(head -c 300 "$TMP/cp.err")"; fi
else
  skip limits_store_one_fd "no python-blosc2 at $PYB2"
fi

# 230 files made and then renamed one by one: the kernel knows them by
# their new names, and can be asked to drop those.
mkdir "$TMP/mnt/r1" "$TMP/mnt/r2"
for i in $(seq 230); do printf 'r %s\n' "$i" >"$TMP/mnt/r1/f$i"; done
for i in $(seq 230); do mv "$TMP/mnt/r1/f$i" "$TMP/mnt/r2/g$i"; done
errs=$( (ls -l "$TMP/mnt/d"; ls -l "$TMP/mnt/d"; cat "$TMP"/mnt/d/* >"$TMP/all") 2>&1 >/dev/null)
if [ -z "$errs" ] && [ "$(sort -u "$TMP/all")" = "$(sort -u "$TMP/one")" ] &&
   [ "$(wc -l <"$TMP/all")" -eq 8000 ]; then ok limits_read_tree
else nok limits_read_tree "$(printf '%s' "$errs" | head -c 300)"; fi
if cp -r "$TMP/tree" "$TMP/mnt/plain" 2>"$TMP/cp.err" && diff -r "$TMP/tree" "$TMP/mnt/plain" >/dev/null 2>&1
then ok limits_copy_plain; else nok limits_copy_plain "$(head -c 300 "$TMP/cp.err")"; fi
if [ "$store" = 1 ]; then
  if cp -r "$TMP/tree" "$TMP/mnt/s/g/t" 2>"$TMP/cp.err" && diff -r "$TMP/tree" "$TMP/mnt/s/g/t" >/dev/null 2>&1
  then ok limits_copy_store; else nok limits_copy_store "$(head -c 300 "$TMP/cp.err")"; fi
else
  skip limits_copy_store "no python-blosc2 at $PYB2"
fi
if kill -0 "$pid" 2>/dev/null; then ok limits_alive; else nok limits_alive "daemon died"; fi
unmount_fg "$TMP/mnt" limits
if grep -q "the descriptor limit made us ask the kernel to drop [1-9]" "$TMP/limits.log"; then
  ok limits_shed
else nok limits_shed "no name dropped: $(tail -c 300 "$TMP/limits.log")"; fi
if [ "$("$B2F" cat "$TMP/src/w.b2frame" 2>/dev/null)" = "$(printf 'written before\nand after')" ]; then
  ok limits_committed
else
  nok limits_committed "w.b2frame holds: $("$B2F" cat "$TMP/src/w.b2frame" 2>&1 | head -c 200)"
fi
if grep -q "must be installed" "$TMP/limits.log"; then
  nok limits_no_abort "$(grep -m1 "must be installed" "$TMP/limits.log")"
else ok limits_no_abort; fi
if [ "$store" = 1 ]; then
  r=$("$PYB2" tests/store_life_check.py "$TMP/src/s.b2d" /g/t "$TMP/tree" 2>&1 | tail -c 300)
  if [ "$r" = ok ]; then ok limits_copy_store_pyb2; else nok limits_copy_store_pyb2 "$r"; fi
fi
