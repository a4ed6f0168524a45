#!/usr/bin/env bash
# t_posix.sh - POSIX conformance of the namespace calls through the mount,
# compared with a plain directory and with bindfs over one.
#
# tests/posix_check.py runs the same checks (modes under umask 0, names
# over NAME_MAX, paths near PATH_MAX, set-user-ID cleared by others'
# writes, hard links, the errors of each call, sticky directories, the
# times each call updates) in a plain directory, in a bindfs mount of one
# (when bindfs is installed: apt-get install bindfs) and in a b2fs mount,
# as root with umask 0 and -o allow_other,default_permissions.  A check
# that passes on the plain directory or on bindfs must pass on b2fs; one
# that fails on both references is reported as skipped.  Regular files
# created in the b2fs mount are frames in SOURCE.
#
# Env: B2FS (set by tests/run.sh); POSIX_ONLY=WORD runs the checks whose
# group name contains WORD.
set -u
cd "$(dirname "$0")/.."
B2FS=${B2FS:-$PWD/build/san/b2fs}
PY=${PY:-/usr/bin/python3}
T="timeout -s KILL 600"

if [ "$(id -u)" != 0 ]; then echo "skip posix: needs root (another user, allow_other)"; exit 0; fi
if [ ! -x "$B2FS" ]; then echo "skip posix: b2fs is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skip posix: no /dev/fuse or fusermount3"; exit 0
fi
if ! id -u nobody >/dev/null 2>&1; then echo "skip posix: no user nobody"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_posix.XXXXXX)
chmod 755 "$TMP" # nobody must reach the directories checked
. tests/mount_lib.sh
sha() { sha256sum | cut -d" " -f1; }
check() { local n=$1; shift; if "$@"; then ok "$n"; else nok "$n" "failed: $*"; fi; }
BPID=
cleanup() {
  mountpoint -q "$TMP/bmnt" 2>/dev/null && fusermount3 -u "$TMP/bmnt"
  unmount_all
  [ -n "${KEEP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
mkdir -p "$TMP/plain" "$TMP/bsrc" "$TMP/bmnt" "$TMP/src" "$TMP/mnt"
chmod 755 "$TMP"/*

# Checks that fail on b2fs for a reason it documents (README, "POSIX
# behaviour"): reported as skipped with that reason ("NAME) echo why ;;").
known() {
  case "$1" in
    exchange_file_dir) echo "RENAME_EXCHANGE of a frame and a plain directory: their source names are of two kinds (EINVAL)" ;;
    longname_rename_255) echo "rename(2) of a frame to a name no frame suffix fits after (253-255 bytes): EXDEV, mv copies it (stored plain)" ;;
    longname_frame_suffix_255) echo "a new file named NAME.b2frame of 253-255 bytes: no frame suffix fits after it, and a plain file cannot have it (ENAMETOOLONG)" ;;
    *) return 1 ;;
  esac
}

run_check() { # DIR OUT
  (cd "$TMP" && umask 0 && $T "$PY" "$OLDPWD/tests/posix_check.py" "$1" "${POSIX_ONLY:-}") >"$2" 2>&1
}

run_check "$TMP/plain" "$TMP/plain.out"
have_bindfs=0
if command -v bindfs >/dev/null && bindfs -o allow_other,default_permissions "$TMP/bsrc" "$TMP/bmnt" 2>"$TMP/bindfs.log"; then
  have_bindfs=1
  run_check "$TMP/bmnt" "$TMP/bindfs.out"
  fusermount3 -u "$TMP/bmnt"
else
  echo "skip posix_bindfs: bindfs not installed (apt-get install bindfs): compared with the plain directory only"
  : >"$TMP/bindfs.out"
fi

if ! mount_bg posix "$TMP/src" "$TMP/mnt" "allow_other,default_permissions,idle_flush=100"; then
  nok posix_mount "daemon did not mount: $(head -c 300 "${LOGS[$TMP/mnt]}")"; exit 0
fi
run_check "$TMP/mnt" "$TMP/b2fs.out"

# Every check any of the three ran, in the order the references print them.
names() { sed -n 's/^ok \([^ :]*\).*/\1/p; s/^not ok \([^ :]*\):.*/\1/p' "$@"; }
passes() { grep -q "^ok $2\$" "$1"; }
declare -A seen=()
nb=0 nbad=0
while read -r n; do
  [ -n "${seen[$n]:-}" ] && continue
  seen[$n]=1
  if passes "$TMP/b2fs.out" "$n"; then ok "posix_$n"; nb=$((nb + 1)); continue; fi
  why=$(grep -m1 "^not ok $n:" "$TMP/b2fs.out" | sed 's/^not ok [^:]*: //')
  [ -n "$why" ] || why="not run on b2fs"
  refs=""
  passes "$TMP/plain.out" "$n" && refs="plain directory"
  passes "$TMP/bindfs.out" "$n" && refs="${refs:+$refs and }bindfs"
  if [ -z "$refs" ]; then
    skip "posix_$n" "fails on the references too (b2fs: $why)"
  elif k=$(known "$n"); then
    skip "posix_$n" "known: $k (b2fs: $why)"
  else
    nok "posix_$n" "$why (passes on the $refs)"; nbad=$((nbad + 1))
  fi
done < <(names "$TMP/plain.out" "$TMP/bindfs.out" "$TMP/b2fs.out")
count() { grep -c "^$1" "$2"; }
echo "# plain: $(count ok "$TMP/plain.out") ok $(count 'not ok' "$TMP/plain.out") failed;" \
     "bindfs: $(count ok "$TMP/bindfs.out") ok $(count 'not ok' "$TMP/bindfs.out") failed;" \
     "b2fs: $(count ok "$TMP/b2fs.out") ok $(count 'not ok' "$TMP/b2fs.out") failed ($nbad where a reference passes)"
unmount_fg "$TMP/mnt" posix

# ---- hard links of frames through rewrites -------------------------------------
# A linked frame is compacted (every close, compact_pct=1,compact_min=0) and
# committed empty in place: both names stay one file with the same bytes,
# the frame verifies.  A redo file left by a crash during such an in-place
# copy is finished by the next mount before the frame is read.
B2F=${B2F:-$PWD/build/san/b2f}
S2=$TMP/lsrc M2=$TMP/lmnt
mkdir -p "$S2/d" "$M2"
if mount_bg links "$S2" "$M2" "compact_pct=1,compact_min=0"; then
  head -c 3000000 /dev/urandom >"$TMP/r1"
  cp "$TMP/r1" "$M2/d/a" && ln "$M2/d/a" "$M2/d/b"
  ino_a=$(stat -c %i "$S2/d/a.b2frame")
  for i in 1 2 3 4 5; do # each close leaves dead bytes: compacted
    dd if=/dev/urandom of="$TMP/r1" bs=65536 count=8 seek=$((i * 3)) conv=notrunc status=none
    dd if="$TMP/r1" of="$M2/d/b" bs=65536 count=8 skip=$((i * 3)) seek=$((i * 3)) conv=notrunc status=none
  done
  want=$(sha <"$TMP/r1")
  check posix_link_compacted_same_file \
    test "$(stat -c %i "$S2/d/a.b2frame")" = "$ino_a" -a "$(stat -c %i "$S2/d/b.b2frame")" = "$ino_a" \
         -a "$(stat -c %h "$M2/d/a")" = 2
  check posix_link_compacted_content test "$(sha <"$M2/d/a")" = "$want" -a "$(sha <"$M2/d/b")" = "$want"
  check posix_link_compacted_shrunk test "$(stat -c %s "$S2/d/a.b2frame")" -lt 4000000
  : >"$M2/d/a" # truncated to nothing: an empty frame's commit rewrites the file
  check posix_link_emptied_same_file \
    test "$(stat -c %i "$S2/d/b.b2frame")" = "$ino_a" -a "$(stat -c %s "$M2/d/b")" = 0
  echo again >"$M2/d/b"
  check posix_link_refilled test "$(cat "$M2/d/a")" = again
  # (the last close's commit and compaction run after close() returns)
  for _ in $(seq 50); do [ -z "$(ls -A "$S2/d" | grep -v '^[ab].b2frame$')" ] && break; sleep 0.1; done
  check posix_link_no_leftovers test -z "$(ls -A "$S2/d" | grep -v '^[ab].b2frame$')"
  # A writer of a linked frame whose name is removed goes on rewriting the
  # file (emptied, refilled, compacted at close) through a hidden link,
  # which goes at its close.
  mkdir -p "$M2/w"
  out=$(cd "$TMP" && umask 0 && $T "$PY" "$OLDPWD/tests/posix_check.py" "$M2/w" link_writer_removed 2>&1)
  check posix_link_writer_removed_compacted test -n "$out" -a -z "$(echo "$out" | grep -v '^ok ')"
  [ -z "$(echo "$out" | grep -v '^ok ')" ] || echo "# $out" | head -5
  for _ in $(seq 50); do [ -z "$(ls -A "$S2/w/c001" | grep -v '^[ab].b2frame$')" ] && break; sleep 0.1; done
  check posix_link_writer_removed_no_hidden test -z "$(ls -A "$S2/w/c001" | grep -v '^[ab].b2frame$')"
  unmount_fg "$M2" links
  check posix_link_verifies "$B2F" verify "$S2/d/a.b2frame" >/dev/null
else
  nok posix_links_mount "daemon did not mount: $(head -c 300 "${LOGS[$M2]}")"
fi
# A crash in the middle of the in-place copy: the frame's file is torn,
# the redo file holds the new content.
mkdir -p "$S2/e"
head -c 500000 /dev/urandom >"$TMP/r2"
"$B2F" pack "$TMP/r2" "$S2/e/f.b2frame" >/dev/null
ln "$S2/e/f.b2frame" "$S2/e/g.b2frame"
cp "$S2/e/f.b2frame" "$S2/e/.f.b2frame.redo.b2tmp"
dd if=/dev/urandom of="$S2/e/f.b2frame" bs=4096 count=2 conv=notrunc status=none
if mount_bg redo "$S2" "$M2" "allow_other"; then
  check posix_link_redo_finished test "$(sha <"$M2/e/g")" = "$(sha <"$TMP/r2")" \
    -a ! -e "$S2/e/.f.b2frame.redo.b2tmp" -a "$(stat -c %i "$S2/e/f.b2frame")" = "$(stat -c %i "$S2/e/g.b2frame")"
  unmount_fg "$M2" redo
else
  nok posix_redo_mount "daemon did not mount: $(head -c 300 "${LOGS[$M2]}")"
fi

# ---- access times ----------------------------------------------------------------
# Listing and stat of frames are no reads of their data: the daemon's probe
# of a frame's header leaves the source's access time as it was (a plain
# directory does the same); reading the data through the mount updates it
# as the source's file system would (relatime: the access time was older
# than the modification time).
S3=$TMP/asrc M3=$TMP/amnt
mkdir -p "$S3" "$M3"
head -c 300000 /dev/urandom >"$TMP/adata"
if "$B2F" pack "$TMP/adata" "$S3/c.b2frame" >/dev/null 2>&1 &&
   "$B2F" pack --sparse "$TMP/adata" "$S3/s.b2frame" >/dev/null 2>&1; then
  for f in "$S3/c.b2frame" "$S3/s.b2frame/chunks.b2frame"; do
    touch -m -d @2000000000 "$f" && touch -a -d @1000000000 "$f"
  done
  if mount_bg atime "$S3" "$M3" "timeout=0"; then
    ls -l "$M3" >/dev/null && stat "$M3/c" "$M3/s" >/dev/null && ls -l "$M3" >/dev/null
    a1=$(stat -c %X "$S3/c.b2frame" "$S3/s.b2frame/chunks.b2frame" | tr '\n' ' ')
    cat "$M3/c" "$M3/s" >/dev/null
    a2=$(stat -c %X "$S3/c.b2frame" "$S3/s.b2frame/chunks.b2frame" | tr '\n' ' ')
    if [ "$a1" = "1000000000 1000000000 " ]; then ok posix_atime_listing_kept
    else nok posix_atime_listing_kept "access times after ls and stat: $a1(set 1000000000)"; fi
    if [ -n "$(echo "$a2" | awk '$1 > 1000000000 && $2 > 1000000000')" ]; then ok posix_atime_read_updates
    else nok posix_atime_read_updates "access times after reading: $a2"; fi
    # Times set through the mount stay as set: learning the frame's size
    # again after the change reads its header and lists a sparse frame's
    # directory, no reads of the data (was: the access time of that read,
    # at the first stat after the change).
    "$PY" -c 'import os, sys; [os.utime(p, (1500000000, 1500000000)) for p in sys.argv[1:]]' \
      "$M3/c" "$M3/s" # by path (touch sets them through an open file)
    a3=$(stat -c '%X %Y' "$M3/c" "$M3/s" "$S3/c.b2frame" "$S3/s.b2frame/chunks.b2frame" | tr '\n' ' ')
    if [ "$a3" = "1500000000 1500000000 1500000000 1500000000 1500000000 1500000000 1500000000 1500000000 " ]; then
      ok posix_atime_utime_kept
    else nok posix_atime_utime_kept "times after utime through the mount (mount c, s; source c, s): $a3"; fi
    unmount_fg "$M3" atime
  else
    nok posix_atime_mount "daemon did not mount: $(head -c 300 "${LOGS[$M3]}")"
  fi
else
  nok posix_atime_pack "b2f pack failed"
fi

# ---- a tree's life against a plain directory -------------------------------------
# tests/tree_life.py: random creates, writes, truncates, renames (NOREPLACE,
# EXCHANGE), links, symlinks, removals, mkdir/rmdir, chmod, utimensat and
# descriptors held across them, on the mount and on a plain directory,
# compared after every step, then three at once in directories of their
# own; on a locking=on mount and on a sparse one
# (with its documented differences), where the removed-open checks of
# posix_check.py run too (a sparse frame removed while open is a hidden
# directory inside the directory being removed).  Then nothing hidden is
# left in SOURCE and the frames verify.
for lay in contiguous sparse; do
  S4=$TMP/life-$lay M4=$TMP/lifemnt-$lay SH4=$TMP/lifesh-$lay
  mkdir -p "$S4" "$M4" "$SH4"
  opts="locking=on,idle_flush=50"; arg=""
  [ $lay = sparse ] && { opts="layout=sparse"; arg=sparse; }
  if mount_bg "life-$lay" "$S4" "$M4" "$opts"; then
    r=ok
    for seed in ${B2FS_TREE_LIFE_SEEDS:-1 2 3 4 5 6}; do
      rm -rf "${SH4:?}"/* "$M4"/*
      out=$($T "$PY" tests/tree_life.py "$M4" "$SH4" "$seed" "${B2FS_TREE_LIFE_OPS:-250}" $arg 2>&1 | tail -3)
      if [ "$out" != ok ]; then r=$out; break; fi
    done
    [ "$r" = ok ] && ok "tree_life_$lay" || nok "tree_life_$lay" "$r"
    # three at once, each in a directory of its own (races in the daemon)
    rm -rf "${SH4:?}"/* "$M4"/*
    lifes=()
    for k in 1 2 3; do
      mkdir -p "$M4/s$k" "$SH4/s$k"
      $T "$PY" tests/tree_life.py "$M4/s$k" "$SH4/s$k" "1$k" "${B2FS_TREE_LIFE_OPS:-250}" $arg \
        >"$TMP/life-$lay-$k.out" 2>&1 &
      lifes+=($!)
    done
    wait "${lifes[@]}" # (not the daemon)
    r=$(for k in 1 2 3; do tail -1 "$TMP/life-$lay-$k.out"; done | grep -v '^ok$' | head -1)
    [ -z "$r" ] && ok "tree_life_${lay}_concurrent" || nok "tree_life_${lay}_concurrent" "$r"
    if [ $lay = sparse ]; then
      mkdir -p "$M4/rm"
      out=$(cd "$TMP" && $T "$PY" "$OLDPWD/tests/posix_check.py" "$M4/rm" removed_open 2>&1)
      n=$(grep -c "^ok " <<<"$out")
      [ "$n" -ge 3 ] && ! grep -q "^not ok" <<<"$out" && ok posix_sparse_removed_open ||
        nok posix_sparse_removed_open "$(grep -v '^ok ' <<<"$out" | head -3)"
    fi
    unmount_fg "$M4" "life-$lay"
    left=$(find "$S4" -name '.b2fs-gone-*' -o -name '*.b2tmp' | head -3)
    [ -z "$left" ] && ok "tree_life_${lay}_nothing_left" || nok "tree_life_${lay}_nothing_left" "$left"
    "$B2F" scrub "$S4" >"$TMP/scrub-$lay.out" 2>&1 && grep -q " 0 damaged frames" "$TMP/scrub-$lay.out" &&
      ok "tree_life_${lay}_scrub" || nok "tree_life_${lay}_scrub" "$(tail -c 300 "$TMP/scrub-$lay.out")"
  else
    nok "tree_life_$lay" "cannot mount: $(head -c 300 "${LOGS[$M4]}")"
  fi
done
