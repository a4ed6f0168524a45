#!/usr/bin/env bash
# t_limits.sh - the daemon short of file descriptors: every inode the
# kernel keeps holds one, so a tree of more entries than the descriptor
# limit makes lookups fail (EMFILE) once the kernel holds that many.  The
# daemon must stay up, commit what was written and exit cleanly at unmount
# (it once aborted there: the C library could not load libgcc_s for the
# workers' cancellation).  Runs
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
mkdir -p "$TMP/src/d" "$TMP/mnt"
printf 'frame %s\n' $(seq 20) >"$TMP/one"
"$B2F" pack "$TMP/one" "$TMP/src/d/f000.b2frame" || { nok limits_pack "b2f pack failed"; exit 0; }
for i in $(seq 1 399); do cp "$TMP/src/d/f000.b2frame" "$TMP/src/d/f$(printf %03d "$i").b2frame"; done

# 300 descriptors for 400 frames (the sanitizers and libfuse take some).
LOGS[$TMP/mnt]=$TMP/limits.log
prlimit --nofile=300:300 "$B2FS" "$TMP/src" "$TMP/mnt" -f 2>"$TMP/limits.log" &
PIDS[$TMP/mnt]=$!
for _ in $(seq 300); do mountpoint -q "$TMP/mnt" && break; sleep 0.1; done
if ! mountpoint -q "$TMP/mnt"; then nok limits_mount "daemon did not mount"; exit 0; fi
printf 'written before\n' >"$TMP/mnt/w" # a frame of our own
printf 'and after\n' >>"$TMP/mnt/w"
errs=$( (ls -l "$TMP/mnt/d"; ls -l "$TMP/mnt/d"; cat "$TMP"/mnt/d/*) 2>&1 >/dev/null |
  grep -c "Too many open files")
if [ "$errs" -gt 0 ]; then ok limits_emfile; else
  skip limits_emfile "no lookup ran out of descriptors (limit not reached)"; fi
if kill -0 "${PIDS[$TMP/mnt]}" 2>/dev/null; then ok limits_alive; else nok limits_alive "daemon died"; fi
unmount_fg "$TMP/mnt" limits
if [ "$("$B2F" cat "$TMP/src/w.b2frame" 2>/dev/null)" = "$(printf 'written before\nand after')" ]; then
  ok limits_committed
else
  nok limits_committed "w.b2frame holds: $("$B2F" cat "$TMP/src/w.b2frame" 2>&1 | head -c 200)"
fi
if grep -q "must be installed" "$TMP/limits.log"; then
  nok limits_no_abort "$(grep -m1 "must be installed" "$TMP/limits.log")"
else ok limits_no_abort; fi
