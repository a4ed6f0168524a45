#!/usr/bin/env bash
# t_mount_npy.sh - NumPy arrays written through the mount become b2nd arrays;
# existing arrays are edited through their .npy views.
#
#   1. Every dtype family (integers, floats f2-f16, complex, bool, S, U,
#      datetime/timedelta, void, structured: nested, sub-arrays, padding,
#      titles, UTF-8 names), both byte orders, 0-d and empty arrays, .npy
#      format versions 1.0, 2.0 and 3.0, written with numpy.save (some with
#      open_memmap and slice writes, some with cp): SOURCE gets NAME.b2nd
#      with a b2nd metalayer of the same shape and dtype; `b2f cat
#      --c-order` gives the items; after a remount numpy.load gives them;
#      python-blosc2 (when installed) opens an NDArray with the same shape,
#      dtype and values.
#   2. Fortran order, object arrays, damaged headers, 17 dimensions and items
#      larger than a block can be stay plain frames
#      (one log line each) holding the bytes written.
#   3. A fixture array copied into SOURCE, edited through memmap r+, holds
#      exactly the edit; rows added and removed by truncate, a size inside
#      a row; user.b2.chunkshape /
#      blockshape before the data; a read-only mount refuses all of it.
#   4. tests/mount_ex_npy.py on a contiguous and a sparse mount with a small
#      cache: memmap slice writes, pwrite, pread, numpy.load and resizes
#      against a NumPy shadow on seven arrays (uneven edge chunks and blocks, 300-byte items,
#      blocks that do not divide chunks), then verify and a remount check.
#      B2FS_EX_NPY_SEED replays, B2FS_EX_NPY_OPS sets the operations (120).
#   5. .npy files not written by numpy.save (other header spellings).
#   6. Arrays grown by an appender (rows written mid-row, then the header),
#      rsync --inplace's way of writing a grown and a cut array over one,
#      a header spelled otherwise written over one; bytes appended inside a
#      row, part of the header changed, a size inside it: the bytes as
#      written, kept as a plain frame of them; cut back to whole rows an
#      array again; a header of another dtype over the items (rsync
#      --inplace of another array), numpy.save, cp or rows appended over
#      bytes kept so: the array they make at the close (a descriptor opened
#      before reads them too), but Fortran order; the same after a remount,
#      b2f scrub clean, python-blosc2 reading the arrays.
#   7. tests/npy_life.py: random saves, appends, truncates, writes past the
#      end, renames, copies, removals and memmap edits of four names on the
#      mount and on a plain directory, compared after each step (seeds
#      B2FS_NPY_LIFE_SEEDS, default 1-8; B2FS_NPY_LIFE_OPS each, default 150;
#      locking=on); nothing hidden is left in SOURCE; a remount gives the
#      same bytes, b2f scrub is clean.
# Env: B2FS, B2F, B2FS_FIXTURES, PY, PYB2 (tests/run.sh, tests/lib.sh).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
FIX=${B2FS_FIXTURES}
if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then skip mount_npy "b2fs or b2f is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then skip mount_npy "no /dev/fuse"; exit 0; fi
if ! have_numpy; then skip mount_npy "no numpy at $PY"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_mount_npy.XXXXXX)
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
SRC=$TMP/src MNT=$TMP/mnt REF=$TMP/ref
mkdir -p "$SRC" "$MNT" "$REF"

# ---- 1. every dtype family ------------------------------------------------
mount_bg npy1 "$SRC" "$MNT" "clevel=5" || { nok mount_npy "cannot mount"; exit 0; }
if "$PY" - "$MNT" "$REF" >"$TMP/write.out" 2>&1 <<'PY'
import sys, os, shutil, warnings, numpy as np
from numpy.lib import format as fmt
warnings.simplefilter("ignore")
mnt, ref = sys.argv[1:3]
r = np.random.default_rng(11)
arrays = {}
def add(name, a): arrays[name] = a
add("i1", r.integers(-128, 127, size=(70, 33), dtype="i1"))
add("u2be", r.integers(0, 60000, size=(501,)).astype(">u2"))
add("i8", r.integers(-2**60, 2**60, size=(40, 30, 20), dtype="<i8"))
add("f2", r.normal(size=(123, 45)).astype("<f2"))
add("f4be", r.normal(size=(1000, 77)).astype(">f4"))
add("f8", np.cumsum(r.normal(size=300000)))
add("f16", r.normal(size=(55, 3)).astype(np.longdouble))
add("c8", (r.normal(size=999) + 1j * r.normal(size=999)).astype("<c8"))
add("c32", (r.normal(size=(7, 9)) + 1j).astype(np.clongdouble))
add("bool", r.integers(0, 2, size=(64, 65)).astype(bool))
add("S7", np.array([b"ab", b"cdefghi", b""] * 111, dtype="|S7"))
add("U5", np.array(["x", "\u00e9t\u00e9", "\u4e2d\u6587"] * 50, dtype="<U5").reshape(15, 10))
add("Ube", np.array(["big", "endian"] * 20, dtype=">U6"))
add("M8", np.arange("2020-01-01", "2021-06-01", dtype="datetime64[D]").astype("<M8[s]"))
add("m8", np.arange(1000, dtype="<m8[us]"))
add("V12", np.frombuffer(r.bytes(12 * 100), dtype="V12").reshape(10, 10))
add("wide", np.frombuffer(r.bytes(300 * 40), dtype="V300").reshape(8, 5))
st = np.dtype([("x", "<f4"), ("y", ">i2"), ("flag", "|u1")])
a = np.zeros((200, 3), dtype=st); a["x"] = r.normal(size=(200, 3)); a["y"] = 7; add("struct", a)
nest = np.dtype([("p", "<f8", (2, 3)), ("q", [("a", "|u1"), ("b", ">i2", (4,))])])
add("nested", np.frombuffer(r.bytes(nest.itemsize * 123), dtype=nest))
pad = np.dtype({"names": ["a", "b"], "formats": ["<i4", "<f8"], "offsets": [0, 8], "itemsize": 24})
p = np.zeros(50, dtype=pad); p["a"] = np.arange(50); p["b"] = 0.5; add("padded", p)
add("aligned", np.zeros(30, dtype=np.dtype([("c", "u1"), ("d", "<f8")], align=True)))
add("titles", np.zeros(9, dtype=[(("T", "t"), "<i4"), ("u", "<f2")]))
add("scalar", np.array(3.25))
add("empty", np.zeros((0, 10)))
add("empty2", np.zeros((5, 0, 3), dtype="<i2"))
add("big", r.normal(size=(2200, 1000)))
u = np.zeros(10, dtype=[("\u4e2d", "<i4")]); u["\u4e2d"] = np.arange(10); add("utf8", u)
for name, a in arrays.items():
    np.save(f"{ref}/{name}.npy", a)
    if name in ("f4be", "nested", "U5"):
        mm = fmt.open_memmap(f"{mnt}/{name}.npy", mode="w+", dtype=a.dtype, shape=a.shape)
        idx = np.arange(a.shape[0]); r.shuffle(idx)          # rows in any order
        for k in range(0, len(idx), 17):
            rows = np.sort(idx[k:k + 17]); mm[rows] = a[rows]
        mm.flush(); del mm
    elif name == "i8":
        shutil.copyfile(f"{ref}/{name}.npy", f"{mnt}/{name}.npy")
    elif name == "f8":
        with open(f"{mnt}/{name}.npy", "wb") as f:
            fmt.write_array(f, a, version=(2, 0))
    else:
        np.save(f"{mnt}/{name}.npy", a)
    b = np.load(f"{mnt}/{name}.npy")
    if b.dtype != a.dtype or b.shape != a.shape or b.tobytes() != a.tobytes():
        print("differs at once:", name); sys.exit(1)
