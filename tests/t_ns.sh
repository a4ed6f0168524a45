#!/usr/bin/env bash
# t_ns.sh - the namespace layer seen by both programs: `b2f ls DIR` lists a
# SOURCE directory exactly as the mount shows it (names chosen by the
# collision rules of b2_ns.h, frames and arrays and sparse frames, hidden
# temporaries left out), and `b2f ls -l` tells frames, arrays and plain
# entries apart.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then echo "skip ns: b2fs or b2f is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then echo "skip ns: no /dev/fuse"; exit 0; fi
if ! have_fixtures; then echo "skip ns: no fixtures"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_ns.XXXXXX)
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
S=$TMP/src M=$TMP/mnt
mkdir -p "$S/sub" "$M"
echo hello >"$TMP/t.txt"
"$B2F" pack "$TMP/t.txt" "$S/a.b2frame" >/dev/null
cp "$S/a.b2frame" "$S/a.b2"            # both want "a": a.b2frame wins, a.b2 keeps its name
cp "$S/a.b2frame" "$S/b.b2"            # alone: shown as b
cp "$S/a.b2frame" "$S/c.b2frame"; : >"$S/c"   # c taken by a plain file: c.b2frame stays
cp "$B2FS_FIXTURES/b2nd/c128-1d.b2nd" "$S/arr.b2nd"   # shown as arr.npy
cp "$B2FS_FIXTURES/b2nd/c128-1d.b2nd" "$S/z.b2nd"; : >"$S/z.npy" # z.npy taken
sp=$(ls -d "$B2FS_FIXTURES"/sframe/*.b2frame | head -1)
cp -r "$sp" "$S/sp.b2frame"            # a sparse frame: shown as sp
mkdir "$S/notaframe.b2frame"           # a directory without an index
: >"$S/.a.b2frame.b2tmp"; : >"$S/sub/chunks.b2frame.tmp" # hidden
ln -s a.b2frame "$S/lnk.b2frame"       # a link named like a frame: a link
echo plain >"$S/plain.txt"
for d in "" /sub; do "$B2F" ls "$S$d" >"$TMP/ls$(basename "x$d").txt" 2>&1; done
want="a a.b2 arr.npy b c c.b2frame lnk.b2frame notaframe.b2frame plain.txt sp sub z.b2nd z.npy"
got=$(sort "$TMP/lsx.txt" | tr '\n' ' ' | sed 's/ $//')
check ns_ls_names test "$got" = "$want"
check ns_ls_hidden test ! -s "$TMP/lsxsub.txt"
"$B2F" ls -l "$S" >"$TMP/long.txt"
check ns_ls_long_kinds grep -qx 'frame  a  (a.b2frame)' "$TMP/long.txt"
check ns_ls_long_array grep -qx 'array  arr.npy  (arr.b2nd)' "$TMP/long.txt"
check ns_ls_long_sparse grep -qx 'frame  sp  (sp.b2frame)' "$TMP/long.txt"
check ns_ls_long_plain grep -qx 'dir    notaframe.b2frame' "$TMP/long.txt"
if mount_bg ns "$S" "$M" "ro"; then
  for d in "" /sub; do
    m=$(ls -A "$M$d" | sort | tr '\n' ' ')
    l=$("$B2F" ls "$S$d" | sort | tr '\n' ' ')
    check "ns_ls_as_mount$(echo "$d" | tr / _)" test "$m" = "$l"
  done
  unmount_fg "$M" ns
else
  notok ns_mount "daemon did not mount"
fi

# Names near NAME_MAX through a writable mount: the engine's temporaries
# for NAME.b2frame are shortened when ".NAME.b2frame.b2tmp" (and its
# ".b2lock") would pass NAME_MAX.  A frame renamed to a 245-byte name is
# emptied (the commit rewrites the file under a temporary; was EFBIG at
# close, and a remount showed the old content again); a codec set on an
# empty file of a 236-byte name remakes it (was EFBIG); nothing is left.
L=$TMP/lsrc LM=$TMP/lmnt
mkdir -p "$L" "$LM"
rep() { printf "$1%.0s" $(seq 1 "$2"); }
B=$(rep b 245) E=$(rep e 236)
if mount_bg nslong "$L" "$LM" "default_permissions"; then
  echo content >"$LM/short" && mv "$LM/short" "$LM/$B"
  check ns_long_renamed_truncate truncate -s 0 "$LM/$B"
  : >"$LM/$E"
  check ns_long_setfattr_codec setfattr -n user.b2.codec -v lz4 "$LM/$E"
  echo after >>"$LM/$E"
  unmount_fg "$LM" nslong
  if mount_bg nslong2 "$L" "$LM" "default_permissions"; then
    check ns_long_truncate_kept test "$(stat -c %s "$LM/$B")" = 0
    check ns_long_codec_kept test "$(getfattr --only-values -n user.b2.codec "$LM/$E" 2>/dev/null)" = lz4 \
      -a "$(cat "$LM/$E")" = after
    unmount_fg "$LM" nslong2
  else
    notok ns_long_remount "daemon did not mount"
  fi
  check ns_long_no_leftovers test -z "$(ls -A "$L" | grep -v -e "^$B.b2frame\$" -e "^$E.b2frame\$")"
else
  notok ns_long_mount "daemon did not mount"
fi

# ---- frame suffixes on what is no frame -----------------------------------
# A file with a frame suffix that does not start like a frame (text, empty,
# another format; a directory whose chunks.b2frame is such) is the plain
# entry it is: its own name, bytes and size, writable.  One that starts
# like a frame but is damaged (a chunk, the magic, cut after the header's
# start) keeps its short name and fails with EIO, logged with its name.
S2=$TMP/src2 M2=$TMP/mnt2
mkdir -p "$S2/sdir.b2frame" "$M2"
echo "hello, world!" >"$S2/notes.b2"
echo "plain text" >"$S2/y.b2nd"
printf 'z\n' >"$S2/z.b2frame"
: >"$S2/e.b2frame"
printf '\211PNG\r\n\032\n\0\0\0\rIHDR' >"$S2/g.b2f"
echo plain >"$S2/pair"; echo "not a frame" >"$S2/pair.b2"
echo "no index" >"$S2/sdir.b2frame/chunks.b2frame"; echo x >"$S2/sdir.b2frame/00000000.chunk"
cp "$B2FS_FIXTURES/bad/chunk-cbytes-lie.b2frame" "$S2/dmg.b2frame"
cp "$B2FS_FIXTURES/bad/bad-magic.b2frame" "$S2/bm.b2frame"
head -c 40 "$B2FS_FIXTURES/cframe/blosclz-clevel1-i32.b2frame" >"$S2/trunc.b2frame"
foreign="notes.b2 y.b2nd z.b2frame e.b2frame g.b2f pair.b2"
if mount_bg ns2 "$S2" "$M2" "default_permissions"; then
  # lookups before any listing, then the listing: the same answer
  bad=""
  for f in $foreign; do
    [ "$(stat -c %s "$M2/$f" 2>&1)" = "$(stat -c %s "$S2/$f")" ] || bad="$bad $f"
  done
  for f in notes y.npy z e g; do [ -e "$M2/$f" ] && bad="$bad $f-shown"; done
  check suffix_plain_lookup test -z "$bad"
  want="bm dmg e.b2frame g.b2f notes.b2 pair pair.b2 sdir.b2frame trunc y.b2nd z.b2frame"
  got=$(ls -A "$M2" | sort | tr '\n' ' ' | sed 's/ $//')
  check suffix_plain_names test "$got" = "$want"
  check suffix_plain_b2f_ls test "$("$B2F" ls "$S2" | sort | tr '\n' ' ' | sed 's/ $//')" = "$want"
  bad=""
  for f in $foreign sdir.b2frame/chunks.b2frame sdir.b2frame/00000000.chunk; do
    cmp -s "$S2/$f" "$M2/$f" || bad="$bad $f"
  done
  [ -d "$M2/sdir.b2frame" ] || bad="$bad sdir.b2frame-not-a-dir"
  [ "$(stat -c %s "$M2/pair")" = 6 ] || bad="$bad pair"
  check suffix_plain_bytes test -z "$bad"
  bad=""
  for f in dmg bm trunc; do
    n0=$(grep -c "$f.b2frame" "${LOGS[$M2]}")
    err=$(cat "$M2/$f" 2>&1 >/dev/null)
    [[ "$err" == *"Input/output error"* ]] || bad="$bad $f:'$err'"
    [ "$(grep -c "$f.b2frame" "${LOGS[$M2]}")" -gt "$n0" ] || bad="$bad $f:not-logged"
  done
  check suffix_damaged_frame_eio test -z "$bad"
  # writable as the plain files they are; a new `notes` is a frame beside
  echo more >>"$M2/notes.b2"
  echo new >"$M2/notes"
  check suffix_plain_write test "$(cat "$S2/notes.b2")" = "hello, world!
more" -a "$(cat "$M2/notes.b2")" = "$(cat "$S2/notes.b2")" -a -f "$S2/notes.b2frame" \
    -a "$(cat "$M2/notes")" = new
  # renamed in place (no copy): still plain under another frame suffix
  ino=$(stat -c %i "$S2/notes.b2")
  "$PY" -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$M2/notes.b2" "$M2/moved.b2frame" 2>"$TMP/mv.err"
  check suffix_plain_rename test "$(stat -c %i "$S2/moved.b2frame" 2>/dev/null)" = "$ino" \
    -a "$(cat "$M2/moved.b2frame" 2>/dev/null)" = "$(cat "$S2/moved.b2frame")" -a ! -e "$M2/moved"
  unmount_fg "$M2" ns2
else
  notok ns2_mount "daemon did not mount"
fi

# ---- a frame's own source name as a new name --------------------------------
# The frame a.b2frame is shown as `a`, so nothing shows as `a.b2frame`: a
# file created under that name is the frame a.b2frame.b2frame, shown as
# asked (was EEXIST), and `a` keeps its name and bytes; b2f ls and a
# remount give the same names.
S3=$TMP/src3 M3=$TMP/mnt3
mkdir -p "$S3" "$M3"
"$B2F" pack "$TMP/t.txt" "$S3/a.b2frame" >/dev/null
if mount_bg ns3 "$S3" "$M3" "default_permissions"; then
  check ns_own_name_create sh -c "echo second >'$M3/a.b2frame'"
  check ns_own_name_shown test "$(ls -A "$M3" | tr '\n' ' ')" = "a a.b2frame " \
    -a "$(cat "$M3/a" 2>&1)" = hello -a "$(cat "$M3/a.b2frame" 2>&1)" = second
  unmount_fg "$M3" ns3
  check ns_own_name_source test "$(ls -A "$S3" | tr '\n' ' ')" = "a.b2frame a.b2frame.b2frame " \
    -a "$("$B2F" ls "$S3" | sort | tr '\n' ' ')" = "a a.b2frame "
  if mount_bg ns3b "$S3" "$M3" "ro"; then
    check ns_own_name_remount test "$(ls -A "$M3" | tr '\n' ' ')" = "a a.b2frame " \
      -a "$(cat "$M3/a.b2frame" 2>&1)" = second
    unmount_fg "$M3" ns3b
  else
    notok ns3b_mount "daemon did not mount"
  fi
else
  notok ns3_mount "daemon did not mount"
fi
