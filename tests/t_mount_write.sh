#!/usr/bin/env bash
# t_mount_write.sh - the write path of the b2fs daemon end to end.
#
#   1. tests/mount_ex.c (random operations against a shadow file, every
#      read compared; holes punched, SEEK_DATA/SEEK_HOLE walks) on four mounts: zstd and blosclz contiguous, lz4 and
#      zstd sparse, small chunks; one with a tiny cache and compaction at
#      every close, one committing after 20 ms idle.  Then
#      tests/mount_ex_rename.py: a file written while it and its directory
#      are renamed over and over.
#   2. A mount with the default parameters: new files are NAME.b2frame,
#      renames keep the suffix (files and directories, across directories,
#      over other entries), frames removed or replaced while open stay with
#      their writer, plain files written through, .npy views refuse odd
#      sizes (EINVAL), the older layout and variable-length chunks refuse
#      writing (EROFS), a frame of
#      another codec keeps it, mkdir/rmdir, chmod/chown/touch, symlinks,
#      statfs, truncate, user.b2.* parameters and vlmeta, hidden engine
#      temporaries; cp -a,
#      rsync -a and tar round trips; sqlite3 databases (rollback journal and
#      WAL) pass PRAGMA integrity_check after a remount.
#   3. Compaction at the last close (new file, owner, mode, times kept;
#      fallocate's punched holes and zeroed ranges stored as zero chunks)
#      and while open (a slow appender, sqlite: the number shown kept);
#      renames between the layouts (sparse over contiguous and back, over
#      frames open for writing); leftovers of crashes (.b2fs-gone-PID-N.b2tmp
#      of dead daemons, unheld .NAME.b2tmp temporaries) removed at the
#      first listing or lookup in their directory, look-alikes kept.
#   4. Disk full (a 4 MiB tmpfs as SOURCE): ENOSPC at write, fsync or
#      close; the frame keeps its last committed content.
# After every mount, each frame left in its SOURCE passes `b2f verify` and
# no engine temporaries are left; daemon logs hold no sanitizer report.
#
# Env: B2FS, B2F, B2FS_FIXTURES, PY (set by tests/run.sh); CC for the
# exerciser; B2FS_EX_SEED replays an exerciser run, B2FS_EX_OPS sets its
# operations per mount (default 25000: 100,000 in all).
set -u
cd "$(dirname "$0")/.."
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
FIX=${B2FS_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
PY=${PY:-/usr/bin/python3}
T="timeout -s KILL 300"

if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then echo "skip mount_write: b2fs or b2f is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skip mount_write: no /dev/fuse or fusermount3"; exit 0
fi

TMP=$(mktemp -d /tmp/b2fs-t_mount_write.XXXXXX)
. tests/mount_lib.sh
SMALL=""
cleanup() {
  unmount_all
  if [ -n "$SMALL" ] && mountpoint -q "$SMALL"; then umount "$SMALL" 2>/dev/null || umount -l "$SMALL"; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# frames_in DIR: every frame in DIR (files with a frame suffix, sparse
# frame directories), one per line.
frames_in() {
  find "$1" \( -type d \( -name '*.b2frame' -o -name '*.b2f' -o -name '*.b2' -o -name '*.b2nd' \) \
                 -exec test -f '{}/chunks.b2frame' ';' -print -prune \) -o \
            \( -type f \( -name '*.b2frame' -o -name '*.b2f' -o -name '*.b2' -o -name '*.b2nd' \) -print \)
}

# verify_source NAME DIR: every frame passes b2f verify; no temporaries.
verify_source() {
  local name=$1 dir=$2 bad="" n=0 f
  while IFS= read -r f; do
    n=$((n + 1))
    $T "$B2F" verify "$f" >/dev/null 2>"$TMP/verify.err" || bad="$bad ${f#"$dir"/}($(head -c 200 "$TMP/verify.err"))"
  done < <(frames_in "$dir")
  local left
  left=$(find "$dir" \( -name '.*.b2tmp' -o -name 'chunks.b2frame.tmp' \) | head -3)
  [ -n "$left" ] && bad="$bad leftovers: $left"
  if [ -z "$bad" ]; then ok "${name}_frames_verify"; echo "  $n frames verified in ${dir#"$TMP"/}"
  else nok "${name}_frames_verify" "$bad"; fi
}

# check NAME COND...: ok when the command succeeds.
check() { local n=$1; shift; if "$@"; then ok "$n"; else nok "$n" "${CHECK_WHY:-failed}"; fi; CHECK_WHY=""; }
CHECK_WHY=""
sha() { sha256sum <"$1" | cut -c1-64; }
fsize() { stat -c %s "$1"; }

# ---- 1. the random exerciser -------------------------------------------------
EX=$TMP/mount_ex
if ${CC:-cc} -O2 -std=c11 -Wall -Wextra -Werror -o "$EX" tests/mount_ex.c 2>"$TMP/cc.log"; then
  SEED=${B2FS_EX_SEED:-$(( (RANDOM << 15) | RANDOM ))}
  NOPS=${B2FS_EX_OPS:-25000}
  echo "  exerciser seed $SEED, $NOPS operations per mount (B2FS_EX_SEED=$SEED replays)"
  i=0
  for cfg in "zstd_contig codec=zstd,clevel=1,chunksize=64K" \
             "lz4_sparse codec=lz4,chunksize=64K,layout=sparse" \
             "blosclz_contig_smallcache codec=blosclz,filters=bitshuffle,typesize=4,chunksize=64K,cache_size=2M,dirty_max=512K,compact_min=0" \
             "zstd_sparse_idle codec=zstd,clevel=3,filters=shuffle+delta,chunksize=64K,layout=sparse,idle_flush=20,timeout=0"; do
    set -- $cfg
    name=ex_$1 opts=$2 i=$((i + 1))
    src=$TMP/$name.src mnt=$TMP/$name.mnt
    mkdir -p "$src" "$mnt"
    if ! mount_bg "$name" "$src" "$mnt" "$opts"; then
      nok "$name" "daemon did not mount: $(head -c 300 "${LOGS[$mnt]}")"; continue
    fi
    if $T "$EX" "$mnt/file" "$TMP/$name.shadow" $((SEED + i)) "$NOPS" 65536 >"$TMP/$name.out" 2>&1; then
      ok "$name"; sed -n 's/^done/  done/p' "$TMP/$name.out"
    else
      nok "$name" "$(head -c 2000 "$TMP/$name.out")"
    fi
    unmount_fg "$mnt" "$name"
    verify_source "$name" "$src"
    if cmp -s <($T "$B2F" cat "$src/file.b2frame" 2>/dev/null) "$TMP/$name.shadow"; then ok "${name}_source_content"
    else nok "${name}_source_content" "the frame in SOURCE differs from the shadow file"; fi
    rm -rf "$src" "$TMP/$name.shadow"
  done
else
  echo "skip exerciser: cannot compile tests/mount_ex.c: $(head -c 200 "$TMP/cc.log")"
fi

# Renames of a file being written and of its directory.
R=$TMP/rsrc
mkdir -p "$R" "$TMP/rmnt"
if mount_bg renames "$R" "$TMP/rmnt" "chunksize=64K,timeout=0,idle_flush=10,compact_min=0"; then
  out=$($T "$PY" tests/mount_ex_rename.py "$TMP/rmnt" "${SEED:-1}" 2000 2>&1)
  if [[ "$out" == ok* ]]; then ok renames_while_writing; echo "  ${out#ok }"
  else nok renames_while_writing "$out"; fi
  unmount_fg "$TMP/rmnt" renames
  verify_source renames "$R"
  n=$(frames_in "$R" | wc -l)
  CHECK_WHY="$n frames in SOURCE: $(cd "$R" && find . -name '*.b2frame' | tr '\n' ' ')"
  check renames_one_frame_left test "$n" = 1
fi

# ---- 2. the default parameters: names, attributes, tools ----------------------
S=$TMP/src M=$TMP/mnt
mkdir -p "$S" "$M"
have_fix=0
[ -f "$FIX/manifest.tsv" ] && have_fix=1
if [ $have_fix = 1 ]; then
  cp "$FIX/b2nd/u8-2d-400x3.b2nd" "$S/arr.b2nd"
  cp "$FIX/legacy/legacy-zstd-shuffle-odd.b2frame" "$S/leg.b2frame"
  cp "$FIX/cframe/lz4-shuffle-f64.b2frame" "$S/l4.b2frame"
  cp "$FIX/reference/varchunks-lz4-3.0.0.b2frame" "$S/vc.b2frame"
fi
printf 'abc' >"$S/notes.txt"
printf 'plaintext\n' >"$S/plain.txt"
: >"$S/.left.b2tmp"
if ! mount_bg main "$S" "$M" "timeout=1"; then
  nok main_mount "daemon did not mount: $(head -c 300 "${LOGS[$M]}")"; exit 0
fi

# New files are frames with the mount's parameters.
echo hello >"$M/a"
xa() { getfattr --only-values -n "user.b2.$1" "$2" 2>/dev/null; }
CHECK_WHY="source: $(ls "$S" | tr '\n' ' ')"
check new_file_is_frame test -f "$S/a.b2frame" -a ! -e "$S/a" -a "$(cat "$M/a")" = hello
if command -v getfattr >/dev/null; then
  got="$(xa codec "$M/a") $(xa clevel "$M/a") $(xa filters "$M/a") $(xa typesize "$M/a") $(xa chunksize "$M/a")"
  CHECK_WHY="got $got"
  check new_file_defaults test "$got" = "zstd 1 shuffle 8 1048576"
fi
# Hidden temporaries, and the listing shows frames by their short names.
listed=$(ls -A "$M" | sort | tr '\n' ' ')
CHECK_WHY="listed: $listed"
check listing_hides_temporaries test "$listed" = \
  "$( ([ $have_fix = 1 ] && echo "arr.npy l4 leg vc"; echo "a notes.txt plain.txt") | tr ' ' '\n' | sort | tr '\n' ' ')"
rm "$S/.left.b2tmp"

# Renames keep the frame suffix, across directories, and directories move.
mv "$M/a" "$M/b"; mkdir "$M/d1"; mv "$M/b" "$M/d1/c"; mv "$M/d1" "$M/d2"
CHECK_WHY="source: $(cd "$S" && find . | sort | tr '\n' ' ')"
check rename_keeps_suffix test -f "$S/d2/c.b2frame" -a ! -e "$S/a.b2frame" -a ! -e "$S/b.b2frame" \
  -a "$(cat "$M/d2/c")" = hello
echo first >"$M/p"; echo second >"$M/q"; mv "$M/p" "$M/q"
CHECK_WHY="q: $(cat "$M/q"), source: $(ls "$S" | tr '\n' ' ')"
check rename_over_frame test "$(cat "$M/q")" = first -a -f "$S/q.b2frame" -a ! -e "$S/p.b2frame"
echo frame >"$M/r"; mv "$M/notes.txt" "$M/n2.txt"; mv "$M/r" "$M/n2.txt"
CHECK_WHY="n2.txt: $(cat "$M/n2.txt"), source: $(ls "$S" | tr '\n' ' ')"
check rename_frame_over_plain test "$(cat "$M/n2.txt")" = frame -a -f "$S/n2.txt.b2frame" -a ! -e "$S/n2.txt"
printf 'abc' >"$S/notes.txt"
# A plain file moved to a frame suffix would become a frame: mv copies it.
mv "$M/plain.txt" "$M/plain.b2"
CHECK_WHY="plain.b2: $(cat "$M/plain.b2" 2>&1), source: $(ls "$S" | tr '\n' ' ')"
check rename_plain_to_suffix test "$(cat "$M/plain.b2")" = plaintext -a -f "$S/plain.b2.b2frame" -a ! -e "$S/plain.txt"

# Frames removed or replaced while open for writing stay with their writer
# (hidden), even when the engine rewrites them (an emptied frame), and go
# when it closes them.
out=$($T "$PY" - "$M" <<'EOF'
import os, sys, time
m = sys.argv[1]
fd = os.open(os.path.join(m, "u"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"abc" * 10000)
os.fsync(fd)
os.unlink(os.path.join(m, "u"))
os.ftruncate(fd, 0)
os.fsync(fd)
os.pwrite(fd, b"zzz", 0)
os.fsync(fd)
bad = []
if os.pread(fd, 10, 0) != b"zzz": bad.append("unlinked file reads wrong")
if "u" in os.listdir(m): bad.append("unlinked file came back")
fd2 = os.open(os.path.join(m, "v"), os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd2, b"v" * 100)
os.fsync(fd2)
with open(os.path.join(m, "w"), "wb") as f:
    f.write(b"w" * 50)
os.rename(os.path.join(m, "w"), os.path.join(m, "v"))
os.ftruncate(fd2, 0)
os.fsync(fd2)
os.pwrite(fd2, b"still", 0)
os.fsync(fd2)
if open(os.path.join(m, "v"), "rb").read() != b"w" * 50: bad.append("renamed-over name clobbered")
if os.pread(fd2, 10, 0) != b"still": bad.append("replaced file reads wrong")
os.close(fd)
os.close(fd2)
print("; ".join(bad) or "ok")
EOF
)
if [ "$out" = ok ]; then ok removed_while_open; else nok removed_while_open "$out"; fi
for _ in $(seq 50); do [ -z "$(find "$S" -maxdepth 1 -name '.b2fs-gone-*')" ] && break; sleep 0.1; done
CHECK_WHY="left: $(find "$S" -maxdepth 1 -name '.b2fs-gone-*')"
check removed_while_open_gone_after_close test -z "$(find "$S" -maxdepth 1 -name '.b2fs-gone-*')" -a ! -e "$S/u.b2frame"

# Plain files are written through as they are.
echo def >>"$M/notes.txt"
CHECK_WHY="source: $(od -c "$S/notes.txt" | head -2)"
check plain_write_through test "$(cat "$S/notes.txt")" = "abcdef"

# Bytes appended to an array's .npy view that end inside a row are kept
# as they are (a plain frame of them; t_mount_npy.sh has the rest); the
# older layout refuses writing; another codec is kept.
if [ $have_fix = 1 ]; then
  cp "$M/arr.npy" "$TMP/arr.want"; echo x >>"$TMP/arr.want"
  e1=$( (echo x >>"$M/arr.npy") 2>&1); e3=$( (echo x >>"$M/leg") 2>&1)
  e4=$( (echo x >>"$M/vc") 2>&1)
  CHECK_WHY="got: $e1 / $e3 / $e4; $(ls "$S" | tr '\n' ' ')"
  check readonly_kinds_erofs test "$(sha "$M/arr.npy")" = "$(sha "$TMP/arr.want")" -a -f "$S/arr.npy.b2frame" -a \
    "$(sha "$S/leg.b2frame")" = "$(sha "$FIX/legacy/legacy-zstd-shuffle-odd.b2frame")" -a \
    "$(sha "$S/vc.b2frame")" = "$(sha "$FIX/reference/varchunks-lz4-3.0.0.b2frame")"
  [[ -z "$e1" && "$e3$e4" == *"Read-only file system"*"Read-only file system"* ]] ||
    nok readonly_kinds_erofs_errno "$e1 / $e3 / $e4"
  $T "$B2F" cat "$FIX/cframe/lz4-shuffle-f64.b2frame" >"$TMP/l4.want"
  printf 'PATCHED!' | dd of="$M/l4" bs=1 seek=100000 conv=notrunc status=none
  printf 'PATCHED!' | dd of="$TMP/l4.want" bs=1 seek=100000 conv=notrunc status=none
  CHECK_WHY="codec $(xa codec "$M/l4" 2>/dev/null)"
  check existing_codec_kept test "$(sha "$M/l4")" = "$(sha "$TMP/l4.want")" -a \
    "$($B2F info "$S/l4.b2frame" 2>/dev/null | awk '$1 == "codec" {print $2}')" = lz4
fi

# Directories, modes, owners, times, links, sizes.
mkdir "$M/dx"; d1=$([ -d "$S/dx" ] && echo made); rmdir "$M/dx"
mkdir "$M/dy"; : >"$S/dy/.z.b2frame.b2tmp"; shown=$(ls -A "$M/dy"); rmdir "$M/dy"
CHECK_WHY="dx $d1, dy showed '$shown', source: $(ls -A "$S" | tr '\n' ' ')"
check mkdir_rmdir test "$d1" = made -a ! -e "$S/dx" -a -z "$shown" -a ! -e "$S/dy"
echo data >"$M/m"
chmod 640 "$M/m"; chown 1234:2345 "$M/m"; touch -d '2001-02-03 04:05:06 UTC' "$M/m"
want=$(date -d '2001-02-03 04:05:06 UTC' +%s)
CHECK_WHY="mount: $(stat -c '%a %u %g %Y' "$M/m"), source: $(stat -c '%a %u %g %Y' "$S/m.b2frame")"
check chmod_chown_utimens test "$(stat -c '%a %u %g %Y' "$M/m")" = "640 1234 2345 $want" -a \
  "$(stat -c '%a %u %g %Y' "$S/m.b2frame")" = "640 1234 2345 $want"
ln -s some/target "$M/ln"
CHECK_WHY="readlink: $(readlink "$M/ln")"
check symlink_readlink test "$(readlink "$M/ln")" = some/target -a -L "$S/ln"
CHECK_WHY="$(stat -f -c '%b %S' "$M") vs $(stat -f -c '%b %S' "$S")"
check statfs test "$(stat -f -c '%b %S' "$M")" = "$(stat -f -c '%b %S' "$S")"
head -c 100000 /dev/urandom >"$TMP/t.bin"; cp "$TMP/t.bin" "$M/t"
truncate -s 5000000 "$M/t"; truncate -s 5000000 "$TMP/t.bin"
g1=$(fsize "$M/t") t1=$(sha "$M/t") t2=$(sha "$TMP/t.bin")
truncate -s 777 "$M/t"; truncate -s 777 "$TMP/t.bin"
CHECK_WHY="grown to $g1, shrunk to $(fsize "$M/t")"
check truncate_grow_shrink test "$g1" = 5000000 -a "$t1" = "$t2" -a "$(fsize "$M/t")" = 777 -a \
  "$(sha "$M/t")" = "$(sha "$TMP/t.bin")"

# A descriptor opened before writers of the same file (each opened, written
# and closed: the reference library writes a frame so, and reads it back
# through a descriptor it kept) reads what they wrote, small files and
# large, with their page cache or not.
CHECK_WHY=$("$PY" - "$M" 2>&1 <<'PYCODE'
import os, sys
m = sys.argv[1]
for name, n in (("kept_small", 97), ("kept_large", 3 << 20)):
    p = f"{m}/{name}"
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"A" * n, 0); os.close(fd)
    r = os.open(p, os.O_RDONLY)
    assert os.pread(r, 8, 0) == b"A" * 8
    w = os.open(p, os.O_RDWR); os.pwrite(w, b"B" * 35, n); os.close(w)
    w = os.open(p, os.O_RDWR); os.pwrite(w, b"C" * 8, 16); os.close(w)
    got = os.pread(r, 24, 0)
    assert got == b"A" * 16 + b"C" * 8, (name, got)
    assert os.pread(r, 35, n) == b"B" * 35 and os.fstat(r).st_size == n + 35
    w = os.open(p, os.O_WRONLY); os.pwrite(w, b"D" * 4, n - 2); os.close(w)
    assert os.pread(r, 8, n - 4) == b"AADDDDBB", (name, os.pread(r, 8, n - 4))
    os.close(r)
PYCODE
)
check read_sees_later_writers test -z "$CHECK_WHY"

# Parameters of one file before its first write, vlmeta at any time.
if command -v setfattr >/dev/null; then
  touch "$M/px"
  e=""
  for kv in codec=lz4 clevel=5 filters=bitshuffle typesize=4 chunksize=256K; do
    setfattr -n "user.b2.${kv%%=*}" -v "${kv#*=}" "$M/px" 2>>"$TMP/setfattr.err" || e="$e $kv"
  done
  head -c 1000000 /dev/urandom >"$TMP/px.bin"; cp "$TMP/px.bin" "$M/px"
  got="$(xa codec "$M/px") $(xa clevel "$M/px") $(xa filters "$M/px") $(xa typesize "$M/px") $(xa chunksize "$M/px")"
  CHECK_WHY="failed:$e $(cat "$TMP/setfattr.err"); got $got"
  check xattr_params_before_write test -z "$e" -a "$got" = "lz4 5 bitshuffle 4 262144" -a \
    "$(sha "$M/px")" = "$(sha "$TMP/px.bin")"
  # After the data, a good value is a copy's (cp -a, rsync -X set their
  # source's last): taken, the frame keeps its own; a bad one is refused.
  err=$(setfattr -n user.b2.codec -v zlib "$M/px" 2>&1; setfattr -n user.b2.clevel -v 9 "$M/px" 2>&1)
  err2=$(setfattr -n user.b2.codec -v nosuch "$M/px" 2>&1)
  err3=$(setfattr -n user.b2.clevel -v 12 "$M/px" 2>&1)
  CHECK_WHY="setfattr said '$err' / '$err2' / '$err3', codec $(xa codec "$M/px") $(xa clevel "$M/px")"
  check xattr_params_after_write_kept test -z "$err" -a "$(xa codec "$M/px") $(xa clevel "$M/px")" = "lz4 5" \
    -a -z "${err2##*Invalid argument*}" -a -n "$err2" -a -z "${err3##*Invalid argument*}" -a -n "$err3" \
    -a "$(sha "$M/px")" = "$(sha "$TMP/px.bin")"
  touch "$M/sp"; setfattr -n user.b2.layout -v sparse "$M/sp"; seq 1 100000 >"$M/sp"
  CHECK_WHY="source: $(ls -la "$S" | grep sp)"
  check xattr_layout_sparse test -d "$S/sp.b2frame" -a -f "$S/sp.b2frame/chunks.b2frame" -a \
    "$(sha "$M/sp")" = "$(seq 1 100000 | sha256sum | cut -c1-64)"
  # vlmeta values are msgpack objects, as python-blosc2 reads them: the
  # string "hello there", the integer 120 ("x"); bare text is refused.
  setfattr -n user.b2.vlmeta.note -v 0xab68656c6c6f207468657265 "$M/px"
  setfattr -n user.b2.vlmeta.gone -v x "$M/px"; setfattr -x user.b2.vlmeta.gone "$M/px"
  CHECK_WHY="note '$(xa vlmeta.note "$M/px")', gone '$(xa vlmeta.gone "$M/px")'"
  check xattr_vlmeta test "$(xa vlmeta.note "$M/px")" = $'\xab''hello there' -a -z "$(xa vlmeta.gone "$M/px")"
  err=$(setfattr -n user.b2.vlmeta.bad -v 'hello there' "$M/px" 2>&1)
  CHECK_WHY="setfattr said '$err', value '$(xa vlmeta.bad "$M/px")'"
  check xattr_vlmeta_not_msgpack_refused test -n "$err" -a -z "$(xa vlmeta.bad "$M/px")"
  # python-blosc2 reads them all at once, b2fs's own among them (the
  # shapes an empty .npy file waits with).
  PYB2=${PYB2:-$PWD/build/venv/bin/python}
  if [ -x "$PYB2" ] && "$PYB2" -c 'import blosc2' 2>/dev/null; then
    touch "$M/shp.npy"; setfattr -n user.b2.chunkshape -v 10,10 "$M/shp.npy"
    out=$("$PYB2" - "$S" 2>&1 <<'PY'
import sys, os, blosc2
s = sys.argv[1]
px = blosc2.open(os.path.join(s, "px.b2frame"))
assert dict(px.vlmeta)["note"] == "hello there", dict(px.vlmeta)
e = blosc2.open(os.path.join(s, [n for n in os.listdir(s) if n.startswith("shp.")][0]))
print(sorted(dict(e.vlmeta)))
PY
)
    CHECK_WHY="$out"
    check xattr_vlmeta_python_blosc2 test "$out" = "['b2fs.crc32c', 'b2fs.npy']"
    rm -f "$M/shp.npy"
  else
    echo "skip xattr_vlmeta_python_blosc2: no python-blosc2 ($PYB2)"
  fi
  # An attribute changes no modification time; cp -a (times, then
  # attributes) of a frame with one keeps its time.
  touch -d '2003-03-03 03:03:03' "$M/px"; setfattr -n user.b2.vlmeta.when -v x "$M/px"
  cp -a "$M/px" "$M/px_copy"
  want_t=$(date -d '2003-03-03 03:03:03' +%s)
  CHECK_WHY="mtime $(stat -c %Y "$M/px") / copy $(stat -c %Y "$M/px_copy"), want $want_t"
  check xattr_keeps_mtime test "$(stat -c %Y "$M/px")" = "$want_t" -a \
    "$(stat -c %Y "$M/px_copy")" = "$want_t" -a "$(xa vlmeta.when "$M/px_copy")" = x
  # What follows from the data (another frame's, as copies carry it):
  # taken, unchanged; a name b2fs does not have: refused.
  nc=$(xa nchunks "$M/px")
  err=$(setfattr -n user.b2.nchunks -v 3 "$M/px" 2>&1; setfattr -n user.b2.shape -v 7x7 "$M/px" 2>&1;
    setfattr -n user.b2.kind -v ndarray "$M/px" 2>&1)
  err2=$(setfattr -x user.b2.vlmeta.b2fs.crc32c "$M/px" 2>&1)
  err3=$(setfattr -n user.b2.nosuch -v 1 "$M/px" 2>&1)
  CHECK_WHY="setfattr said '$err' / '$err2' / '$err3'; nchunks $nc -> $(xa nchunks "$M/px"), shape '$(xa shape "$M/px")'"
  check xattr_derived_kept test -z "$err" -a -z "$err2" -a "$(xa nchunks "$M/px")" = "$nc" -a "$nc" != 3 \
    -a -z "$(xa shape "$M/px")" -a "$(xa kind "$M/px")" = schunk -a -n "$err3" -a -z "${err3##*not permitted*}" -a \
    -n "$(getfattr -n user.b2.vlmeta.b2fs.crc32c -e hex "$M/px" 2>/dev/null)"
  # A fixed-length metalayer (python-blosc2's meta=): set, one msgpack
  # object; it stays when removed.
  err=$(setfattr -n user.b2.meta.mine -v 0xa26869 "$M/px" 2>&1; setfattr -x user.b2.meta.mine "$M/px" 2>&1)
  err2=$(setfattr -n user.b2.meta.bad -v 'hello there' "$M/px" 2>&1)
  CHECK_WHY="setfattr said '$err' / '$err2'; meta.mine '$(xa meta.mine "$M/px")', meta.bad '$(xa meta.bad "$M/px")'"
  check xattr_meta_set test -z "$err" -a "$(xa meta.mine "$M/px")" = $'\xa2hi' -a -n "$err2" \
    -a -z "$(xa meta.bad "$M/px")" -a "$(sha "$M/px")" = "$(sha "$TMP/px.bin")"
  # Removing an attribute that describes the frame changes nothing (rsync
  # -X removes those its source lacks); an array's shapes on a plain frame
  # with data are a copy's (rsync's temporary file of a .npy), taken
  # unchanged; on an empty one, or malformed, a bad argument.
  err=$(setfattr -x user.b2.codec "$M/px" 2>&1)
  err2=$(setfattr -n user.b2.chunkshape -v 10 "$M/px" 2>&1)
  err3=$(setfattr -n user.b2.chunkshape -v 1,x "$M/px" 2>&1)
  touch "$M/px_empty"; err4=$(setfattr -n user.b2.blockshape -v 10 "$M/px_empty" 2>&1); rm -f "$M/px_empty"
  CHECK_WHY="remove said '$err', codec '$(xa codec "$M/px")'; chunkshape said '$err2' / '$err3' / '$err4'"
  check xattr_remove_described_noop test -z "$err" -a "$(xa codec "$M/px")" = lz4 -a \
    -z "$err2" -a -z "$(xa chunkshape "$M/px")" -a -n "$err3" -a -z "${err3##*Invalid argument*}" \
    -a -n "$err4" -a -z "${err4##*Invalid argument*}"
  if command -v rsync >/dev/null; then
    echo hi >"$TMP/rx.txt"
    out=$(rsync -X "$TMP/rx.txt" "$M/rx.txt" 2>&1); rc=$?
    CHECK_WHY="rsync -X: $rc $(head -c 300 <<<"$out")"
    check xattr_rsync_X test $rc = 0 -a "$(cat "$M/rx.txt")" = hi
  fi
  # cp -a of a FIFO: its ACL goes to the FIFO in SOURCE as on any file system.
  mkfifo "$TMP/fifo"
  out=$(cp -a "$TMP/fifo" "$M/fifo" 2>&1); rc=$?
  CHECK_WHY="cp -a: $rc $out"
  check cp_a_fifo test $rc = 0 -a -p "$S/fifo"
  rm -f "$M/fifo"
  # Another frame's storage measures (cp -a and mv copy them): taken, unchanged.
  cb=$(xa cbytes "$M/px")
  err=$(setfattr -n user.b2.cbytes -v 12345 "$M/px" 2>&1; setfattr -n user.b2.cratio -v 9.99 "$M/px" 2>&1)
  CHECK_WHY="setfattr said '$err'; cbytes $cb -> $(xa cbytes "$M/px")"
  check xattr_measures_ignored test -z "$err" -a "$(xa cbytes "$M/px")" = "$cb" -a "$cb" != 12345
  # 17000 chunks: a checksum table of 68000 bytes, over the kernel's 64 KiB
  # per attribute; `getfattr -d` still lists and dumps the rest.
  head -c $((17000 * 256)) /dev/urandom >"$TMP/many.bin"
  "$B2F" pack -c lz4 --chunksize 256 "$TMP/many.bin" "$S/many.b2frame" 2>/dev/null
  dump=$(getfattr -d -m - "$M/many" 2>&1); rc=$?
  CHECK_WHY="getfattr rc $rc: $(head -c 300 <<<"$dump")"
  check xattr_dump_big_vlmeta test $rc = 0 -a "$(xa nchunks "$M/many")" = 17000 \
    -a "$(grep -c '^user.b2.vlmeta.b2fs.crc32c' <<<"$dump")" = 0 \
    -a "$(grep -c '^user.b2.nchunks="17000"' <<<"$dump")" = 1
else
  echo "skip xattrs: setfattr/getfattr (package attr) are not installed"
fi

# Real tools: cp -a, rsync -a, tar (both ways).
TREE=$TMP/tree
mkdir -p "$TREE/sub/deeper" "$TREE/empty_dir"
head -c 3000000 /dev/urandom >"$TREE/rand"; chmod 600 "$TREE/rand"
seq 1 200000 >"$TREE/sub/text"
head -c 1000000 /dev/zero >"$TREE/zeros"
: >"$TREE/empty"
ln -s sub/text "$TREE/link"
"$PY" -c "
import math, struct, sys
sys.stdout.buffer.write(b''.join(struct.pack('<d', math.sin(i / 1000.0)) for i in range(700000)))" >"$TREE/sub/deeper/f64"
touch -d '2010-01-01 00:00:00' "$TREE/sub/text" "$TREE/rand"
# tree_sig DIR: names, types, sizes, modes and mtimes (seconds: tar keeps
# no more) of files; links.
tree_sig() {
  (cd "$1" && find . -type f -printf '%P f %s %m %Ts\n'; find . -type l -printf '%P l %l\n'; \
   find . -mindepth 1 -type d -printf '%P d %m\n') | sort
}
tool_check() { # NAME DIR [REFERENCE]
  local ref=${3:-$TREE}
  if diff -r --no-dereference "$ref" "$2" >"$TMP/diff.out" 2>&1 &&
     diff <(tree_sig "$2") <(tree_sig "$ref") >>"$TMP/diff.out"; then
    ok "$1"
  else
    nok "$1" "$(head -c 600 "$TMP/diff.out")"
  fi
}
$T cp -a "$TREE" "$M/cp" && tool_check cp_round_trip "$M/cp"
if command -v rsync >/dev/null; then
  $T rsync -a "$TREE/" "$M/rs/" && tool_check rsync_round_trip "$M/rs"
  cp -a "$TREE" "$TMP/tree2"
  echo more >>"$TMP/tree2/sub/text"; touch -d '2011-01-01' "$TMP/tree2/sub/text"; rm "$TMP/tree2/zeros"
  $T rsync -a --delete "$TMP/tree2/" "$M/rs/" && tool_check rsync_update "$M/rs" "$TMP/tree2"
else
  echo "skip rsync: not installed"
fi
mkdir "$M/tar" "$TMP/untar"
$T tar -C "$TREE" -cf - . | $T tar -C "$M/tar" -xf - && tool_check tar_into_mount "$M/tar"
$T tar -C "$M/tar" -cf - . | $T tar -C "$TMP/untar" -xf - && tool_check tar_out_of_mount "$TMP/untar"

# sqlite3: a database with a rollback journal and one in WAL mode.
SQL_N=""
if command -v sqlite3 >/dev/null; then
  sq() { $T sqlite3 "$@"; }
  for mode in delete wal; do
    db=$M/db_$mode.sqlite
    sq "$db" "pragma journal_mode=$mode; create table t(a integer primary key, b text, c real);" >/dev/null
    for k in 1 2 3 4; do
      sq "$db" "begin; $(for j in $(seq 1 250); do echo "insert into t(b, c) values (hex(randomblob(150)), $j * 0.5);"; done) commit;"
    done
    sq "$db" "update t set b = lower(b) where a % 3 = 0; delete from t where a % 7 = 0; create index ti on t(c);"
    [ $mode = delete ] && sq "$db" "vacuum;"
    SQL_N="$SQL_N $(sq "$db" 'select count(*) from t;')"
  done
  CHECK_WHY="counts$SQL_N"
  check sqlite_write test "$SQL_N" = " 858 858"
else
  echo "skip sqlite: sqlite3 is not installed"
fi

# A frame another process compacts (b2f compact: a new file renamed over
# it) while the mount knows it: opening it for writing follows its name
# at once (was EIO until the kernel's entry expired).
"$PY" - "$M/cb" <<'EOF'
import os, sys
with open(sys.argv[1], "wb") as f: f.write(b"A" * (1 << 20))
with open(sys.argv[1], "r+b") as f: f.write(b"B" * (512 << 10))
EOF
cat "$M/cb" >/dev/null
"$B2F" compact "$S/cb.b2frame" >/dev/null 2>&1
out=$("$PY" - "$M/cb" 2>&1 <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.pwrite(fd, b"C" * 10, 0)
os.close(fd)
d = open(sys.argv[1], "rb").read()
assert d == b"C" * 10 + b"B" * ((512 << 10) - 10) + b"A" * (512 << 10), len(d)
EOF
)
CHECK_WHY="$out"
check open_rw_after_compaction_behind test -z "$out"

unmount_fg "$M" main
verify_source main "$S"
# Times set through the mount (touch -d; cp -a, rsync -a and tar keep
# mtimes) leave each frame's checksum table vouching for it: a table whose
# frame's time moved otherwise reads as another program's change, vouches
# for nothing, and b2f scrub notes the frame.
scrub_dirs=()
for d in "$S/m.b2frame" "$S/px.b2frame" "$S/px_copy.b2frame" "$S/cp" "$S/rs" "$S/tar"; do [ -e "$d" ] && scrub_dirs+=("$d"); done
if scrub_out=$($T "$B2F" scrub "${scrub_dirs[@]}" 2>&1) && ! grep -q "table ignored" <<<"$scrub_out"; then ok times_set_keep_checksums
else nok times_set_keep_checksums "$(printf '%s' "$scrub_out" | head -c 600)"; fi

# Everything again after a remount.
if mount_bg main2 "$S" "$M" "timeout=1"; then
  if [ -n "$SQL_N" ]; then
    got=""
    for mode in delete wal; do
      got="$got $(sq "$M/db_$mode.sqlite" 'pragma integrity_check;') $(sq "$M/db_$mode.sqlite" 'select count(*) from t;')"
    done
    CHECK_WHY="got$got"
    check sqlite_after_remount test "$got" = " ok 858 ok 858"
  fi
  tool_check cp_after_remount "$M/cp"
  command -v getfattr >/dev/null &&
    { CHECK_WHY="note '$(xa vlmeta.note "$M/px")'"; check vlmeta_after_remount test "$(xa vlmeta.note "$M/px")" = $'\xab''hello there'; }
  unmount_fg "$M" main2
  verify_source main2 "$S"
fi

# ---- 3. compaction at the last close ------------------------------------------
C=$TMP/csrc
mkdir -p "$C"
if mount_bg compact "$C" "$M" "chunksize=64K,compact_min=0,compact_pct=25"; then
  out=$($T "$PY" - "$M/f" "$C/f.b2frame" <<'EOF'
import os, sys, time
path, src = sys.argv[1], sys.argv[2]
data = os.urandom(1 << 20)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.setxattr(path, "user.keep", b"me")  # the user's own attribute: on the file
for _ in range(4):
    os.pwrite(fd, data, 0)
    os.fsync(fd)
os.fchown(fd, 4321, 4321)
os.utime(fd, (1000000000, 1000000000))
before = os.stat(src)
os.close(fd)
for _ in range(100):  # the compaction runs when the kernel releases the file
    after = os.stat(src)
    if after.st_ino != before.st_ino:
        break
    time.sleep(0.05)
ok = (after.st_ino != before.st_ino and after.st_size < before.st_size // 2 and
      (after.st_mode & 0o7777, after.st_uid, after.st_gid, int(after.st_mtime)) ==
      (0o600, 4321, 4321, 1000000000) and open(path, "rb").read() == data and
      os.stat(path).st_mtime == after.st_mtime and
      os.getxattr(path, "user.keep") == b"me" and os.getxattr(src, "user.keep") == b"me")
print("ok" if ok else "bad: %d -> %d bytes, inode %s, mode %o, owner %d:%d, mtime %d" % (
    before.st_size, after.st_size, "new" if after.st_ino != before.st_ino else "same",
    after.st_mode & 0o7777, after.st_uid, after.st_gid, after.st_mtime))
EOF
)
  if [ "$out" = ok ]; then ok compaction_at_close; else nok compaction_at_close "$out"; fi
  # The threshold is a share of the bytes the frame stores, dead ones
  # included (counted once): 4 of 10 chunks written again leave 4 dead of
  # 14 stored (29%: compacted at 25%), 2 of 10 leave 2 of 12 (17%: kept).
  out=$($T "$PY" - "$M" "$C" <<'EOF'
import os, sys, time
mnt, src = sys.argv[1], sys.argv[2]
def write(name, again):
    data = bytearray(os.urandom(10 << 16))
    p = os.path.join(mnt, name)
    fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
    os.pwrite(fd, data, 0)
    os.fsync(fd)
    new = os.urandom(again << 16)
    os.pwrite(fd, new, 3 << 16)
    data[3 << 16:(3 + again) << 16] = new
    before = os.stat(os.path.join(src, name + ".b2frame"))
    os.close(fd)
    return p, bytes(data), before
def compacted(name, before, wait):
    for _ in range(int(wait / 0.05)):
        if os.stat(os.path.join(src, name + ".b2frame")).st_ino != before.st_ino:
            return True
        time.sleep(0.05)
    return False
p, want, before = write("t29", 4)
a = compacted("t29", before, 5)
q, want2, before2 = write("t17", 2)
b = compacted("t17", before2, 1)
good = open(p, "rb").read() == want and open(q, "rb").read() == want2
print("ok" if a and not b and good else "bad: 29%% dead %s, 17%% dead %s, content %s" % (
    "compacted" if a else "kept", "compacted" if b else "kept", good))
EOF
)
  if [ "$out" = ok ]; then ok compaction_threshold_share; else nok compaction_threshold_share "$out"; fi
  # fallocate: a hole punched, or a range zeroed, reads as zeros and its
  # chunks cost a few bytes once compacted; ZERO_RANGE past the end grows
  # the file unless KEEP_SIZE; plain growth as before; collapse and insert
  # are EOPNOTSUPP; lseek's SEEK_HOLE finds the chunks zeroed whole.  In a
  # .npy, the items punched are zeros for numpy.
  out=$($T "$PY" - "$M" "$C" <<'EOF'
import ctypes, errno, os, sys, time
import numpy as np
mnt, src = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
KEEP, PUNCH, COLLAPSE, ZERO, INSERT = 1, 2, 8, 16, 32
def fa(fd, mode, off, n):
    return 0 if libc.fallocate(fd, mode, off, n) == 0 else ctypes.get_errno()
bad = []
p, sp = os.path.join(mnt, "holes"), os.path.join(src, "holes.b2frame")
data = bytearray(os.urandom(16 << 16))
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, data, 0)
os.fsync(fd)
ino = os.stat(sp).st_ino
r = fa(fd, PUNCH | KEEP, 100000, 700000)   # chunks 2-11 whole, 1 and 12 in part
data[100000:800000] = bytes(700000)
r2 = fa(fd, ZERO | KEEP, (16 << 16) - 10, 4000)  # its end: size kept
data[-10:] = bytes(10)
got = os.pread(fd, len(data) + 10, 0)
if (r, r2) != (0, 0) or got != data: bad.append("punch %s, zero %s, content %s" % (r, r2, got == data))
r = fa(fd, ZERO, (16 << 16) - 100, 1000)  # past the end: grown
data[-100:] = bytes(100); data += bytes(900)
r2 = fa(fd, 0, 0, len(data) + 5000)       # plain growth
data += bytes(5000)
if (r, r2) != (0, 0) or os.pread(fd, len(data) + 10, 0) != data or os.fstat(fd).st_size != len(data):
    bad.append("zero past the end %s, grow %s, size %d" % (r, r2, os.fstat(fd).st_size))
for name, m in (("collapse", COLLAPSE), ("insert", INSERT), ("punch without keep", PUNCH)):
    e = fa(fd, m, 0, 1 << 16)
    if e != errno.EOPNOTSUPP: bad.append("%s: %s" % (name, errno.errorcode.get(e, e)))
os.close(fd)
for _ in range(100):  # compacted at the release: dead chunks gone, holes tiny
    st = os.stat(sp)
    if st.st_ino != ino: break
    time.sleep(0.05)
if st.st_ino == ino or st.st_size > 400000 or open(p, "rb").read() != data:
    bad.append("after close: %d bytes stored (%s), content %s" % (
        st.st_size, "compacted" if st.st_ino != ino else "kept", open(p, "rb").read() == data))
fd = os.open(p, os.O_RDONLY)  # the chunks zeroed whole are a hole for lseek
holes = (os.lseek(fd, 0, os.SEEK_HOLE), os.lseek(fd, 2 << 16, os.SEEK_DATA))
os.close(fd)
if holes != (2 << 16, 12 << 16): bad.append("SEEK_HOLE, SEEK_DATA: %s" % (holes,))
a = np.arange(200000, dtype="<f8")
q = os.path.join(mnt, "holes.npy")
np.save(q, a)
fd = os.open(q, os.O_RDWR)
r = fa(fd, PUNCH | KEEP, 128 + 8 * 1000, 8 * 5000)
os.close(fd)
a[1000:6000] = 0
b = np.load(q)
if r or b.dtype != a.dtype or not np.array_equal(a, b): bad.append("npy punch %s, equal %s" % (r, np.array_equal(a, b)))
print("; ".join(bad) or "ok")
EOF
)
  if [ "$out" = ok ]; then ok fallocate_punch_zero; else nok fallocate_punch_zero "$out"; fi
  unmount_fg "$M" compact
  verify_source compact "$C"
  # The time set, kept through the compaction, is the one its table vouches for.
  if scrub_out=$($T "$B2F" scrub "$C/f.b2frame" 2>&1) && ! grep -q "table ignored" <<<"$scrub_out"; then ok compaction_keeps_checksums
  else nok compaction_keeps_checksums "$(printf '%s' "$scrub_out" | head -c 600)"; fi
fi
# Frames kept open are compacted while open (the compactor, in the pauses
# of the writes): a log appended to slowly, each idle commit storing its
# last chunk again, stays near its size (here 165 KB at most for 84 KB at
# the close, checked below 4 times; 464 KB without, growing with the square
# of the commits),
# keeps its mode and attributes, and its inode number through the mount
# does not change (sqlite takes a changed one for a moved database and
# refuses to write: "attempt to write a readonly database"), while the
# daemon keeps only the first version open, and none after the close (it
# kept every one, with its disk space, until the kernel forgot the inode).
C3=$TMP/c3src
mkdir -p "$C3"
if mount_bg compactopen "$C3" "$M" "idle_flush=50"; then
  out=$($T "$PY" - "$M" "$C3" "${PIDS[$M]}" <<'EOF2'
import os, random, sqlite3, sys, time
mnt, src, daemon = sys.argv[1], sys.argv[2], sys.argv[3]
def held(name):  # versions of a file the daemon keeps open after they were replaced
    fds = "/proc/%s/fd" % daemon
    return sum(1 for n in os.listdir(fds)
               if os.readlink(os.path.join(fds, n)).endswith(name + " (deleted)"))
p, sp = os.path.join(mnt, "log.txt"), os.path.join(src, "log.txt.b2frame")
random.seed(7)
f = open(p, "a")
os.chmod(p, 0o640)
os.setxattr(p, "user.keep", b"me")
ino, sino, text, biggest = os.fstat(f.fileno()).st_ino, set(), [], 0
for i in range(120):
    line = "".join("%d %s %.4f\n" % (i, random.choice(["ok", "warn", "temp="]), random.random())
                   for _ in range(100))
    f.write(line); f.flush(); text.append(line)
    time.sleep(0.03 if i % 10 else 0.4)  # a commit now and then, and the compactor's look
    st = os.stat(sp)
    biggest, _ = max(biggest, st.st_size), sino.add(st.st_ino)
same_ino = os.fstat(f.fileno()).st_ino == ino == os.stat(p).st_ino
kept = held("log.txt.b2frame")  # the first (its number is shown): 1
f.close()
time.sleep(0.3)
kept_after = held("log.txt.b2frame")
want = "".join(text).encode()
st = os.stat(sp)
log_ok = (open(p, "rb").read() == want and len(sino) > 1 and same_ino and kept <= 1 and kept_after == 0 and
          biggest < 4 * st.st_size and st.st_mode & 0o7777 == 0o640 and
          os.getxattr(sp, "user.keep") == b"me")
db = sqlite3.connect(os.path.join(mnt, "k.db"))
db.execute("create table t(a, b)")
db.commit()
dino, dsrc, err = os.stat(os.path.join(mnt, "k.db")).st_ino, set(), ""
try:
    for i in range(30):
        db.execute("insert into t values(?, ?)", (i, os.urandom(9000).hex()))
        db.commit()
        time.sleep(0.1 if i % 5 else 1.2)
        dsrc.add(os.stat(os.path.join(src, "k.db.b2frame")).st_ino)
    good = db.execute("pragma integrity_check").fetchone()[0] == "ok" and \
        db.execute("select count(*) from t").fetchone()[0] == 30
except sqlite3.Error as e:
    good, err = False, str(e)
db_ok = good and len(dsrc) > 1 and os.stat(os.path.join(mnt, "k.db")).st_ino == dino
db.close()
print("ok" if log_ok and db_ok else
      "bad: log %s (%d source inodes, %d bytes at most, %d at the end, number kept %s, "
      "%d old versions held open, %d after the close), sqlite %s %s (%d source inodes)" % (
          log_ok, len(sino), biggest, st.st_size, same_ino, kept, kept_after, db_ok, err,
          len(dsrc)))
EOF2
)
  if [ "$out" = ok ]; then ok compaction_while_open; else nok compaction_while_open "$out"; fi
  unmount_fg "$M" compactopen
  verify_source compactopen "$C3"
fi
# A rename right after the close whose compaction replaces the file, then
# an open for writing of the new name: the inode the rename moves must be
# the one that follows the compacted file (before, 1-2% of these opens
# failed with EIO for a second: "directory and name are not known").
C2=$TMP/c2src
mkdir -p "$C2"
if mount_bg compact2 "$C2" "$M" "compact_min=0,compact_pct=1"; then
  out=$($T "$PY" - "$M" <<'EOF'
import os, sys
d = sys.argv[1]
os.mkdir(os.path.join(d, "sub"))
bad = []
for i in range(300):
    a, b = os.path.join(d, "a%d" % i), os.path.join(d, "sub", "b%d" % i)
    os.close(os.open(a, os.O_CREAT | os.O_WRONLY, 0o644))
    fd = os.open(a, os.O_WRONLY)
    os.pwrite(fd, b"x" * 644, 546142)  # a second commit at close: dead bytes, compacted
    os.close(fd)
    os.rename(a, b)
    try:
        fd = os.open(b, os.O_WRONLY)
        os.pwrite(fd, b"y", 0)
        os.close(fd)
    except OSError as e:
        bad.append("%d: %s" % (i, e.strerror))
print("ok" if not bad else "%d of 300 failed: %s" % (len(bad), "; ".join(bad[:3])))
EOF
)
  if [ "$out" = ok ]; then ok rename_after_compaction_writable; else nok rename_after_compaction_writable "$out"; fi
  # The same for chown, chmod and link right after such a close: they must
  # reach the compacted file (before, most owners and modes were set on
  # the file it replaced, and some links failed with ENOENT).
  out=$($T "$PY" - "$M" "$C2" <<'EOF'
import os, sys, time
d, src = sys.argv[1], sys.argv[2]
bad = []
for i in range(200):
    a, b = os.path.join(d, "c%d" % i), os.path.join(d, "l%d" % i)
    os.close(os.open(a, os.O_CREAT | os.O_WRONLY, 0o644))
    fd = os.open(a, os.O_WRONLY)
    os.pwrite(fd, b"x" * 644, 546142)
    os.close(fd)
    os.chown(a, 1000 + i, 2000 + i)
    os.chmod(a, 0o600)
    try:
        os.link(a, b)
    except OSError as e:
        bad.append("link %d: %s" % (i, e.strerror))
time.sleep(1.5)  # the mount's attribute timeout
for i in range(200):
    for st in (os.stat(os.path.join(d, "c%d" % i)), os.stat(os.path.join(src, "c%d.b2frame" % i))):
        if (st.st_uid, st.st_gid, st.st_mode & 0o777) != (1000 + i, 2000 + i, 0o600):
            bad.append("c%d: %d:%d %o" % (i, st.st_uid, st.st_gid, st.st_mode & 0o777))
print("ok" if not bad else "%d wrong: %s" % (len(bad), "; ".join(bad[:3])))
EOF
)
  if [ "$out" = ok ]; then ok attrs_after_compaction_kept; else nok attrs_after_compaction_kept "$out"; fi
  unmount_fg "$M" compact2
  verify_source compact2 "$C2"
fi

# ---- 3b. renames between layouts -----------------------------------------------
# A sparse frame (a directory in SOURCE) renamed over a contiguous one (a
# file) and back, sparse over sparse, and over frames open for writing:
# each replaces the target like rename(2), whatever the layouts.
L=$TMP/lsrc
mkdir -p "$L"
if mount_bg layouts_sparse "$L" "$M" "layout=sparse,chunksize=64K"; then
  for n in a c e g i j; do echo "sparse $n" >"$M/$n"; done
  unmount_fg "$M" layouts_sparse
fi
if mount_bg layouts "$L" "$M" "chunksize=64K"; then
  for n in b d h k; do echo "contig $n" >"$M/$n"; done
  e1=$(mv "$M/a" "$M/b" 2>&1); e2=$(mv "$M/d" "$M/c" 2>&1); e3=$(mv "$M/e" "$M/g" 2>&1)
  CHECK_WHY="errors '$e1' '$e2' '$e3'; b '$(cat "$M/b")' c '$(cat "$M/c")' g '$(cat "$M/g")'; source: $(ls "$L" | tr '\n' ' ')"
  check rename_sparse_over_contiguous test -z "$e1" -a "$(cat "$M/b")" = "sparse a" -a -d "$L/b.b2frame" -a ! -e "$L/a.b2frame"
  check rename_contiguous_over_sparse test -z "$e2" -a "$(cat "$M/c")" = "contig d" -a -f "$L/c.b2frame" -a ! -e "$L/d.b2frame"
  check rename_sparse_over_sparse test -z "$e3" -a "$(cat "$M/g")" = "sparse e" -a -d "$L/g.b2frame" -a ! -e "$L/e.b2frame"
  # Over frames open for writing (contiguous h, sparse j): the writers keep
  # their own (hidden) frame until they close it.
  out=$($T "$PY" - "$M" <<'EOF'
import os, sys
m = sys.argv[1]
bad = []
for target, source in (("h", "i"), ("j", "k")):
    fd = os.open(os.path.join(m, target), os.O_RDWR)
    os.pwrite(fd, b"written", 0)
    os.fsync(fd)
    try:
        os.rename(os.path.join(m, source), os.path.join(m, target))
    except OSError as e:
        bad.append("%s over open %s: %s" % (source, target, e))
        continue
    os.pwrite(fd, b"WRITTEN", 0)
    os.fsync(fd)
    if os.pread(fd, 7, 0) != b"WRITTEN": bad.append("writer of %s reads wrong" % target)
    got = open(os.path.join(m, target), "rb").read()
    if got != ("%s %s\n" % ("sparse" if source == "i" else "contig", source)).encode():
        bad.append("%s reads %r" % (target, got))
    os.close(fd)
print("; ".join(bad) or "ok")
EOF
)
  if [ "$out" = ok ]; then ok rename_between_layouts_over_open; else nok rename_between_layouts_over_open "$out"; fi
  for _ in $(seq 50); do [ -z "$(find "$L" -maxdepth 1 -name '.b2fs-gone-*')" ] && break; sleep 0.1; done
  CHECK_WHY="source: $(ls -A "$L" | tr '\n' ' ')"
  check rename_between_layouts_source test "$(ls -A "$L" | tr '\n' ' ')" = "b.b2frame c.b2frame g.b2frame h.b2frame j.b2frame " \
    -a -d "$L/h.b2frame" -a -f "$L/j.b2frame"
  unmount_fg "$M" layouts
  verify_source layouts "$L"
fi

# ---- 3c. leftovers of crashes ----------------------------------------------------
# Frames a dead daemon was deleting and engine temporaries nobody holds go
# at the first listing or lookup in their directory; live daemons' entries,
# locked temporaries and look-alike names stay.
X=$TMP/xsrc
mkdir -p "$X/sub"
( : ) & wait $!; dead=$!   # a PID that just ended
echo "contig" >"$TMP/x.txt"
"$B2F" pack "$TMP/x.txt" "$X/keep.b2frame" >/dev/null 2>&1 || cp /dev/null "$X/keep.b2frame"
: >"$X/.b2fs-gone-$dead-1.b2tmp"
mkdir "$X/.b2fs-gone-$dead-2.b2tmp"; : >"$X/.b2fs-gone-$dead-2.b2tmp/00000003.chunk"
: >"$X/.x.b2frame.b2tmp"
mkdir "$X/.y.b2frame.b2tmp"; : >"$X/.y.b2frame.b2tmp/chunks.b2frame.tmp"
: >"$X/sub/.z.b2nd.b2tmp"; : >"$X/sub/.b2fs-gone-$dead-7.b2tmp"
# The temporaries of an array a dead daemon was making at a hidden name
# (a frame renamed to a name of another kind: b2_ns_convert).
: >"$X/..b2fs-gone-$dead-4.b2tmp.b2tmp"; : >"$X/...b2fs-gone-$dead-4.b2tmp.b2tmp.b2tmp"
# Sidecars a frame set aside was locked under (-o locking=on): one whose
# frame is gone goes, also with its frame; one whose frame is still there
# (a live daemon's) or that a process holds stays.
: >"$X/.b2fs-gone-$dead-3.b2tmp.b2lock"; : >"$X/.b2fs-gone-$dead-1.b2tmp.b2lock"
kept="..b2fs-gone-1-4.b2tmp.b2tmp .b2fs-gone-1-1.b2tmp .b2fs-gone-1-1.b2tmp.b2lock .b2fs-gone-1-9.b2tmp.b2lock .b2fs-gone-$dead-x.b2tmp .locked.b2frame.b2tmp .notes.b2tmp .w.b2frame.b2tmp .x.b2frame.b2tmp.bak b2fs-gone-$dead-1.b2tmp y.b2frame.b2tmp"
for n in $kept; do [ "$n" = .w.b2frame.b2tmp ] || : >"$X/$n"; done
mkdir "$X/.w.b2frame.b2tmp"; echo mine >"$X/.w.b2frame.b2tmp/user.txt"
ln -s /nonexistent "$X/.s.b2frame.b2tmp"; kept="$kept .s.b2frame.b2tmp"
# A temporary locked by a live process (as the engine locks its rewrites).
"$PY" -c "
import fcntl, os, sys, time
fds = [os.open(p, os.O_RDONLY) for p in sys.argv[1:]]
for fd in fds: fcntl.flock(fd, fcntl.LOCK_SH)
print('locked', flush=True); time.sleep(30)" "$X/.locked.b2frame.b2tmp" "$X/.b2fs-gone-1-9.b2tmp.b2lock" >"$TMP/lock.out" &
LOCKER=$!
for _ in $(seq 50); do [ -s "$TMP/lock.out" ] && break; sleep 0.1; done
if mount_bg leftovers "$X" "$M" "timeout=0"; then
  shown=$(ls -A "$M" | tr '\n' ' ')
  left=$(cd "$X" && ls -A | tr '\n' ' ')
  want=$(printf '%s\n' $kept keep.b2frame sub | LC_ALL=C sort | tr '\n' ' ')
  CHECK_WHY="left in SOURCE: '$left', want '$want'"
  check leftovers_swept_at_listing test "$(cd "$X" && ls -A | LC_ALL=C sort | tr '\n' ' ')" = "$want"
  CHECK_WHY="shown: '$shown'"
  check leftovers_listing test "$(printf '%s\n' $shown | LC_ALL=C sort | tr '\n' ' ')" = \
    "$(printf '%s\n' .x.b2frame.b2tmp.bak b2fs-gone-$dead-1.b2tmp keep sub y.b2frame.b2tmp | LC_ALL=C sort | tr '\n' ' ')"
  CHECK_WHY="sub before a lookup in it: $(ls -A "$X/sub" | tr '\n' ' ')"
  check leftovers_sub_untouched_before test -e "$X/sub/.z.b2nd.b2tmp"
  stat "$M/sub/anything" >/dev/null 2>&1
  CHECK_WHY="sub after a lookup in it: $(ls -A "$X/sub" | tr '\n' ' ')"
  check leftovers_swept_at_lookup test -z "$(ls -A "$X/sub")"
  CHECK_WHY="keep: $(cat "$M/keep" 2>&1); $(cat "$X/.w.b2frame.b2tmp/user.txt" 2>&1)"
  check leftovers_others_intact test "$(cat "$M/keep")" = contig -a "$(cat "$X/.w.b2frame.b2tmp/user.txt")" = mine
  grep -q 'removed 7 leftovers' "${LOGS[$M]}" || nok leftovers_logged "$(head -c 300 "${LOGS[$M]}")"
  unmount_fg "$M" leftovers
fi
kill "$LOCKER" 2>/dev/null; wait "$LOCKER" 2>/dev/null
# Under -o ro nothing is removed.
: >"$X/.x.b2frame.b2tmp"
if mount_bg leftovers_ro "$X" "$M" "ro"; then
  ls -A "$M" >/dev/null
  check leftovers_kept_read_only test -e "$X/.x.b2frame.b2tmp"
  unmount_fg "$M" leftovers_ro
fi

# ---- 3c2. locking=on: no sidecar without its frame --------------------------------
# A .npy whose bytes are no array falls back to a plain frame at its last
# close (NAME.b2nd renamed to NAME.npy.b2frame): its sidecar goes along.
# A frame open for writing replaced by a rename takes its locked sidecar
# aside with it.
K=$TMP/ksrc
mkdir -p "$K"
if mount_bg locking_on "$K" "$M" "locking=on"; then
  head -c 300000 /dev/urandom >"$TMP/rand.bin"
  cp "$TMP/rand.bin" "$M/r.npy"
  CHECK_WHY="r.npy reads back differently"
  check npy_fallback_locking_reads cmp -s "$TMP/rand.bin" "$M/r.npy"
  # A frame open for writing replaced by a rename: its writer's locked
  # sidecar goes aside with it, so that a writer of the new file does not
  # wait for that lock (it hung for good).
  exec 9<>"$M/held"
  echo "first" >&9
  echo "other" >"$M/other"
  mv "$M/other" "$M/held"
  timeout -s KILL 20 sh -c "echo again >'$M/held'"; rc=$?
  exec 9>&-
  CHECK_WHY="writing the new file: status $rc (137: hung), content: $(head -c 40 "$M/held" 2>&1)"
  check rename_over_writer_locking test "$rc" = 0 -a "$(cat "$M/held")" = again
  unmount_fg "$M" locking_on
  rm -f "$K/held.b2frame" "$K/held.b2frame.b2lock"
  CHECK_WHY="SOURCE: $(ls -A "$K" | tr '\n' ' ')"
  check npy_fallback_sidecar_moved test "$(ls -A "$K" | tr '\n' ' ')" = "r.npy.b2frame r.npy.b2frame.b2lock "
fi

# ---- 3d. stopped by a signal while a writer holds a frame open -------------------
# SIGTERM ends the daemon as an unmount does: the frame being written is
# committed (what was written is in SOURCE, and verifies), the mount is
# removed, the exit status is 0, and the handles of files still open (one
# written, one read) are freed (no leak reported).
G=$TMP/sig
mkdir -p "$G"
if mount_bg sig "$G" "$M" "chunksize=64K"; then
  head -c 300000 /dev/urandom >"$TMP/sig.bin"
  echo "read only" >"$M/ro"
  exec 8<"$M/ro" 9>"$M/held"
  read -r _ <&8
  cat "$TMP/sig.bin" >&9
  pid=${PIDS[$M]}
  kill -TERM "$pid"
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  exec 8<&- 9>&-
  rc=0
  wait "$pid" || rc=$?
  unset "PIDS[$M]"
  CHECK_WHY="exit status $rc, log: $(tail -c 300 "${LOGS[$M]}")"
  check signal_exit_0 test "$rc" = 0
  CHECK_WHY="still mounted"
  check signal_unmounted eval '! mountpoint -q "$M"'
  CHECK_WHY="source holds $($B2F cat "$G/held.b2frame" 2>/dev/null | wc -c) bytes"
  check signal_commits test "$($T "$B2F" cat "$G/held.b2frame" 2>/dev/null | sha256sum | cut -c1-64)" = "$(sha "$TMP/sig.bin")"
  verify_source sig "$G"
  sanitizer_clean sig_sanitizers "${LOGS[$M]}"
fi

# ---- 4. disk full ----------------------------------------------------------------
SMALL=$TMP/small
mkdir -p "$SMALL"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=4m tmpfs "$SMALL" 2>/dev/null; then
  head -c $((16 << 20)) /dev/urandom >"$TMP/full.bin"
  if mount_bg full "$SMALL" "$M" "chunksize=64K,dirty_max=1M"; then
    out=$($T "$PY" - "$M/big" "$TMP/full.bin" <<'EOF'
import errno, os, sys
path, data = sys.argv[1], open(sys.argv[2], "rb").read()
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, data[:1 << 20])
os.fsync(fd)
where, off = "nowhere", 1 << 20
try:
    while off < len(data):
        off += os.pwrite(fd, data[off:off + 65536], off)
    where = "fsync"
    os.fsync(fd)
    where = "nowhere"
except OSError as e:
    where = where if where == "fsync" else "write"
    if e.errno != errno.ENOSPC:
        print("bad: %s failed with %s" % (where, e)); sys.exit()
try:
    os.close(fd)
except OSError as e:
    if e.errno != errno.ENOSPC:
        print("bad: close failed with %s" % e); sys.exit()
    where = where if where != "nowhere" else "close"
print("ENOSPC at " + where)
EOF
)
    if [[ "$out" == "ENOSPC at "* && "$out" != *nowhere ]]; then ok enospc_reported; echo "  $out"
    else nok enospc_reported "$out"; fi
    sleep 0.5
    n=$(fsize "$M/big")
    cmp -s "$M/big" <(head -c "$n" "$TMP/full.bin") && [ "$n" -ge $((1 << 20)) ] && rc=0 || rc=1
    CHECK_WHY="size $n or content wrong"
    check enospc_committed_content test $rc = 0
    rm "$M/big"
    # The space comes back once the kernel forgets the file (asynchronously).
    for _ in $(seq 100); do
      [ "$(stat -f -c %a "$SMALL")" -gt 256 ] && break
      sleep 0.1
    done
    echo after >"$M/small"
    CHECK_WHY="$(cat "$M/small" 2>&1)"
    check enospc_space_back test "$(cat "$M/small")" = after
    unmount_fg "$M" full
    verify_source full "$SMALL"
  fi
  # The frame of a failed write keeps its last commit (checked on disk).
  if mount_bg full2 "$SMALL" "$M" "chunksize=64K"; then
    head -c $((1 << 20)) "$TMP/full.bin" >"$M/keep"
    out=$($T "$PY" - "$M/keep" "$TMP/full.bin" <<'EOF'
import os, sys
path, data = sys.argv[1], open(sys.argv[2], "rb").read()
fd = os.open(path, os.O_RDWR)
try:
    os.pwrite(fd, data[(1 << 20):], 1 << 20)
    os.fsync(fd)
except OSError:
    pass
try:
    os.close(fd)
except OSError:
    pass
EOF
)
    unmount_fg "$M" full2
    verify_source full2 "$SMALL"
    CHECK_WHY="size $($B2F cat "$SMALL/keep.b2frame" 2>/dev/null | wc -c)"
    check enospc_frame_on_disk test "$($T "$B2F" cat "$SMALL/keep.b2frame" | sha256sum | cut -c1-64)" = \
      "$(head -c $((1 << 20)) "$TMP/full.bin" | sha256sum | cut -c1-64)"
  fi
  umount "$SMALL" 2>/dev/null || umount -l "$SMALL"
else
  echo "skip disk_full: needs root to mount a small tmpfs"
fi
exit 0