with open(f"{ref}/list", "w") as f:
    f.write("\n".join(arrays) + "\n")
PY
then ok npy_write_all; else nok npy_write_all "$(tail -3 "$TMP/write.out")"; fi
grep -q . "$REF/list" 2>/dev/null || { nok mount_npy "nothing written"; exit 0; }

# The items of a saved .npy file (its bytes past the header).
items_sha() {
  "$PY" -c 'import sys, numpy as np, hashlib; a = np.load(sys.argv[1]); print(hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest())' "$1"
}
bad_src="" bad_cat="" bad_meta=""
while read -r n; do
  if [ ! -f "$SRC/$n.b2nd" ] || [ -e "$SRC/$n.npy.b2frame" ]; then bad_src+=" $n"; continue; fi
  want=$(items_sha "$REF/$n.npy")
  got=$("$B2F" cat --c-order "$SRC/$n.b2nd" 2>/dev/null | sha256sum | cut -d' ' -f1)
  [ "$got" = "$want" ] || bad_cat+=" $n"
  "$B2F" info "$SRC/$n.b2nd" 2>/dev/null | grep -q '^metalayers.*b2nd' || bad_meta+=" $n"
  "$B2F" verify "$SRC/$n.b2nd" >/dev/null 2>&1 || bad_meta+=" $n(verify)"
done <"$REF/list"
[ -z "$bad_src" ] && ok npy_source_b2nd || nok npy_source_b2nd "not NAME.b2nd:$bad_src"
[ -z "$bad_cat" ] && ok npy_cat_c_order || nok npy_cat_c_order "items differ:$bad_cat"
[ -z "$bad_meta" ] && ok npy_b2nd_meta || nok npy_b2nd_meta "no b2nd metalayer / verify:$bad_meta"
"$B2F" info "$SRC/big.b2nd" | grep -q '^chunkshape *[0-9]* x 1000$' && ok npy_default_chunks_rows ||
  nok npy_default_chunks_rows "$("$B2F" info "$SRC/big.b2nd" | grep shape | tr '\n' ' ')"

