#!/usr/bin/env bash
# t_rename_crash.sh - a rename through the mount that replaces a sparse
# frame (a directory, which cannot be hard-linked) moves it aside first.
# The fault-injection daemon dies right after that step
# (B2FS_CRASH_AT=rename-aside); the next mount must put the frame back
# under its name, so SOURCE holds the state from before the rename.  The
# same rename on a healthy daemon must leave the new state and no hidden
# leftover, and a frame deleted while open must still be removed by the
# next mount's sweep, not put back.
set -u
cd "$(dirname "$0")/.."
: "${B2FS:=build/san/b2fs}" "${B2F:=build/san/b2f}"
FB2FS=${B2FS_FAULTY:-build/fault/b2fs}
[ -e /dev/fuse ] || { echo "skip rename_crash: no /dev/fuse"; exit 0; }
[ -x "$FB2FS" ] || { echo "skip rename_crash: $FB2FS is not built"; exit 0; }
TMP=$(mktemp -d /tmp/b2fs-t_rename_crash.XXXXXX)
. tests/lib.sh
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
SRC=$TMP/src MNT=$TMP/mnt
mkdir -p "$SRC" "$MNT"
head -c 300000 /dev/urandom >"$TMP/a"
head -c 200000 /dev/urandom >"$TMP/b"
sum() { sha256sum <"$1" | cut -d' ' -f1; }
A=$(sum "$TMP/a") B=$(sum "$TMP/b")

# SOURCE: t.b2frame, a sparse frame holding a; x.b2frame holding b
# (sparse, or contiguous with $1 = contiguous).
setup() {
  rm -rf "${SRC:?}"/* "$SRC"/.[!.]* 2>/dev/null
  "$B2F" pack --sparse -c lz4 -t 1 --chunksize 64K "$TMP/a" "$SRC/t.b2frame" &&
    if [ "$1" = contiguous ]; then
      "$B2F" pack -c zstd -t 1 --chunksize 64K "$TMP/b" "$SRC/x.b2frame"
    else
      "$B2F" pack --sparse -c zstd -t 1 --chunksize 64K "$TMP/b" "$SRC/x.b2frame"
    fi
}
quiet() { "$@" >/dev/null 2>&1; }
hidden_count() { find "$SRC" -maxdepth 1 -name '.b2fs-gone-*' | wc -l; }

for xl in contiguous sparse; do
  n=crash_aside_$xl
  if ! setup "$xl"; then nok "$n" "pack failed"; continue; fi
  # The fault daemon dies between moving t aside and renaming x over it.
  LOGS[$MNT]=$TMP/$n.log
  B2FS_CRASH_AT=rename-aside "$FB2FS" "$SRC" "$MNT" -f -o timeout=0 2>"$TMP/$n.log" &
  dpid=$!
  for _ in $(seq 300); do mountpoint -q "$MNT" && break; sleep 0.1; done
  mv "$MNT/x" "$MNT/t" 2>/dev/null && { nok "$n" "the rename succeeded: no crash"; }
  wait "$dpid"; drc=$?
  fusermount3 -uz "$MNT" 2>/dev/null
  if [ "$drc" -ne 9 ]; then nok "$n" "daemon exited with $drc, not at the crash point"; continue; fi
  if [ -e "$SRC/t.b2frame" ] || [ "$(hidden_count)" -lt 2 ]; then
    nok "$n" "not in the window: t present or no hidden entry and marker: $(ls -A "$SRC" | tr '\n' ' ')"
    continue
  fi
  ok "${n}_window"
  # The next mount's first look into the directory puts t back.
  if ! mount_bg "$n-remount" "$SRC" "$MNT" "timeout=0"; then nok "$n" "no remount"; continue; fi
  ls "$MNT" >/dev/null
  got_t=$(sum "$MNT/t" 2>/dev/null) got_x=$(sum "$MNT/x" 2>/dev/null)
  check "${n}_t_back" [ "$got_t" = "$A" ]
  check "${n}_x_kept" [ "$got_x" = "$B" ]
  check "${n}_no_leftover" [ "$(hidden_count)" -eq 0 ]
  unmount_fg "$MNT" "${n}_remount"
  check "${n}_verify" quiet "$B2F" verify "$SRC/t.b2frame" "$SRC/x.b2frame"
done

# The same rename with a healthy daemon: the new state, nothing left over.
n=rename_over_sparse
if setup sparse && mount_bg "$n" "$SRC" "$MNT" "timeout=0"; then
  check "${n}_mv" mv "$MNT/x" "$MNT/t"
  check "${n}_t_new" [ "$(sum "$MNT/t")" = "$B" ]
  check "${n}_x_gone" [ ! -e "$MNT/x" ]
  check "${n}_no_leftover" [ "$(hidden_count)" -eq 0 ]
  unmount_fg "$MNT" "$n"
else
  nok "$n" "no mount"
fi

# A sparse frame deleted while open, then a crash: the sweep deletes it.
n=deleted_open_swept
if setup sparse && mount_bg "$n" "$SRC" "$MNT" "timeout=0"; then
  exec 7<"$MNT/t"
  rm "$MNT/t"
  kill -9 "${PIDS[$MNT]}"; wait "${PIDS[$MNT]}" 2>/dev/null
  exec 7<&-
  unset "PIDS[$MNT]"
  fusermount3 -uz "$MNT" 2>/dev/null
  check "${n}_aside" [ "$(hidden_count)" -eq 1 ]
  if mount_bg "$n-remount" "$SRC" "$MNT" "timeout=0"; then
    ls "$MNT" >/dev/null
    check "${n}_t_stays_deleted" [ ! -e "$MNT/t" ]
    check "${n}_no_leftover" [ "$(hidden_count)" -eq 0 ]
    unmount_fg "$MNT" "${n}_remount"
  else
    nok "$n" "no remount"
  fi
else
  nok "$n" "no mount"
fi
