#!/usr/bin/env bash
# t_mount.sh - the b2fs daemon end to end (read path; writing is
# t_mount_write.sh).
#
# Mounts the read-only fixtures with the sanitizer build in the foreground
# (-o ro) and checks: names, every manifest frame's content (.npy views
# through numpy too), odd dd ranges against `b2f cat`, damaged frames (EIO,
# one log line, daemon alive), xattrs, du, 8 concurrent readers, EROFS.  A second mount of
# a scratch SOURCE checks name collisions, symlinks, sparse-frame modes,
# frames changed behind the mount; a third goes through
# `mount -t fuse.b2fs` (mount.fuse3), as an /etc/fstab line would.  Every
# daemon is unmounted in a trap and its log must hold no sanitizer report.
#
# Env: B2FS, B2F, B2FS_FIXTURES, PY (set by tests/run.sh).
# B2FS_TEST_BIG=1 also reads the 6 GiB frame whole.
set -u
cd "$(dirname "$0")/.."
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
FIX=${B2FS_FIXTURES:-$(cd .. && pwd)/shared/fixtures}
PY=${PY:-/usr/bin/python3}
CHECK="$PWD/tests/mount_check.py"
T="timeout -s KILL 300"

# shown PATH: the name a fixture path has under the mount (no collisions).
shown() {
  local d=${1%/*} b=${1##*/}
  [ "$d" = "$1" ] && d=""
  case "$b" in
    ?*.b2nd) b=${b%.b2nd}.npy ;;
    ?*.b2frame) b=${b%.b2frame} ;;
    ?*.b2f) b=${b%.b2f} ;;
    ?*.b2) b=${b%.b2} ;;
  esac
  echo "${d:+$d/}$b"
}

if [ ! -x "$B2FS" ]; then echo "skip mount: $B2FS is not built"; exit 0; fi
if [ ! -f "$FIX/manifest.tsv" ]; then echo "skip mount: no fixtures at $FIX"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skip mount: no /dev/fuse or fusermount3"; exit 0
fi
HAVE_B2F=0
[ -x "$B2F" ] && HAVE_B2F=1

TMP=$(mktemp -d /tmp/b2fs-t_mount.XXXXXX)
MNT=$TMP/mnt
mkdir -p "$MNT"
. tests/mount_lib.sh

cleanup() {
  unmount_all
  if [ -n "${MF_MNT:-}" ] && mountpoint -q "$MF_MNT"; then umount "$MF_MNT" 2>/dev/null || umount -l "$MF_MNT"; fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# ---- command line ------------------------------------------------------------
out=$("$B2FS" --version 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *"b2fs version"* ]] && ok opt_version || nok opt_version "rc $rc: $out"
out=$("$B2FS" --help 2>&1); rc=$?
[ $rc -eq 0 ] && [[ "$out" == *cache_size=* ]] && [[ "$out" == *allow_other* ]] && ok opt_help || nok opt_help "rc $rc"
bad=""
for args in "" "$FIX" "$FIX $MNT extra" "/nonexistent $MNT" "$FIX $MNT -o cache_size=lots" \
            "$FIX $MNT -o nthreads=0" "$FIX $MNT -o verify=maybe" "$FIX $MNT -o idle_frames=-2" \
            "$FIX $MNT -o codec=nosuch" "$FIX $MNT -o clevel=10" "$FIX $MNT -o dirty_max=lots" \
            "$FIX $MNT -o idle_flush=soon" "$FIX $MNT -o compact_pct=101" \
            "$FIX $MNT -o compact_min=lots" "$FIX $MNT -o nosuchoption"; do
  # shellcheck disable=SC2086
  out=$($T "$B2FS" $args 2>&1) && bad="$bad [$args]:accepted"
  [ -n "$out" ] || bad="$bad [$args]:silent"
  mountpoint -q "$MNT" && { fusermount3 -u "$MNT"; bad="$bad [$args]:mounted"; }
done
[ -z "$bad" ] && ok opt_errors || nok opt_errors "$bad"

# ---- the fixtures, read-only, small cache so that chunks get evicted -----
# (with every option we accept, the write-path ones included)
if ! mount_bg main "$FIX" "$MNT" "ro,cache_size=8M,max_threads=6,readahead=2,nthreads=2,verify=off,timeout=1,codec=zstd,clevel=5,filters=shuffle+delta,typesize=8,chunksize=1M,blocksize=0,layout=sparse,dirty_max=64M"; then
  nok mount_up "daemon did not mount: $(head -c 300 "${LOGS[$MNT]}")"
  exit 0