# ---- 2. what cannot be an array ---------------------------------------------
if "$PY" - "$MNT" "$REF" >"$TMP/plain.out" 2>&1 <<'PY'
import sys, numpy as np
mnt, ref = sys.argv[1:3]
np.save(f"{ref}/fortran.npy", np.asfortranarray(np.arange(12.).reshape(3, 4)))
np.save(f"{ref}/object.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
good = open(f"{ref}/f2.npy", "rb").read()
open(f"{ref}/damaged.npy", "wb").write(good[:10] + b"{'descr': <f2'" + good[24:])
np.save(f"{ref}/dims17.npy", np.arange(2.).reshape((2,) + (1,) * 16))
# items of 2 GB: larger than any block the format holds (a file cut short,
# as no one writes 6 GB for this); it once held up every later writer
h = b"{'descr': '|V2000000000', 'fortran_order': False, 'shape': (3,), }"
h += b" " * ((64 - (10 + len(h) + 1) % 64) % 64) + b"\n"
open(f"{ref}/hugeitem.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + b"x" * 100)
for n in ("hugeitem", "fortran", "object", "damaged", "dims17"):
    open(f"{mnt}/{n}.npy", "wb").write(open(f"{ref}/{n}.npy", "rb").read())
    if open(f"{mnt}/{n}.npy", "rb").read() != open(f"{ref}/{n}.npy", "rb").read():
        print("differs:", n); sys.exit(1)
a = np.arange(5000.)
np.save(f"{mnt}/after_plain.npy", a)
if not np.array_equal(np.load(f"{mnt}/after_plain.npy"), a):
    print("an array saved after them differs"); sys.exit(1)
PY
then ok npy_plain_fallback_bytes; else nok npy_plain_fallback_bytes "$(tail -3 "$TMP/plain.out")"; fi
for n in fortran object damaged dims17 hugeitem; do
  # the plain frame a plain NAME.npy gets: NAME.npy.b2frame, no NAME.b2nd left
  if "$B2F" info "$SRC/$n.npy.b2frame" 2>/dev/null | grep -q '^metalayers *-' &&
     [ ! -e "$SRC/$n.b2nd" ] &&
     [ "$(grep -c "$n.b2nd: stored as a plain frame" "${LOGS[$MNT]}")" = 1 ]; then
    ok "npy_plain_$n"
  else
    nok "npy_plain_$n" "$(ls "$SRC" | grep "^$n"); $(grep "$n" "${LOGS[$MNT]}" | head -2)"
  fi
done
unmount_fg "$MNT" npy1

# ---- after a remount; python-blosc2 ------------------------------------------
mount_bg npy2 "$SRC" "$MNT" "ro" || { nok mount_npy "cannot remount"; exit 0; }
if "$PY" - "$MNT" "$REF" >"$TMP/load.out" 2>&1 <<'PY'
import sys, numpy as np
mnt, ref = sys.argv[1:3]
bad = []
for n in open(f"{ref}/list").read().split() + ["fortran"]:
    a, b = np.load(f"{ref}/{n}.npy"), np.load(f"{mnt}/{n}.npy")
    if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes(): bad.append(n)
print(" ".join(bad)); sys.exit(1 if bad else 0)
PY
then ok npy_remount_load; else nok npy_remount_load "$(tail -2 "$TMP/load.out")"; fi
# A read-only mount refuses writes to arrays.
if "$PY" -c 'import sys, numpy as np; np.load(sys.argv[1], mmap_mode="r+")' "$MNT/f2.npy" 2>/dev/null ||
   "$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.zeros(3))' "$MNT/new.npy" 2>/dev/null; then
  nok npy_ro_refuses "a write went through"
else
  ok npy_ro_refuses
fi
unmount_fg "$MNT" npy2
if have_pyb2; then
  if "$PYB2" - "$SRC" "$REF" >"$TMP/pyb2.out" 2>&1 <<'PY'
import sys, warnings, numpy as np, blosc2
warnings.simplefilter("ignore")
src, ref = sys.argv[1:3]
bad = []
for n in open(f"{ref}/list").read().split():
    a = np.load(f"{ref}/{n}.npy")
    try:
        b = blosc2.open(f"{src}/{n}.b2nd")
        ok = isinstance(b, blosc2.NDArray) and b.shape == a.shape and b.dtype == a.dtype
        if ok and a.size: ok = b[()].tobytes() == a.tobytes()
    except Exception as e:
        ok = False
    if not ok: bad.append(n)
print(" ".join(bad)); sys.exit(1 if bad else 0)
PY
  then ok npy_python_blosc2; else nok npy_python_blosc2 "differ: $(tail -1 "$TMP/pyb2.out")"; fi
else
  skip npy_python_blosc2 "no python-blosc2 ($PYB2)"
fi

# ---- 3. editing an existing array ---------------------------------------------
if [ -f "$FIX/b2nd/f32-2d-uneven.b2nd" ]; then
  cp "$FIX/b2nd/f32-2d-uneven.b2nd" "$FIX/b2nd/i16-3d.b2nd" "$SRC/"
  "$B2F" cat --c-order "$SRC/f32-2d-uneven.b2nd" >"$TMP/f32.raw"
  "$B2F" cat --c-order "$SRC/i16-3d.b2nd" >"$TMP/i16.raw"
  mount_bg npy3 "$SRC" "$MNT" "clevel=1" || { nok mount_npy "cannot mount"; exit 0; }
  if "$PY" - "$MNT" "$TMP" >"$TMP/edit.out" 2>&1 <<'PY'
import sys, os, errno, numpy as np
mnt, tmp = sys.argv[1:3]
a = np.fromfile(f"{tmp}/f32.raw", dtype="<f4").reshape(1000, 777)
m = np.load(f"{mnt}/f32-2d-uneven.npy", mmap_mode="r+")
m[123:456, 700:] = -1.5
m[999, :] = 7
m.flush(); del m
a[123:456, 700:] = -1.5; a[999, :] = 7
a.tofile(f"{tmp}/f32.want")
b = np.fromfile(f"{tmp}/i16.raw", dtype="<i2").reshape(50, 60, 70)
p = f"{mnt}/i16-3d.npy"
hl = os.path.getsize(p) - b.nbytes
fd = os.open(p, os.O_RDWR)
os.pwrite(fd, np.full(1000, 5, dtype="<i2").tobytes(), hl + 2 * 12345)   # across rows
b.reshape(-1)[12345:13345] = 5
head = os.pread(fd, hl, 0)
assert os.pwrite(fd, head, 0) == hl                                     # unchanged: fine
# a size inside a row: those bytes (zeros), the header as it was
os.ftruncate(fd, hl + b.nbytes + 3)
assert os.fstat(fd).st_size == hl + b.nbytes + 3, "odd size"
assert os.pread(fd, hl, 0) == head and os.pread(fd, 10, hl + b.nbytes) == bytes(3), "odd size bytes"
row = 60 * 70 * 2
os.ftruncate(fd, hl + b.nbytes - 7 * row)                                # 43 rows
os.ftruncate(fd, hl + b.nbytes + 2 * row)                                # 52 rows, new zeros
os.close(fd)
b[43:] = 0
b = np.concatenate([b, np.zeros((2, 60, 70), dtype="<i2")])
c = np.load(p)
assert c.shape == (52, 60, 70) and c.tobytes() == b.tobytes(), "resized content"
b.tofile(f"{tmp}/i16.want")
# numpy.save over an existing array: a new array of another shape and dtype.
np.save(f"{mnt}/over.npy", np.arange(5000.).reshape(50, 100))
np.save(f"{mnt}/over.npy", np.arange(77, dtype="<i2"))
o = np.load(f"{mnt}/over.npy")
assert o.dtype == np.dtype("<i2") and o.tobytes() == np.arange(77, dtype="<i2").tobytes(), "overwrite"
# Shapes asked for before the data.
fd = os.open(f"{mnt}/shaped.npy", os.O_CREAT | os.O_WRONLY, 0o644)
os.setxattr(f"{mnt}/shaped.npy", "user.b2.chunkshape", b"100,30")
os.setxattr(f"{mnt}/shaped.npy", "user.b2.blockshape", b"20,30")
with os.fdopen(fd, "wb") as f:
    np.save(f, np.ones((1000, 30), dtype="<f8"))
# The same as separate steps: touch, setfattr, numpy.save.
open(f"{mnt}/shaped2.npy", "wb").close()
os.setxattr(f"{mnt}/shaped2.npy", "user.b2.chunkshape", b"100,30")
os.setxattr(f"{mnt}/shaped2.npy", "user.b2.blockshape", b"20,30")
np.save(f"{mnt}/shaped2.npy", np.ones((1000, 30), dtype="<f8"))
PY
  then ok npy_edit_run; else nok npy_edit_run "$(tail -3 "$TMP/edit.out")"; fi
  unmount_fg "$MNT" npy3
  check npy_edit_fixture_memmap cmp -s "$TMP/f32.want" <("$B2F" cat --c-order "$SRC/f32-2d-uneven.b2nd")
  check npy_edit_pwrite_resize cmp -s "$TMP/i16.want" <("$B2F" cat --c-order "$SRC/i16-3d.b2nd")
  "$B2F" info "$SRC/i16-3d.b2nd" | grep -q '^shape *52 x 60 x 70' && ok npy_resize_meta || nok npy_resize_meta
  "$B2F" info "$SRC/over.b2nd" 2>/dev/null | grep -q '^shape *77$' && ok npy_save_over_existing ||
    nok npy_save_over_existing "$("$B2F" info "$SRC/over.b2nd" 2>&1 | grep shape | head -1)"
  for n in shaped shaped2; do
    "$B2F" info "$SRC/$n.b2nd" 2>/dev/null | grep -q '^chunkshape *100 x 30' &&
      "$B2F" info "$SRC/$n.b2nd" | grep -q '^blockshape *20 x 30' && ok "npy_xattr_$n" ||
      nok "npy_xattr_$n" "$("$B2F" info "$SRC/$n.b2nd" 2>&1 | grep shape | tr '\n' ' ')"
  done
  bad=""
  for f in "$SRC"/*.b2nd; do "$B2F" verify "$f" >/dev/null 2>&1 || bad+=" $(basename "$f")"; done
  [ -z "$bad" ] && ok npy_verify_all || nok npy_verify_all "$bad"
  if have_pyb2; then
    "$PYB2" -c '
import sys, numpy as np, blosc2
b = blosc2.open(sys.argv[1]); w = np.fromfile(sys.argv[2], dtype="<i2").reshape(52, 60, 70)
sys.exit(0 if b.shape == (52, 60, 70) and (b[()] == w).all() else 1)' "$SRC/i16-3d.b2nd" "$TMP/i16.want" &&
      ok npy_resize_python_blosc2 || nok npy_resize_python_blosc2
  fi
else
  skip npy_edit_fixture "no fixtures at $FIX"
fi

# ---- 4. the random exerciser on both layouts -------------------------------------
OPS=${B2FS_EX_NPY_OPS:-120}
for layout in contiguous sparse; do
  S=$TMP/ex-$layout M=$TMP/mnt-$layout
  mkdir -p "$S/d" "$M"
  seed=${B2FS_EX_NPY_SEED:-$RANDOM}
  mount_bg "ex_$layout" "$S" "$M" "layout=$layout,cache_size=2M,dirty_max=512K" ||
    { nok "npy_exercise_$layout" "cannot mount"; continue; }
  if "$PY" tests/mount_ex_npy.py "$M/d" "$seed" "$OPS" >"$TMP/ex.out" 2>&1; then
    ok "npy_exercise_$layout"
  else
    nok "npy_exercise_$layout" "seed $seed: $(tail -2 "$TMP/ex.out")"
  fi
  unmount_fg "$M" "ex_$layout"
  bad=""
  for f in "$S"/d/*.b2nd; do "$B2F" verify "$f" >/dev/null 2>&1 || bad+=" $(basename "$f")"; done
  [ -z "$bad" ] && ok "npy_exercise_${layout}_verify" || nok "npy_exercise_${layout}_verify" "$bad"
  mount_bg "ex2_$layout" "$S" "$M" "ro" || { nok "npy_exercise_${layout}_remount" "cannot mount"; continue; }
  if "$PY" tests/mount_ex_npy.py "$M/d" 0 0 check >"$TMP/ex.out" 2>&1; then
    ok "npy_exercise_${layout}_remount"
  else
    nok "npy_exercise_${layout}_remount" "seed $seed: $(tail -2 "$TMP/ex.out")"
  fi
  unmount_fg "$M" "ex2_$layout"
done

# ---- 5. .npy files not written by numpy.save --------------------------------------
# A header padded or spelled otherwise (cnpy and old numpy align to 16
# bytes; extra padding) makes the same array, and the file reads back as
# written, header included (kept in the vlmetalayer b2fs.npyhdr), right
# after the close and after a remount, also b2f pack and unpack of such
# a file; resized by rows through the mount,
# it shows numpy.save's header for the new shape, its size that of the
# bytes served.
S5=$TMP/src5
mkdir -p "$S5"
if mount_bg npy5 "$S5" "$MNT" "clevel=1"; then
  if "$PY" - "$MNT" >"$TMP/npy5.out" 2>&1 <<'PY'
import os, sys, numpy as np
mnt = sys.argv[1]
a = np.arange(24, dtype="<f8").reshape(4, 6)
bad = []
# (ten rounds: reading right after close(2) once raced with the release
# that makes the header numpy.save's, and served the bytes from before it)
for name, align, extra in (("al16", 16, 0), ("long", 64, 64), ("nospace", 16, 0)) * 10:
    h = "{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), }"
    if name == "nospace":
        h = "{'shape':(4,6),'fortran_order':False,'descr':'<f8'}"
    h = (h + " " * ((-(10 + len(h) + 1)) % align + extra) + "\n").encode()
    hdr = b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h
    p = f"{mnt}/{name}.npy"
    for flags in (os.O_WRONLY, os.O_RDWR):
        fd = os.open(p, flags | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, hdr); os.write(fd, a.tobytes())
        if flags == os.O_RDWR: os.fstat(fd)
        os.close(fd)
        data = open(p, "rb").read()
        size = os.stat(p).st_size
        ok = size == len(data) and data == hdr + a.tobytes() and np.array_equal(np.load(p), a)
        if not ok: bad.append(f"{name}/{flags}: size {size}, {len(data)} bytes served, "
                              f"as written: {data == hdr + a.tobytes()}")
    open(f"{mnt}/{name}.want", "wb").write(hdr + a.tobytes())
# resized by rows: numpy.save's header for the new shape
p = f"{mnt}/rows.npy"
h = b"{'descr': '<f8', 'fortran_order': False, 'shape': (4, 6), }"
h = h + b" " * ((-(10 + len(h) + 1)) % 16) + b"\n"
open(p, "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + a.tobytes())
os.truncate(p, 10 + len(h) + 2 * 6 * 8)
data = open(p, "rb").read()
if os.stat(p).st_size != len(data) or not np.array_equal(np.load(p), a[:2]) or b"(2, 6)" not in data[:128]:
    bad.append(f"rows: size {os.stat(p).st_size}, {len(data)} bytes served, {data[:80]!r}")
print("; ".join(bad) or "ok")
sys.exit(1 if bad else 0)
PY
  then ok npy_foreign_header_size; else nok npy_foreign_header_size "$(tail -2 "$TMP/npy5.out")"; fi
  # A .npy file whose writer stops short of its header's size (killed, out
  # of space) keeps the bytes written, as on any file system: numpy.load
  # then fails as it should, instead of reading zeros it never got.
  # open_memmap writes the last byte: an array, zeros where not written.
  if "$PY" - "$MNT" >"$TMP/short.out" 2>&1 <<'PY'
import io, os, sys, numpy as np
from numpy.lib.format import open_memmap
mnt = sys.argv[1]
b = io.BytesIO(); np.save(b, np.arange(1000.0)); raw = b.getvalue()
short = raw[:128 + 100 * 8 + 3]
with open(f"{mnt}/short.npy", "wb") as f:
    f.write(short)
got = open(f"{mnt}/short.npy", "rb").read()
assert got == short and os.stat(f"{mnt}/short.npy").st_size == len(short), (len(got), len(short))
try:
    np.load(f"{mnt}/short.npy"); sys.exit("np.load read a short file")
except ValueError:
    pass
# Bytes past the items its header describes (written with them): no array
# holds them, so the file keeps its bytes (was: dropped, or rows added).
for n, extra in (("trail15", b"x" * 15), ("trail16", b"y" * 16)):
    with open(f"{mnt}/{n}.npy", "wb") as f:
        f.write(raw + extra)
    assert open(f"{mnt}/{n}.npy", "rb").read() == raw + extra, n
m = open_memmap(f"{mnt}/mm.npy", mode="w+", dtype="<i4", shape=(500, 300))
m[0] = 7; m.flush(); del m
a = np.load(f"{mnt}/mm.npy")
assert a.shape == (500, 300) and (a[0] == 7).all() and not a[1:].any()
PY
  then
    [ -f "$S5/short.npy.b2frame" ] && [ ! -e "$S5/short.b2nd" ] && [ -f "$S5/mm.b2nd" ] &&
      [ -f "$S5/trail15.npy.b2frame" ] && [ -f "$S5/trail16.npy.b2frame" ] &&
      "$B2F" cat "$S5/short.npy.b2frame" | cmp -s - <(head -c 931 "$MNT/short.npy") &&
      ok npy_short_keeps_bytes || nok npy_short_keeps_bytes "SOURCE: $(ls "$S5" | tr '\n' ' ')"
  else
    nok npy_short_keeps_bytes "$(tail -2 "$TMP/short.out")"
  fi
  # Times set to 1970 and before (tar --mtime=@0): the checksum tables
  # vouch for them (scrub below).
  echo u >"$MNT/zero"; touch -d @0 "$MNT/zero"
  echo u >"$MNT/neg"; touch -d '1969-12-31 23:59:59.5 UTC' "$MNT/neg"
  # numpy's open_memmap closed before any item is written: an array of
  # zeros, made anew from the empty file at its header (scrub below).
  "$PY" -c 'import sys, numpy as np; m = np.lib.format.open_memmap(sys.argv[1], mode="w+", dtype="<f8", shape=(1000,)); del m' "$MNT/hdronly.npy"
  # cp -a sets the attributes on the descriptor it wrote, before closing:
  # the writer takes the vlmeta (python-blosc2's user attributes).
  if command -v setfattr >/dev/null; then
    "$PY" -c 'import sys, numpy as np; np.save(sys.argv[1], np.arange(1000.))' "$MNT/orig.npy"
    setfattr -n user.b2.vlmeta.units -v 0xa36d2f73 "$MNT/orig.npy"
    cp -a "$MNT/orig.npy" "$MNT/copy.npy" 2>"$TMP/cpa.err"
    got=$(getfattr --only-values -n user.b2.vlmeta.units "$MNT/copy.npy" 2>/dev/null | od -An -tx1 | tr -d ' \n')
    [ "$got" = a36d2f73 ] && cmp -s "$MNT/orig.npy" "$MNT/copy.npy" && ok npy_cp_a_keeps_vlmeta ||
      nok npy_cp_a_keeps_vlmeta "copy's units: '$got'; $(head -c 200 "$TMP/cpa.err")"
  fi
  # A new .npy file whose first write lies past the bytes held for its
  # header (a writer preallocating by writing its last byte first): the
  # daemon had looped forever on it.  The bytes as written, then numpy.save
  # over the start of another: numpy reads the array.
  if timeout 20 "$PY" -c '
import sys, numpy as np
with open(sys.argv[1], "wb") as f:
    f.seek(5 << 20); f.write(b"abc")
with open(sys.argv[2], "wb") as f:
    f.seek(4 << 20); f.write(b"\0"); f.seek(0); np.save(f, np.arange(300000.0))
a = np.load(sys.argv[2])
assert a.shape == (300000,) and a[-1] == 299999.0
' "$MNT/far.npy" "$MNT/prealloc.npy" 2>"$TMP/far.err"; then
    [ "$(stat -c %s "$MNT/far.npy")" = $(((5 << 20) + 3)) ] &&
      [ "$(tail -c 3 "$MNT/far.npy")" = abc ] && cmp -s <(head -c $((5 << 20)) "$MNT/far.npy") <(head -c $((5 << 20)) /dev/zero) &&
      ok npy_first_write_far || nok npy_first_write_far "size $(stat -c %s "$MNT/far.npy")"
  else
    nok npy_first_write_far "$(tail -c 300 "$TMP/far.err")"
  fi
  unmount_fg "$MNT" npy5
  "$B2F" scrub "$S5" >"$TMP/scrub5.out" 2>&1 && ! grep -q "table ignored" "$TMP/scrub5.out" &&
    [ "$(stat -c %Y "$S5/zero.b2frame")" = 0 ] &&
    ok npy_scrub_clean || nok npy_scrub_clean "$(head -c 400 "$TMP/scrub5.out")"
  # the writers' headers after a remount, and b2f cat --npy of the frame
  if mount_bg npy5b "$S5" "$MNT" "ro"; then
    bad=""
    for n in al16 long nospace; do
      cmp -s "$MNT/$n.npy" "$MNT/$n.want" || bad+=" $n"
      "$B2F" cat --npy "$S5/$n.b2nd" 2>/dev/null | cmp -s - "$MNT/$n.want" || bad+=" cat:$n"
      # b2f pack of such a file, and back
      cp "$MNT/$n.want" "$TMP/$n.npy"
      "$B2F" pack "$TMP/$n.npy" "$TMP/$n.b2nd" >/dev/null 2>&1 && "$B2F" unpack "$TMP/$n.b2nd" "$TMP/$n.back.npy" >/dev/null 2>&1 &&
        cmp -s "$TMP/$n.back.npy" "$TMP/$n.npy" || bad+=" pack:$n"
    done
    [ -z "$bad" ] && ok npy_foreign_header_remount || nok npy_foreign_header_remount "differ:$bad"
    # python-blosc2 reads such an array, its vlmeta (the kept header) too
    if have_pyb2; then
      r=$("$PYB2" -c '
import sys, numpy as np, blosc2
a = blosc2.open(sys.argv[1])
assert np.array_equal(a[...], np.arange(24.0).reshape(4, 6)), a[...]
assert a.vlmeta.getall()["b2fs.npyhdr"] == open(sys.argv[2], "rb").read()[:80]
print("ok")' "$S5/al16.b2nd" "$MNT/al16.want" 2>&1)
      [ "$r" = ok ] && ok npy_foreign_header_pyb2 || nok npy_foreign_header_pyb2 "$(tail -c 300 <<<"$r")"
    fi
    unmount_fg "$MNT" npy5b
  else
    nok npy_foreign_header_remount "cannot mount"
  fi
else
  nok npy_foreign_header_size "cannot mount"
fi

# ---- 6. arrays grown by appending, and whole headers written over ----------------
# An appender (npy-append-array's way: the rows at the end, written as its
# buffer fills, mid-row; then the header for the new row count), rsync
# --inplace of a grown and of a cut array, a header spelled otherwise, bytes
# appended that end inside a row (kept as the plain bytes they are), a cut
# back to whole rows.
S6=$TMP/src6
mkdir -p "$S6"
if mount_bg npy6 "$S6" "$MNT" "clevel=1"; then
  if "$PY" - "$MNT" "$TMP" >"$TMP/append.out" 2>&1 <<'PY'
import sys, os, errno, numpy as np
from numpy.lib import format as fmt
mnt, tmp = sys.argv[1:3]
bad = []
def header(shape, dtype="<f8", length=128):
    d = {"descr": dtype, "fortran_order": False, "shape": shape}
    text = repr(d).encode("latin1")
    return b"\x93NUMPY\x01\x00" + (length - 10).to_bytes(2, "little") + text.ljust(length - 11) + b"\n"
# the appender
p = f"{mnt}/app.npy"
want = np.full((100, 30), -1.0)
np.save(p, want)
for k in range(4):
    rows = np.arange(3000.0 * k, 3000.0 * (k + 1)).reshape(100, 30)
    fd = os.open(p, os.O_RDWR)
    end = os.lseek(fd, 0, os.SEEK_END)
    data = rows.tobytes()
    for i in range(0, len(data), 16384):                 # mid-row pieces
        os.pwrite(fd, data[i:i + 16384], end + i)
    want = np.concatenate([want, rows])
    h = header(want.shape)
    assert len(h) == 128
    os.pwrite(fd, h, 0)
    os.close(fd)
got = np.load(p)
if got.shape != want.shape or not np.array_equal(got, want): bad.append("appender")
np.save(f"{tmp}/app.want.npy", want)
open(f"{tmp}/app.want", "wb").write(header(want.shape) + want.tobytes())  # its own header
# rsync --inplace's way: the header for the new rows first, then the items
for name, n in (("grown", 300), ("cut", 40)):
    q = f"{mnt}/{name}.npy"
    np.save(q, np.ones((100, 30)))
    w = np.arange(n * 30.0).reshape(n, 30)
    np.save(f"{tmp}/{name}.in.npy", w)
    raw = open(f"{tmp}/{name}.in.npy", "rb").read()
    fd = os.open(q, os.O_WRONLY)
    for i in range(0, len(raw), 32768):
        os.pwrite(fd, raw[i:i + 32768], i)
    os.ftruncate(fd, len(raw))
    os.close(fd)
    if open(q, "rb").read() != raw: bad.append(name)
# a header of the same array spelled otherwise: read back as written
q = f"{mnt}/spelled.npy"
np.save(q, np.ones((10, 30)))
h = header((10, 30)).replace(b"'shape': (10, 30)}", b"'shape':(10,30) }")
h = h[:-1].ljust(127) + b"\n"
fd = os.open(q, os.O_WRONLY); os.pwrite(fd, h, 0); os.close(fd)
if open(q, "rb").read(128) != h: bad.append("spelled")
# another dtype's header, part of the header changed, a size inside it:
# the bytes as written (rsync --inplace of an array of another dtype)
for what, buf, off in (("dtype", header((10, 30), "<i8"), 0), ("part", b"(11", 60), ("short", b"", 40)):
    q = f"{mnt}/{what}.npy"
    np.save(q, np.arange(300.0).reshape(10, 30))
    want = bytearray(open(q, "rb").read())
    fd = os.open(q, os.O_WRONLY)
    if buf: os.pwrite(fd, buf, off); want[off:off + len(buf)] = buf
    else: os.ftruncate(fd, off); del want[off:]
    os.close(fd)
    if open(q, "rb").read() != want: bad.append(what)
    open(f"{tmp}/{what}.want", "wb").write(want)
# bytes appended that end inside a row, and cut back
for name in ("tail", "back"):
    q = f"{mnt}/{name}.npy"
    np.save(q, np.arange(300.0).reshape(10, 30))
    before = open(q, "rb").read()
    fd = os.open(q, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"\x07" * 100)
    if name == "back": os.ftruncate(fd, len(before))
    os.close(fd)
    now = open(q, "rb").read()
    expect = before + (b"\x07" * 100 if name == "tail" else b"")
    if now != expect: bad.append(name)
    open(f"{tmp}/{name}.want", "wb").write(expect)
# a new .npy file cut short of its header's size, kept as its bytes at the
# close: stat right after the close gives their size, not the header's
np.save(f"{tmp}/full.npy", np.zeros(1000))
full = open(f"{tmp}/full.npy", "rb").read()
for i in range(10):
    q, n = f"{mnt}/cut{i}.npy", 128 + 8 * (i + 1)
    with open(q, "wb") as g: g.write(full[:n])
    if os.stat(q).st_size != n: bad.append(f"cut{i}:{os.stat(q).st_size}")
    os.unlink(q)
# removed or renamed right after the close, while the release that keeps
# it as its bytes renames its entry: gone, or moved, and nothing left
for i in range(30):
    q = f"{mnt}/gone{i}.npy"
    with open(q, "wb") as g: g.write(full[:128 + 8 * (i % 7 + 1)] if i % 2 else b"text here")
    try:
        if i % 3 == 0: os.rename(q, q + ".moved"); os.unlink(q + ".moved")
        else: os.unlink(q)
    except OSError as e: bad.append(f"gone{i}:{e.errno}")
left = [n for n in os.listdir(mnt) if n.startswith("gone")]
if left: bad.append("left:" + ",".join(left))
# kept as its bytes, then a whole array written over it (numpy.save, cp,
# an appender completing the row and the header): an array again at the close,
# read at once, also by a descriptor opened before; Fortran order stays bytes
w = np.arange(600.0).reshape(20, 30)
np.save(f"{tmp}/again.in.npy", w)
for name in ("again", "againsave", "againcp", "againrow", "againf"):
    q = f"{mnt}/{name}.npy"
    np.save(q, np.arange(300.0).reshape(10, 30))
    with open(q, "ab") as g: g.write(b"\x07" * 100)        # inside a row: bytes
    os.stat(q)                                         # (waits for that close)
    early = open(q, "rb") if name != "againsave" else None
    if name in ("again", "againsave"): np.save(q, w)
    elif name == "againcp": os.system(f"cp {tmp}/again.in.npy {q}")
    elif name == "againf": np.save(q, np.asfortranarray(w))
    else:                                              # the appender goes on:
        with open(q, "r+b") as g:                      # row 11 complete, then
            g.seek(0, 2); g.write(b"\x07" * 140)        # its header
            g.seek(0); g.write(header((11, 30)))
    now = open(q, "rb").read()
    if name in ("again", "againsave", "againcp"):
        if not np.array_equal(np.load(q), w) or os.stat(q).st_size != len(now): bad.append(name)
    elif name == "againrow":
        if now[-240:] != b"\x07" * 240 or np.load(q).shape != (11, 30): bad.append(name)
    elif not np.array_equal(np.load(q), w) or not np.load(q).flags.f_contiguous: bad.append(name)
    if early and early.read() != now: bad.append(name + ":early")
    if early: early.close()
# truncated by path to a size inside a row (the truncate's own close keeps
# it as its bytes): the call returns (it hung, 30 November) with the size
import subprocess
q = f"{mnt}/cutpath.npy"
np.save(q, np.arange(300.0).reshape(10, 30))
try:
    subprocess.run(["truncate", "-s", "1000", q], timeout=30, check=True)
    if os.stat(q).st_size != 1000 or open(q, "rb").read(128) != open(f"{tmp}/again.in.npy", "rb").read(128).replace(b"(20, 30)", b"(10, 30)"):
        bad.append("cutpath")
except subprocess.TimeoutExpired: bad.append("cutpath:hang")
# rows and bytes appended with no header written, kept as bytes at the
# close: the header as written (it showed the rows complete meanwhile)
q = f"{mnt}/rowsmid.npy"
np.save(q, np.arange(300.0).reshape(10, 30))
before = open(q, "rb").read()
with open(q, "ab") as g: g.write(b"\x03" * 500)       # 2 rows and 20 bytes
if open(q, "rb").read() != before + b"\x03" * 500: bad.append("rowsmid")
# numpy.save over a file kept as its bytes at the previous close, then a
# stat at once: the array made again while the name is looked up (it gave
# ENOENT in about one try of five, 30 November)
miss = 0
for k in range(20):
    q = f"{mnt}/flip.npy"
    np.save(q, np.ones((27, 1), "c8"))
    fd = os.open(q, os.O_WRONLY); os.pwrite(fd, b"\x07" * 20, os.fstat(fd).st_size + 3); os.close(fd)
    np.save(q, np.ones((36, 30), "c8"))
    try: os.stat(q); os.unlink(q)
    except OSError: miss += 1
if miss: bad.append(f"flip:{miss}")
# text written over an array (truncated at the open) and into an empty
# .npy file: plain frames of the bytes, as for a new file (they stayed
# plain frames under the array's name, NAME.b2nd, before 30 November)
np.save(f"{mnt}/overtext.npy", w)
with open(f"{mnt}/overtext.npy", "wb") as g: g.write(b"over text " * 50)
open(f"{mnt}/emptytext.npy", "wb").close()
with open(f"{mnt}/emptytext.npy", "r+b") as g: g.write(b"text " * 50)
if open(f"{mnt}/overtext.npy", "rb").read() != b"over text " * 50: bad.append("overtext")
if open(f"{mnt}/emptytext.npy", "rb").read() != b"text " * 50: bad.append("emptytext")
print(" ".join(bad) or "ok")
PY
  then r=$(tail -1 "$TMP/append.out"); else r=$(tail -3 "$TMP/append.out"); fi
  [ "$r" = ok ] && ok npy_append_rewrite || nok npy_append_rewrite "$r"
  sums=$(cd "$MNT" && sha256sum -- *.npy)
  unmount_fg "$MNT" npy6
  kinds=$(cd "$S6" && ls | tr '\n' ' ')
  [ "$kinds" = "again.b2nd againcp.b2nd againf.npy.b2frame againrow.b2nd againsave.b2nd app.b2nd back.b2nd cut.b2nd cutpath.npy.b2frame dtype.b2nd emptytext.npy.b2frame grown.b2nd overtext.npy.b2frame part.npy.b2frame rowsmid.npy.b2frame short.npy.b2frame spelled.b2nd tail.npy.b2frame " ] &&
    ok npy_append_kinds || nok npy_append_kinds "SOURCE: $kinds"
  if mount_bg npy6b "$S6" "$MNT" "ro"; then
    [ "$(cd "$MNT" && sha256sum -- *.npy)" = "$sums" ] && cmp -s "$MNT/app.npy" "$TMP/app.want" &&
      cmp -s "$MNT/tail.npy" "$TMP/tail.want" && cmp -s "$MNT/grown.npy" "$TMP/grown.in.npy" &&
      ok npy_append_remount || nok npy_append_remount "the files read otherwise after a remount"
    unmount_fg "$MNT" npy6b
  else
    nok npy_append_remount "cannot mount"
  fi
  "$B2F" scrub "$S6" >"$TMP/scrub6.out" 2>&1 && grep -q " 0 damaged frames" "$TMP/scrub6.out" &&
    ok npy_append_scrub || nok npy_append_scrub "$(tail -c 300 "$TMP/scrub6.out")"
  if have_pyb2; then
    r=$("$PYB2" - "$S6" "$TMP" 2>&1 <<'PY'
import sys, numpy as np, blosc2
s, t = sys.argv[1:3]
for n, w in (("app", "app.want.npy"), ("grown", "grown.in.npy"), ("cut", "cut.in.npy"),
             ("dtype", "dtype.want"), ("again", "again.in.npy"), ("againsave", "again.in.npy"),
             ("againcp", "again.in.npy")):
    a = blosc2.open(f"{s}/{n}.b2nd")
    want = np.load(f"{t}/{w}")
    assert isinstance(a, blosc2.NDArray) and a.shape == want.shape, (n, a.shape)
    assert np.array_equal(a[...], want), n
print("ok")
PY
)
    [ "$r" = ok ] && ok npy_append_pyb2 || nok npy_append_pyb2 "$(tail -c 300 <<<"$r")"
  fi
else
  nok npy_append_rewrite "cannot mount"
fi

# ---- 7. the life of .npy files against a plain directory --------------------
S7=$TMP/src7 SH7=$TMP/shadow7
mkdir -p "$S7" "$SH7"
if mount_bg npy7 "$S7" "$MNT" "clevel=1,locking=on"; then
  r=ok
  for seed in ${B2FS_NPY_LIFE_SEEDS:-1 2 3 4 5 6 7 8}; do
    rm -rf "${SH7:?}"/* "$MNT"/*
    out=$(timeout -s KILL 300 "$PY" tests/npy_life.py "$MNT" "$SH7" "$seed" "${B2FS_NPY_LIFE_OPS:-150}" 2>&1 | tail -3)
    if [ "$out" != ok ]; then r=$out; break; fi
  done
  [ "$r" = ok ] && ok npy_life || nok npy_life "$r"
  unmount_fg "$MNT" npy7
  # nothing hidden left behind (locking=on: no sidecar of a frame gone)
  left=$(cd "$S7" && ls -A | grep -E '^\.b2fs-gone-|\.b2tmp' | head -3)
  [ -z "$left" ] && ok npy_life_nothing_left || nok npy_life_nothing_left "$left"
  if [ "$r" = ok ] && mount_bg npy7b "$S7" "$MNT" "ro"; then
    same=ok
    for f in "$SH7"/*; do [ -e "$f" ] && ! cmp -s "$f" "$MNT/${f##*/}" && same="differs: ${f##*/}"; done
    [ "$(ls "$MNT" | wc -l)" = "$(ls "$SH7" | wc -l)" ] || same="names: $(ls "$MNT" | tr '\n' ' ')"
    [ "$same" = ok ] && ok npy_life_remount || nok npy_life_remount "$same"
    unmount_fg "$MNT" npy7b
  else
    nok npy_life_remount "not run"
  fi
  "$B2F" scrub "$S7" >"$TMP/scrub7.out" 2>&1 && grep -q " 0 damaged frames" "$TMP/scrub7.out" &&
    ok npy_life_scrub || nok npy_life_scrub "$(tail -c 300 "$TMP/scrub7.out")"
else
  nok npy_life "cannot mount"
fi
