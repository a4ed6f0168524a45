#!/usr/bin/env bash
# t_pyb2.sh - interoperability with the real python-blosc2 (from PyPI, in
# build/venv or $PYB2; skipped without it).
#
# python-blosc2 writes arrays of every dtype family it stores (plain,
# byte-swapped, bool, bytes, unicode, datetime/timedelta, complex, void,
# structured packed, aligned, padded, nested, sub-array, titled; through
# asarray, which stores the data's descr, and through empty(), which stores
# str(dtype) as list or dict literals), contiguous and sparse, resized, with
# vlmeta.  Each is read as `b2f cat --npy` output and through a mount with
# numpy.load and compared with python-blosc2's own blosc2.open(...)[...]:
# dtype (names, offsets, item size, descr) and bytes; `b2f info` and xattr
# user.b2.dtype give the stored string.  Plain files written into the mount
# open in blosc2.open as SChunks with the same bytes.  Objects that are not
# data (lazy expression and UDF, ObjectArray, BatchArray, ListArray, Proxy)
# pass through raw under their source names, user.b2.kind and `b2f info`
# naming the kind.  lseek's SEEK_DATA and SEEK_HOLE in the mount give, as
# holes, exactly the items of the chunks python-blosc2 stored as zeros, and
# cp copies such files sparse.  Arrays under every codec and filter python-blosc2 offers,
# and from its constructors that store special chunks, read the same way:
# the ZFP codecs (1-4 dimensions, float32 and float64, the three modes)
# when b2fs has libzfp (in a build without it they fail, naming why, EIO in
# a mount), NDCELL and NDMEAN on 1-4 dimensions, NDLZ on 2-D images.
# Items written into an int_trunc array through the mount are stored
# truncated, as python-blosc2 stores them; an item written with numpy into
# a ZFP, NDCELL, NDMEAN or NDLZ array gives python-blosc2's own edit, item
# for item.  New arrays made under those codecs and filters (user.b2.codec
# "zfp_rate:30", user.b2.filters "ndcell:4" before numpy.save into the
# mount; `b2f pack -c/-f`) are what python-blosc2 makes of the same data,
# chunks and blocks, byte for byte; choices that cannot encode the data are
# refused (tests/pyb2_new.py).  Arrays saved with save_tensor and
# save_array (an SChunk with __pack_tensor__), of every dtype family above,
# read as those arrays through `b2f cat --npy`, `b2f info` and the mount
# (user.b2.shape and user.b2.dtype; a .b2nd-named one as a read-only .npy).
#
# Env: B2FS, B2F, PYB2 (set by tests/run.sh and tests/lib.sh).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
CHECK="$PWD/tests/pyb2_check.py"

if ! have_pyb2; then skip pyb2 "no python-blosc2 venv (make venv, or set PYB2)"; exit 0; fi
if [ ! -x "$B2F" ]; then skip pyb2 "$B2F is not built"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_pyb2.XXXXXX)
SRC=$TMP/src MNT=$TMP/mnt CAT=$TMP/cat
mkdir -p "$MNT" "$CAT"
. tests/mount_lib.sh
cleanup() {
  unmount_all
  rm -rf "$TMP"
}
trap cleanup EXIT

if ! timeout 300 "$PYB2" "$CHECK" make "$SRC" 2>"$TMP/make.log"; then
  notok pyb2_make "$(tail -3 "$TMP/make.log")"
  exit 0
fi
ok pyb2_make

# b2f cat --npy of every array
bad=""
while read -r n; do
  "$B2F" cat --npy "$SRC/$n" >"$CAT/${n%.b2nd}.npy" 2>>"$TMP/cat.log" || bad="$bad $n"
done <"$SRC/arrays.txt"
[ -z "$bad" ] && ok pyb2_cat_runs || notok pyb2_cat_runs "b2f cat --npy failed:$bad"
timeout 300 "$PYB2" "$CHECK" npy "$SRC" "$CAT" "$B2F"

