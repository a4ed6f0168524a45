#!/usr/bin/env bash
# t_pyb2_lock.sh - sharing frames with python-blosc2 and with other b2fs
# daemons (the reference library's .b2lock locking; skipped without the
# python-blosc2 venv, see tests/lib.sh).
#
#  1. python-blosc2 (locking=True) appends to, updates and resizes an array
#     while b2fs (default locking=auto: the sidecar exists) reads its .npy
#     view: every page read is one committed state, numpy.load under the
#     sidecar's shared flock is one state, the last state is seen after the
#     attribute timeout; likewise an SChunk whose chunks python-blosc2
#     updates, appends and deletes, read as a plain file.  The array run
#     with -o locking=off must fail (the check can tell).
#  2. b2fs (-o locking=on) writes a file through the mount while
#     python-blosc2 (locking=True) reads the frame: whole-frame reads under
#     holding_lock() are exactly one state, single chunks are whole; the
#     same for arrays numpy.save writes through the mount (made anew each
#     time: never missing, never without chunks).  Both writing one frame at once:
#     each b2fs commit lands or is refused with EBUSY, and the frame stays
#     whole (b2f verify, python-blosc2 reads every chunk).
#  3. Two daemons over one SOURCE (-o locking=on, as README advises for
#     several daemons): pages read through one while the other
#     writes are whole, the last commit is seen within the attribute
#     timeout; a second writer gets EBUSY with a log line naming the frame
#     and the holder.  Sidecars are never listed.  Likewise for a sparse
#     frame read with direct_io (and, without locking, no read fails).
# Each scenario runs for a bounded time (B2FS_LOCK_SECONDS, default 6).
#
# Env: B2FS, PYB2 (tests/run.sh, tests/lib.sh).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
L="$PWD/tests/pyb2_lock.py"
SECS=${B2FS_LOCK_SECONDS:-6}
T="timeout -s KILL 300"

