#!/usr/bin/env bash
# t_pyb2_old.sh - frames written by older python-blosc2 releases, the ones
# users' archives hold (2.7.1, the last 2.x, and 3.12.2, the last 3.x; each
# in build/venv-old/VERSION, made by scripts/setup-venv; skipped without).
#
# Each release writes arrays of each dtype family, under each codec and
# filter, sparse, resized with vlmeta, with its own chunk choice, an SChunk
# and (3.x) its TreeStore, DictStore and EmbedStore (tests/pyb2_old.py make).
# `b2f cat --npy` and the mount give the release's own read of each: dtype,
# shape and bytes.  Arrays and a plain file numpy writes into a mount open
# in the release as the same items.
#
# Env: B2FS, B2F, PYB2_OLD (a space-separated list of interpreters; default
# every build/venv-old/*/bin/python).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
CHECK="$PWD/tests/pyb2_old.py"

pys=()
if [ -n "${PYB2_OLD:-}" ]; then read -r -a pys <<<"$PYB2_OLD"
else for p in build/venv-old/*/bin/python; do [ -x "$p" ] && pys+=("$PWD/$p"); done; fi
usable=()
for p in "${pys[@]}"; do
  "$p" -c 'import blosc2, numpy' 2>/dev/null && usable+=("$p")
done
if [ ${#usable[@]} -eq 0 ]; then
  skip pyb2_old "no older python-blosc2 in build/venv-old (scripts/setup-venv, or set PYB2_OLD)"
  exit 0
fi
if [ ! -x "$B2F" ]; then skip pyb2_old "$B2F is not built"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_pyb2_old.XXXXXX)
MNT=$TMP/mnt
mkdir -p "$MNT"
. tests/mount_lib.sh
cleanup() {
  unmount_all
  rm -rf "$TMP"
}
trap cleanup EXIT
can_mount=1
if [ ! -x "$B2FS" ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  can_mount=0
fi

for py in "${usable[@]}"; do
  v=$("$py" -c 'import blosc2; print(blosc2.__version__)')
  SRC=$TMP/$v/src CAT=$TMP/$v/cat NEW=$TMP/$v/new
  mkdir -p "$CAT" "$NEW"
  if ! timeout 300 "$py" "$CHECK" make "$SRC" 2>"$TMP/make.log"; then
    notok "old${v}_make" "$(tail -3 "$TMP/make.log")"
    continue
  fi
  ok "old${v}_make"
  bad=""
  while read -r n; do
    "$B2F" cat --npy "$SRC/$n" >"$CAT/${n%.b2nd}.npy" 2>>"$TMP/cat.log" || bad="$bad $n"
  done <"$SRC/arrays.txt"
  "$B2F" cat "$SRC/s.b2frame" >"$CAT/s" 2>>"$TMP/cat.log" || bad="$bad s.b2frame"
  [ -z "$bad" ] && ok "old${v}_cat_runs" || notok "old${v}_cat_runs" "b2f cat failed:$bad"
  timeout 300 "$py" "$CHECK" npy "$SRC" "$CAT"

  if [ "$can_mount" = 0 ]; then skip "old${v}_mount" "no b2fs build, /dev/fuse or fusermount3"; continue; fi
  if ! mount_bg "old$v" "$SRC" "$MNT" "timeout=0"; then
    notok "old${v}_mount" "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
    continue
  fi
  timeout 300 "$py" "$CHECK" npy "$SRC" "$MNT"
  unmount_fg "$MNT" "old$v"

  if ! mount_bg "old${v}w" "$NEW" "$MNT" "timeout=0"; then
    notok "old${v}_write_mount" "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
    continue
  fi
  if timeout 300 "$py" "$CHECK" write "$MNT" 2>"$TMP/write.log"; then ok "old${v}_write"
  else notok "old${v}_write" "$(tail -3 "$TMP/write.log")"; fi
  unmount_fg "$MNT" "old${v}w"
  timeout 300 "$py" "$CHECK" open "$NEW"
done