# through the mount
if [ ! -x "$B2FS" ] || [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  skip pyb2_mount "no b2fs build, /dev/fuse or fusermount3"
  exit 0
fi
if ! mount_bg pyb2 "$SRC" "$MNT" "timeout=0"; then
  notok pyb2_mount "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
  exit 0
fi
ok pyb2_mount
timeout 300 "$PYB2" "$CHECK" npy "$SRC" "$MNT" "$B2F"
timeout 300 "$PYB2" "$CHECK" schunk "$SRC" "$MNT"
unmount_fg "$MNT" pyb2

# every codec, filter and special-chunk constructor python-blosc2 offers
CP=$TMP/cparams CPCAT=$TMP/cpcat
mkdir -p "$CPCAT"
ZFP=nozfp
"$B2F" --version | grep -q "^zfp codecs: yes" && ZFP=zfp
if ! timeout 300 "$PYB2" "$CHECK" cparams "$CP" "$ZFP" 2>"$TMP/cparams.log"; then
  notok pyb2_cparams "$(tail -3 "$TMP/cparams.log")"
  exit 0
fi
bad=""
while read -r n; do
  "$B2F" cat --npy "$CP/$n" >"$CPCAT/${n%.b2nd}.npy" 2>>"$TMP/cat.log" || bad="$bad $n"
done <"$CP/arrays.txt"
[ -z "$bad" ] && ok pyb2_cparams_cat_runs || notok pyb2_cparams_cat_runs "b2f cat --npy failed:$bad"
timeout 300 "$PYB2" "$CHECK" npy "$CP" "$CPCAT"
timeout 300 "$PYB2" "$CHECK" infocheck "$CP" "$B2F"
if ! mount_bg pyb2cp "$CP" "$MNT" "timeout=0"; then
  notok pyb2_cparams_mount "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
  exit 0
fi
timeout 300 "$PYB2" "$CHECK" npy "$CP" "$MNT"
timeout 300 "$PYB2" "$CHECK" refused "$CP" "$MNT" "$B2F"
# a write into the int_trunc array is truncated as python-blosc2's would be
cp "$CP/filter_int_trunc.b2nd" "$CP/filter_int_trunc.b2nd.before"
timeout 60 "$PYB2" "$CHECK" intwrite "$MNT" || notok int_trunc_write "the write failed"
# and into ZFP, NDCELL, NDMEAN and NDLZ arrays, as python-blosc2's own edit
while read -r n; do cp "$CP/$n.b2nd" "$CP/$n.b2nd.before"; done <"$CP/edits.txt"
timeout 60 "$PYB2" "$CHECK" editwrite "$CP" "$MNT" || notok edit_write "the write failed"
unmount_fg "$MNT" pyb2cp
timeout 60 "$PYB2" "$CHECK" intcheck "$CP"
timeout 120 "$PYB2" "$CHECK" editcheck "$CP"

# new arrays under those codecs and filters, through the mount and b2f pack
NEW=$TMP/new PACK=$TMP/pack
mkdir -p "$NEW"
if ! mount_bg pyb2new "$NEW" "$MNT" "timeout=0"; then
  notok pyb2_new_mount "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
  exit 0
fi
timeout 120 "$PYB2" tests/pyb2_new.py write "$MNT" "$PACK" "$B2F" "$ZFP"
# An array written through the mount and then changed in place by
# python-blosc2 (which keeps b2fs's checksums as they were: a replaced
# chunk of random bytes, stored as it is, has the same size and offset)
# reads back there as python-blosc2 reads it, not as a damaged chunk.
if timeout 60 "$PYB2" - "$MNT" "$NEW" 2>"$TMP/changed.log" <<'PY'
import sys, numpy as np, blosc2
mnt, src = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(7)
np.save(f"{mnt}/changed.npy", rng.integers(0, 256, 6_000_000, dtype=np.uint8))
a = blosc2.open(f"{src}/changed.b2nd", mode="a")
assert a.schunk.nchunks > 1, a.schunk.nchunks
sizes = [len(a.schunk.get_chunk(i)) for i in range(a.schunk.nchunks)]
new = rng.integers(0, 256, 10, dtype=np.uint8)
a[:10] = new
assert [len(a.schunk.get_chunk(i)) for i in range(a.schunk.nchunks)] == sizes
want = blosc2.open(f"{src}/changed.b2nd")[:]
got = np.load(f"{mnt}/changed.npy")
assert (got[:10] == new).all() and (got == want).all()
PY
then ok "an array changed by python-blosc2 after b2fs wrote it reads back"
else notok "an array changed by python-blosc2 after b2fs wrote it reads back" "$(tail -c 300 "$TMP/changed.log")"; fi
"$B2F" verify "$NEW/changed.b2nd" >/dev/null 2>&1
check "b2f verify of it: no damage" [ $? -eq 0 ]
# python-blosc2 pointed at the mount as at any directory: the frames it
# writes there (header first, then chunks through descriptors it opens and
# closes, read back through one it kept) are files like any other, and it
# opens them again.
if timeout 60 "$PYB2" - "$MNT" 2>"$TMP/through.log" <<'PY'
import sys, numpy as np, blosc2
mnt = sys.argv[1]
a = np.arange(200_000, dtype="<f8").reshape(400, 500)
blosc2.asarray(a, urlpath=f"{mnt}/through.b2nd", mode="w", chunks=(100, 500))
s = blosc2.SChunk(chunksize=40_000, urlpath=f"{mnt}/through.b2frame", mode="w")
for _ in range(3):
    s.append_data(b"x" * 40_000)
s.update_data(1, b"y" * 40_000, copy=True)
b = blosc2.open(f"{mnt}/through.b2nd")
assert b.shape == a.shape and (b[:] == a).all()
t = blosc2.open(f"{mnt}/through.b2frame")
assert t[:] == b"x" * 40_000 + b"y" * 40_000 + b"x" * 40_000
PY
then ok "python-blosc2 writes and opens frames in the mount"
else notok "python-blosc2 writes and opens frames in the mount" "$(tail -c 300 "$TMP/through.log")"; fi
unmount_fg "$MNT" pyb2new
timeout 120 "$PYB2" tests/pyb2_new.py check "$NEW" "$PACK" "$ZFP"

# gen_check NAME MAKE CHECK: python-blosc2 writes $TMP/NAME (pyb2_check.py
# MAKE), then CHECK runs on it and its mount
gen_check() {
  local dir=$TMP/$1
  if ! timeout 300 "$PYB2" "$CHECK" "$2" "$dir" 2>"$TMP/$1.log"; then
    notok "pyb2_$1" "$(tail -3 "$TMP/$1.log")"
    return
  fi
  if ! mount_bg "pyb2$1" "$dir" "$MNT" "timeout=0"; then
    notok "pyb2_$1_mount" "the daemon did not mount: $(tail -3 "${LOGS[$MNT]}")"
    return
  fi
  timeout 300 "$PYB2" "$CHECK" "$3" "$dir" "$MNT" "$B2F"
  unmount_fg "$MNT" "pyb2$1"
}

# objects that are not data pass through raw
gen_check objects objects objcheck

# SEEK_DATA/SEEK_HOLE: the holes are the items of the chunks python-blosc2
# stored as zeros (zeros, empty, fill_special), exactly; cp copies sparse
gen_check holes holes holecheck

# python-blosc2's save_tensor and save_array files: `b2f cat --npy` and
# `b2f info` give the array with its shape and dtype; in the mount NAME
# holds the items in C order (user.b2.shape, user.b2.dtype say which), and
# one saved under a .b2nd name is a read-only NAME.npy
gen_check tensors tensors tensorcheck