if ! have_pyb2; then skip pyb2_lock "no python-blosc2 venv (make venv, or set PYB2)"; exit 0; fi
if [ ! -x "$B2FS" ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  skip pyb2_lock "no b2fs build, /dev/fuse or fusermount3"; exit 0
fi

TMP=$(mktemp -d /tmp/b2fs-t_pyb2_lock.XXXXXX)
SRC=$TMP/src M1=$TMP/m1 M2=$TMP/m2
mkdir -p "$SRC" "$M1" "$M2"
. tests/mount_lib.sh
cleanup() {
  unmount_all
  rm -rf "$TMP"
}
trap cleanup EXIT

# run_pair NAME WRITER... -- READER...: both at once, their lines printed.
run_pair() {
  local name=$1; shift
  local w=() r=()
  while [ "$1" != "--" ]; do w+=("$1"); shift; done
  shift
  r=("$@")
  $T "${w[@]}" >"$TMP/$name.w" 2>&1 &
  local wp=$!
  $T "${r[@]}" 2>&1
  wait $wp
  cat "$TMP/$name.w"
}

# ---- 1. python-blosc2 writes, b2fs reads -----------------------------------
mount_bg lock1 "$SRC" "$M1" "timeout=1" || { notok lock_mount "$(tail -3 "${LOGS[$M1]}")"; exit 0; }
run_pair py_writes "$PYB2" "$L" pywrite "$SRC/arr.b2nd" "$SECS" "$TMP/done1" -- \
  "$PYB2" "$L" mountread "$M1/arr.npy" "$SECS" "$TMP/done1" 1 "$SRC/arr.b2nd.b2lock"
run_pair py_appends "$PYB2" "$L" pyschunk "$SRC/log.b2frame" "$SECS" "$TMP/done1s" -- \
  "$PYB2" "$L" schunkread "$M1/log" "$SECS" "$TMP/done1s" 1 schunk_read
listed=$(ls -a "$M1")
[[ "$listed" != *b2lock* ]] && ok lock_sidecar_hidden || notok lock_sidecar_hidden "listed: $listed"
unmount_fg "$M1" lock1

# the same without locking: the check must see torn states
rm -f "$TMP/done1"
mount_bg lock1off "$SRC" "$M1" "timeout=1,locking=off" || { notok lock_mount_off "no mount"; exit 0; }
out=$(run_pair py_writes_off "$PYB2" "$L" pywrite "$SRC/arr.b2nd" "$SECS" "$TMP/done1" -- \
  "$PYB2" "$L" mountread "$M1/arr.npy" "$SECS" "$TMP/done1" 1 "$SRC/arr.b2nd.b2lock")
sed "s/^/  [locking=off] /" <<<"$out" >&2
if grep -q "^not ok mountread" <<<"$out"; then ok lock_off_detected
else notok lock_off_detected "locking=off read only whole states: the check cannot tell"; fi
unmount_fg "$M1" lock1off

# ---- 2. b2fs writes, python-blosc2 reads -------------------------------------
mount_bg lock2 "$SRC" "$M1" "timeout=1,locking=on" || { notok lock_mount_on "no mount"; exit 0; }
run_pair b2fs_writes "$PYB2" "$L" mountwrite "$M1/plain" "$SECS" "$TMP/done2" -- \
  "$PYB2" "$L" pyread "$SRC/plain.b2frame" "$SECS" "$TMP/done2"
[ -f "$SRC/plain.b2frame.b2lock" ] && ok lock_on_sidecar || notok lock_on_sidecar "no sidecar made"
# A rename through the mount takes the sidecar along: a python-blosc2
# process that holds the frame's lock while it is renamed still excludes
# b2fs's readers of the new name (a new sidecar there would split them).
rm -f "$TMP/held" "$TMP/released"
"$PYB2" "$L" holdlock "$SRC/held.b2frame" 3 "$TMP/held" "$TMP/released" >"$TMP/holdlock.out" 2>&1 &
hp=$!
for _ in $(seq 200); do [ -e "$TMP/held" ] && break; sleep 0.05; done
held_ino=$(stat -c %i "$SRC/held.b2frame.b2lock" 2>/dev/null)
mv "$M1/held" "$M1/renamed" 2>"$TMP/mv.err"
if [ -e "$TMP/released" ]; then notok rename_sidecar_excludes "the rename waited for the lock: the check cannot tell"
else
  cmp -s <(head -c 40000 /dev/zero | tr '\0' '\7') "$M1/renamed"
  same=$?
  if [ -e "$TMP/released" ] && [ "$same" = 0 ]; then ok rename_sidecar_excludes
  else notok rename_sidecar_excludes "read before python-blosc2 let go (released: $([ -e "$TMP/released" ] && echo yes || echo no), cmp $same)"; fi
fi
wait $hp
cat "$TMP/holdlock.out" >&2
if [ -n "$held_ino" ] && [ ! -e "$SRC/held.b2frame.b2lock" ] &&
  [ "$(stat -c %i "$SRC/renamed.b2frame.b2lock" 2>/dev/null)" = "$held_ino" ]; then ok rename_sidecar_moved
else notok rename_sidecar_moved "$(ls -ai "$SRC" | grep -e held -e renamed | tr '\n' ' ')"; fi
rm -f "$M1/renamed"
# removing a frame removes its sidecar, as the reference library does
rm -f "$M1/plain"
if [ ! -e "$SRC/plain.b2frame" ] && [ ! -e "$SRC/plain.b2frame.b2lock" ]; then ok unlink_sidecar
else notok unlink_sidecar "left: $(ls -a "$SRC" | grep plain)"; fi
# two writers: python-blosc2 and b2fs change one frame at once
run_pair clash "$PYB2" "$L" pyschunk "$SRC/both.b2frame" "$SECS" "$TMP/done2c" -- \
  "$PYB2" "$L" mountclash "$M1/both" "$SECS" "$TMP/done2c"
if "$B2F" verify "$SRC/both.b2frame" >"$TMP/verify.out" 2>&1; then ok clash_verify
else notok clash_verify "$(tail -2 "$TMP/verify.out")"; fi
$T "$PYB2" "$L" checkschunk "$SRC/both.b2frame"
# numpy.save through the mount truncates the .npy to 0 and b2fs makes the
# array anew (b2_frame_remake: built under a temporary name, renamed over
# the old file under the session's lock): python-blosc2 never finds the name
# missing nor an array without its chunks.
run_pair b2fs_saves "$PYB2" "$L" npywrite "$M1/saved.npy" "$SECS" "$TMP/done2a" -- \
  "$PYB2" "$L" pyarrayread "$SRC/saved.b2nd" "$SECS" "$TMP/done2a"
unmount_fg "$M1" lock2

# ---- 3. two daemons over one SOURCE ------------------------------------------
mount_bg d1 "$SRC" "$M1" "timeout=1,locking=on" || { notok lock_mount_d1 "no mount"; exit 0; }
mount_bg d2 "$SRC" "$M2" "timeout=1,locking=on" || { notok lock_mount_d2 "no mount"; exit 0; }
# (The reader's first lookup sweeps the directory in its daemon while the
# writer creates the frame: the creation's temporary must survive that.)
run_pair two_daemons "$PYB2" "$L" mountwrite "$M1/shared" "$SECS" "$TMP/done3" -- \
  "$PYB2" "$L" plainread "$M2/shared" "$SECS" "$TMP/done3" 1 two_daemons_read
$T "$PYB2" "$L" busy "$M1/shared" "$M2/shared" "${LOGS[$M2]}" "shared.b2frame"
unmount_fg "$M2" d2
unmount_fg "$M1" d1
# The same with a sparse frame read with direct_io: each commit renames a
# new index over the old one and then removes the chunk files only the old
# one named, so a reader must load the index it locked (not one opened
# before the lock: EIO, "chunk file N.chunk: No such file or directory").
# Without locking the reader meets such commits too: it reads again from
# the new index (never EIO).
for lk in on off; do
  mount_bg "d1s$lk" "$SRC" "$M1" "timeout=1,locking=$lk,layout=sparse,direct_io" || { notok lock_mount_d1s "no mount"; exit 0; }
  mount_bg "d2s$lk" "$SRC" "$M2" "timeout=1,locking=$lk,layout=sparse,direct_io" || { notok lock_mount_d2s "no mount"; exit 0; }
  run_pair "two_daemons_sparse_$lk" "$PYB2" "$L" mountwrite "$M1/sparse_$lk" "$SECS" "$TMP/done3s$lk" -- \
    "$PYB2" "$L" plainread "$M2/sparse_$lk" "$SECS" "$TMP/done3s$lk" 1 "two_daemons_sparse_read_$lk"
  [ -d "$SRC/sparse_$lk.b2frame" ] || notok "two_daemons_sparse_layout_$lk" "not a sparse frame"
  unmount_fg "$M2" "d2s$lk"
  unmount_fg "$M1" "d1s$lk"
done