fi
ok mount_up
MAINLOG=${LOGS[$MNT]}
MAINPID=${PIDS[$MNT]}

# Mounted ro: the kernel refuses every change.
f1=$(find "$MNT/cframe" -maxdepth 1 -type f | head -1)
e1=$(touch "$MNT/new" 2>&1); e2=$( (echo hi >>"$f1") 2>&1); e3=$(mkdir "$MNT/dd" 2>&1); e4=$(rm "$f1" 2>&1)
if [[ "$e1$e2$e3$e4" == *"Read-only file system"*"Read-only file system"*"Read-only file system"*"Read-only file system"* ]] &&
   [ ! -e "$FIX/new.b2frame" ]; then
  ok ro_mount_erofs
else
  nok ro_mount_erofs "got: $e1 / $e2 / $e3 / $e4"
fi

$T "$PY" "$CHECK" listing "$FIX" "$MNT"

# Plain files pass through unchanged.
bad=""
for f in README.md manifest.tsv chunks/manifest.tsv $(cd "$FIX" && ls chunks/*.cdata | head -5); do
  cmp -s "$FIX/$f" "$MNT/$f" || bad="$bad $f"
done
if [ -z "$bad" ]; then ok passthrough_plain; else nok passthrough_plain "differ:$bad"; fi

# A damaged header: the file is shown (size 0), open fails EIO, one log line.
before=$(grep -c 'bad-magic.b2frame' "$MAINLOG")
sz=$(stat -c %s "$MNT/bad/bad-magic")
err=$($T cat "$MNT/bad/bad-magic" 2>&1 >/dev/null)
after=$(grep -c 'bad-magic.b2frame' "$MAINLOG")
if [ "$sz" = 0 ] && [[ "$err" == *"Input/output error"* ]] && [ $((after - before)) -eq 1 ]; then
  ok bad_header_eio_logged
else
  nok bad_header_eio_logged "size $sz, cat said '$err', $((after - before)) log lines"
fi

# ---- content of every manifest frame -------------------------------------
maxb=$((1 << 30))
[ "${B2FS_TEST_BIG:-0}" = 1 ] && maxb=$((1 << 40))
$T "$PY" "$CHECK" manifest "$MNT" "$FIX/manifest.tsv" "$maxb"
[ -f "$FIX/legacy/manifest.tsv" ] && $T "$PY" "$CHECK" manifest "$MNT" "$FIX/legacy/manifest.tsv" "$maxb"

# The big frame, when not read whole: reads across it give full lengths.
big=$MNT/cframe/zstd-6gib-sparse
if [ -e "$big" ] && [ "${B2FS_TEST_BIG:-0}" != 1 ]; then
  sz=$(stat -c %s "$big"); bad=""
  for off in 0 1234567891 3221225472 $((sz - 1048576)) $((sz - 5)); do
    n=$($T dd if="$big" iflag=skip_bytes,count_bytes skip="$off" count=1048576 bs=1M 2>/dev/null | wc -c)
    want=$(( sz - off < 1048576 ? sz - off : 1048576 ))
    [ "$n" -eq "$want" ] || bad="$bad $off:$n"
  done
  if [ "$sz" = 6443499520 ] && [ -z "$bad" ]; then ok big_frame_ranges; else nok big_frame_ranges "size $sz, short reads:$bad"; fi
fi

# ---- odd dd ranges against b2f cat (or the whole file read in order) ------
# range_check NAME MOUNTED SOURCE CATFLAG
range_check() {
  local name=$1 m=$2 src=$3 flag=$4 whole=$TMP/whole
  if [ "$HAVE_B2F" = 1 ]; then
    $T "$B2F" cat $flag "$src" >"$whole" 2>/dev/null || { nok "$name" "b2f cat failed"; return; }
  else
    $T cat "$m" >"$whole" || { nok "$name" "reading the whole file failed"; return; }
  fi
  local sz bad="" s c
  sz=$(stat -c %s "$whole")
  [ "$(stat -c %s "$m")" = "$sz" ] || { nok "$name" "size $(stat -c %s "$m") != $sz"; return; }
  for r in "0 1" "1 4095" "4097 100003" "262143 2" "12345 1048577" "$((sz / 2 + 7)) 65537" \
           "$((sz - 3)) 3" "$((sz - 1)) 10" "$((sz + 5)) 9"; do
    set -- $r; s=$1; c=$2
    if ! cmp -s <($T dd if="$m" iflag=skip_bytes,count_bytes skip="$s" count="$c" bs=65536 2>/dev/null) \
                <(tail -c +$((s + 1)) "$whole" | head -c "$c"); then
      bad="$bad $s+$c"
    fi
  done
  if [ -z "$bad" ]; then ok "$name"; else nok "$name" "ranges differ:$bad"; fi
}
range_check dd_cframe_zstd "$MNT/cframe/zstd-shuffle-f64" "$FIX/cframe/zstd-shuffle-f64.b2frame" ""
range_check dd_cframe_edited "$MNT/cframe/lz4-edited-i32" "$FIX/cframe/lz4-edited-i32.b2frame" ""
range_check dd_cframe_odd_tail "$MNT/cframe/zlib-shuffle-odd-tail" "$FIX/cframe/zlib-shuffle-odd-tail.b2frame" ""
range_check dd_sframe_edited "$MNT/sframe/lz4-edited-i32" "$FIX/sframe/lz4-edited-i32.b2frame" ""
range_check dd_legacy "$MNT/legacy/legacy-zstd-shuffle-odd" "$FIX/legacy/legacy-zstd-shuffle-odd.b2frame" ""
range_check dd_npy_uneven "$MNT/b2nd/f32-2d-uneven.npy" "$FIX/b2nd/f32-2d-uneven.b2nd" "--npy"
range_check dd_npy_sparse "$MNT/b2nd/sframe-f32-2d.npy" "$FIX/b2nd/sframe-f32-2d.b2nd" "--npy"

# ---- damaged frames: EIO (or the same bytes b2f gives), daemon stays up ----
# (files that do not start like a frame at all are plain: their own bytes)
bad=""; nread=0; chunkfile=""
for src in "$FIX"/bad/*; do
  b=$(basename "$src"); m=$MNT/bad/$(shown "$b")
  out=$TMP/bad.out
  if ! starts_like_frame "$src"; then # no frame at all: the plain file, its own name
    { [ ! -e "$m" ] && cmp -s "$src" "$MNT/bad/$b"; } || bad="$bad $b:not-passed-through"
    continue
  fi
  err=$($T cat "$m" 2>&1 >"$out"); rc=$?
  if [ $rc -ne 0 ]; then
    [[ "$err" == *"Input/output error"* ]] || bad="$bad $b:'$err'"
    [ "$(stat -c %s "$m")" -gt 0 ] && [ -z "$chunkfile" ] && chunkfile=$b
  else
    nread=$((nread + 1))
    if [ "$HAVE_B2F" = 1 ] && [[ "$b" != b2nd-* ]]; then
      cmp -s "$out" <($T "$B2F" cat "$src" 2>/dev/null) || bad="$bad $b:differs-from-b2f"
    fi
  fi
done
if [ -z "$bad" ]; then ok bad_frames_fail_cleanly; else nok bad_frames_fail_cleanly "$bad"; fi
if [ -n "$chunkfile" ]; then
  if grep -q "$chunkfile: read at offset [0-9]*: .*chunk [0-9]" "$MAINLOG"; then ok bad_chunk_logged
  else nok bad_chunk_logged "no log line naming $chunkfile and a chunk"; fi
else
  echo "skip bad_chunk_logged: no damaged frame opened and then failed a read"
fi
if kill -0 "$MAINPID" 2>/dev/null && mountpoint -q "$MNT" &&
   [ "$(sha256sum <"$MNT/cframe/zstd-shuffle-f64" | cut -c1-64)" = \
     "$(grep -P '^cframe/zstd-shuffle-f64.b2frame\t' "$FIX/manifest.tsv" | cut -f4)" ]; then
  ok daemon_alive_after_bad
else
  nok daemon_alive_after_bad "daemon gone or a good frame reads wrong"
fi

# ---- xattrs ----------------------------------------------------------------
xattr_tests() {
  local bad path nbytes nchunks sha shape dtype corder m dump
  xa() { getfattr --only-values -n "user.b2.$1" "$2" 2>/dev/null; }
  bad=""
  while IFS=$'\t' read -r path nbytes nchunks sha shape dtype corder; do
    case "$path" in \#*|"") continue ;; esac
    m=$MNT/$(shown "$path")
    [ "$(xa nbytes "$m")" = "$nbytes" ] || bad="$bad $path:nbytes=$(xa nbytes "$m")"
    [ "$(xa nchunks "$m")" = "$nchunks" ] || bad="$bad $path:nchunks"
    if [ "$shape" != "-" ]; then
      [ "$(xa shape "$m")" = "$shape" ] || bad="$bad $path:shape=$(xa shape "$m")"
      [ "$(xa dtype "$m")" = "$dtype" ] || bad="$bad $path:dtype"
    fi
  done <"$FIX/manifest.tsv"
  if [ -z "$bad" ]; then ok xattr_values; else nok xattr_values "${bad:0:400}"; fi
  if [ "$HAVE_B2F" = 1 ]; then $T "$PY" "$CHECK" xattrs "$MNT" "$FIX" "$B2F"
  else echo "skip xattr_vs_info: b2f is not built"; fi
  dump=$(getfattr -d -m - "$MNT/cframe/zstd-metalayers" 2>&1)
  if grep -q '^user.b2.codec="zstd"' <<<"$dump" && grep -q '^user.b2.meta\.' <<<"$dump" &&
     grep -q '^user.b2.vlmeta\.' <<<"$dump" && grep -q '^user.b2.cratio=' <<<"$dump" &&
     grep -q '^user.b2.filters=' <<<"$dump"; then
    ok xattr_dump
  else
    nok xattr_dump "getfattr -d gave: $(head -c 300 <<<"$dump")"
  fi
  if getfattr -n user.b2.nosuch "$MNT/cframe/zstd-metalayers" 2>&1 | grep -q 'No such attribute' &&
     [ -z "$(getfattr -d "$MNT/bad/bad-magic" 2>/dev/null)" ]; then
    ok xattr_missing
  else
    nok xattr_missing "unknown attribute or damaged frame not answered with ENODATA / nothing"
  fi
}
if command -v getfattr >/dev/null; then xattr_tests
else echo "skip xattrs: getfattr (package attr) is not installed"; fi

# ---- du: disk use from the compressed files, apparent size logical --------
du_b() { du -s -B1 "$@" | cut -f1; }
sp=sframe/zstd-shuffle-f64
want_disk=$(find "$FIX/$sp.b2frame" -type f -exec stat -c %b {} + | awk '{s += $1} END {print s * 512}')
got_app=$(du_b --apparent-size "$MNT/$sp"); got_disk=$(du_b "$MNT/$sp")
cf=cframe/zstd-shuffle-f64
if [ "$got_app" = 3145728 ] && [ "$got_disk" = "$want_disk" ] &&
   [ "$(du_b "$MNT/$cf")" = "$(du_b "$FIX/$cf.b2frame")" ] &&
   [ "$(du_b --apparent-size "$MNT/$cf")" = 1048576 ]; then
  ok du_sizes
else
  nok du_sizes "sparse apparent $got_app disk $got_disk (want $want_disk)"
fi

# statfs is the source file system's.
if [ "$(stat -f -c '%b %S %c' "$MNT")" = "$(stat -f -c '%b %S %c' "$FIX")" ]; then ok statfs_source
else nok statfs_source "$(stat -f -c '%b %S %c' "$MNT") vs $(stat -f -c '%b %S %c' "$FIX")"; fi

# ---- 8 threads, random ranges, ~10 s ----------------------------------------
sha_of() { grep -P "^$1\t" "$FIX/manifest.tsv" | cut -f4; }
$T "$PY" "$CHECK" conc "$MNT" 10 \
  "$MNT/cframe/zstd-shuffle-f64:$(sha_of cframe/zstd-shuffle-f64.b2frame)" \
  "$MNT/cframe/lz4-edited-i32:$(sha_of cframe/lz4-edited-i32.b2frame)" \
  "$MNT/cframe/zstd-blocksize1m-i32:$(sha_of cframe/zstd-blocksize1m-i32.b2frame)" \
  "$MNT/cframe/blosclz-shuffle-f64:$(sha_of cframe/blosclz-shuffle-f64.b2frame)" \
  "$MNT/sframe/zstd-shuffle-f64:$(sha_of sframe/zstd-shuffle-f64.b2frame)" \
  "$MNT/cframe/lz4-fill-special-zeros-nan:$(sha_of cframe/lz4-fill-special-zeros-nan.b2frame)" \
  "$MNT/b2nd/f32-2d-uneven.npy:-"
kill -0 "$MAINPID" 2>/dev/null && ok daemon_alive_after_concurrency || nok daemon_alive_after_concurrency "daemon died"

unmount_fg "$MNT" main

# ---- a scratch SOURCE: collisions, symlinks, sparse modes, EROFS, changes ---
S=$TMP/src
M2=$TMP/mnt2
mkdir -p "$S/d.b2frame" "$M2"
cp "$FIX/cframe/zstd-nofilter-f64.b2frame" "$S/x.b2frame"
echo "plain x" >"$S/x"
cp "$FIX/cframe/lz4-shuffle-f64.b2frame" "$S/y.b2frame"
cp "$FIX/cframe/zstd-shuffle-f64.b2frame" "$S/y.b2f"
cp -r "$FIX/sframe/blosclz-text.b2frame" "$S/s.b2frame"
chmod 0750 "$S/s.b2frame"
cp "$FIX/b2nd/u8-2d-400x3.b2nd" "$S/a.b2nd"
ln -s "$FIX/cframe/zstd-nofilter-f64.b2frame" "$S/esc.b2frame"
ln -s .. "$S/up"
# A sparse frame whose chunk file is a symlink out of SOURCE: never followed.
cp -r "$FIX/sframe/blosclz-text.b2frame" "$S/t.b2frame"
rm "$S/t.b2frame/00000001.chunk"
ln -s "$FIX/sframe/blosclz-text.b2frame/00000001.chunk" "$S/t.b2frame/00000001.chunk"
if ! mount_bg scratch "$S" "$M2" "timeout=0,idle_frames=0"; then
  nok scratch_mount "daemon did not mount: $(head -c 300 "${LOGS[$M2]}")"
  exit 0
fi
# The kernel's read-ahead of the mount: b2fs raises it (as root) to 4 MiB.
ra=/sys/class/bdi/$(mountpoint -d "$M2")/read_ahead_kb
if [ "$(id -u)" != 0 ] || [ ! -e "$ra" ]; then skip scratch_read_ahead "not root or no bdi in sysfs"
elif [ "$(cat "$ra")" = 4096 ]; then ok scratch_read_ahead
else nok scratch_read_ahead "read_ahead_kb is $(cat "$ra"), want 4096"; fi
names=$(cd "$M2" && ls -A | tr '\n' ' ')
if [ "$names" = "a.npy d.b2frame esc.b2frame s t up x x.b2frame y y.b2f " ]; then ok scratch_names
else nok scratch_names "listed: $names"; fi
if [ "$(cat "$M2/x")" = "plain x" ] &&
   [ "$(sha256sum <"$M2/x.b2frame" | cut -c1-64)" = "$(sha_of cframe/zstd-nofilter-f64.b2frame)" ] &&
   [ "$(sha256sum <"$M2/y" | cut -c1-64)" = "$(sha_of cframe/lz4-shuffle-f64.b2frame)" ] &&
   [ "$(sha256sum <"$M2/y.b2f" | cut -c1-64)" = "$(sha_of cframe/zstd-shuffle-f64.b2frame)" ] &&
   [ -d "$M2/d.b2frame" ] && [ ! -e "$M2/d" ] && [ ! -e "$M2/y.b2frame" ] && [ ! -e "$M2/a.b2nd" ]; then
  ok scratch_collisions
else
  nok scratch_collisions "contents or lookups of colliding names are wrong"
fi
if [ "$(stat -c '%F %a %s' "$M2/s")" = "regular file 640 1000001" ] &&
   [ "$(sha256sum <"$M2/s" | cut -c1-64)" = "$(sha_of sframe/blosclz-text.b2frame)" ]; then
  ok scratch_sparse_mode
else
  nok scratch_sparse_mode "stat says $(stat -c '%F %a %s' "$M2/s")"
fi
if [ "$(stat -c %F "$M2/esc.b2frame")" = "symbolic link" ] &&
   [ "$(readlink "$M2/esc.b2frame")" = "$FIX/cframe/zstd-nofilter-f64.b2frame" ] &&
   [ "$(readlink "$M2/up")" = ".." ] && [ "$(stat -c %F "$M2/up")" = "symbolic link" ]; then
  ok scratch_symlinks
else
  nok scratch_symlinks "symlinks not shown as themselves"
fi
err=$($T cat "$M2/t" 2>&1 >/dev/null)
if [[ "$err" == *"Input/output error"* ]] && grep -q "t.b2frame: .*00000001.chunk" "${LOGS[$M2]}"; then
  ok scratch_no_symlinked_chunks
else
  nok scratch_no_symlinked_chunks "a chunk file symlinked out of SOURCE was read (cat said '$err')"
fi
# Same logical size, new content: noticed through mtime/ctime, re-read.
exec 7<"$M2/x.b2frame"   # an open handle across the change
sha_before=$(sha256sum <"$M2/x.b2frame" | cut -c1-64)
sleep 0.05
cp "$FIX/cframe/lz4-shuffle-f64.b2frame" "$S/x.b2frame"
sha_after=$(sha256sum <"$M2/x.b2frame" | cut -c1-64)
exec 7<&-
if [ "$sha_before" = "$(sha_of cframe/zstd-nofilter-f64.b2frame)" ] &&
   [ "$sha_after" = "$(sha_of cframe/lz4-shuffle-f64.b2frame)" ]; then
  ok scratch_frame_changed
else
  nok scratch_frame_changed "after rewriting the source the mount still reads the old frame"
fi
# Replaced by rename (a new inode under the same name), different size.
cp "$FIX/cframe/zstd-blocksize1m-i32.b2frame" "$S/tmp.new" && mv "$S/tmp.new" "$S/y.b2frame"
if [ "$(stat -c %s "$M2/y")" = 4194304 ] &&
   [ "$(sha256sum <"$M2/y" | cut -c1-64)" = "$(sha_of cframe/zstd-blocksize1m-i32.b2frame)" ]; then
  ok scratch_frame_replaced
else
  nok scratch_frame_replaced "size $(stat -c %s "$M2/y") after replacing the source"
fi
unmount_fg "$M2" scratch

# ---- as an fstab line: mount(8) -> mount.fuse3 -> b2fs ---------------------
# mount(8) resets PATH before it runs mount.fuse3, so only an installed b2fs
# is found.  In a private mount namespace the build is bind-mounted over
# /usr/local/bin and a real fstab line is mounted (mount -T FILE); without
# unshare, mount.fuse3 is run the same way mount(8) runs it.
fstab_check() { # how mounted-ok sha type
  if [ "$2" = ok ] && [ "$3" = "$(sha_of cframe/zstd-blocksize1m-i32.b2frame)" ] && [ "$4" = fuse.b2fs ]; then
    ok fstab_mount
  else
    nok fstab_mount "$1: mount $2, sha256 ${3:-none}, type ${4:-none}: $(head -c 300 "$mlog")"
  fi
}
if [ "$(id -u)" = 0 ] && command -v mount.fuse3 >/dev/null; then
  MF_MNT=$TMP/mnt3
  mkdir -p "$MF_MNT" "$TMP/bin"
  ln -s "$B2FS" "$TMP/bin/b2fs"
  mlog=$TMP/mountfuse
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:log_path=$mlog.asan" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}:log_path=$mlog.ubsan"
  opts="ro,allow_other,cache_size=32M,readahead=2,nthreads=2,noatime"
  if command -v unshare >/dev/null && unshare -m true 2>/dev/null; then
    printf '%s %s fuse.b2fs %s 0 0\n' "$S" "$MF_MNT" "$opts" >"$TMP/fstab"
    # shellcheck disable=SC2016
    read -r st sha mtype < <($T unshare -m --propagation private sh -c '
      mount --bind "$1/bin" /usr/local/bin || { echo bind-failed; exit; }
      mount -T "$1/fstab" "$2" 2>"$1/mountfuse" || { echo mount-failed; exit; }
      sha=$(sha256sum <"$2/y" | cut -c1-64)
      mtype=$(grep " $2 " /proc/self/mounts | cut -d" " -f3)
      umount "$2"
      echo ok "$sha" "$mtype"' sh "$TMP" "$MF_MNT")
    fstab_check "mount -T fstab (namespace)" "$st" "${sha:-}" "${mtype:-}"
  elif PATH="$TMP/bin:$PATH" $T mount.fuse3 "$S" "$MF_MNT" -t fuse.b2fs -o "$opts" 2>"$mlog"; then
    sha=$(sha256sum <"$MF_MNT/y" | cut -c1-64)
    mtype=$(grep " $MF_MNT " /proc/mounts | cut -d" " -f3)
    umount "$MF_MNT" || umount -l "$MF_MNT"
    fstab_check "mount.fuse3" ok "$sha" "$mtype"
  else
    fstab_check "mount.fuse3" failed
  fi
  for _ in $(seq 100); do pgrep -f "b2fs $S $MF_MNT" >/dev/null || break; sleep 0.1; done
  sanitizer_clean fstab_sanitizers "$mlog".asan* "$mlog".ubsan*
else
  echo "skip fstab_mount: needs root and mount.fuse3"
fi
exit 0
