#!/usr/bin/env bash
# t_store.sh - python-blosc2 stores (EmbedStore .b2e, DictStore and
# TreeStore as .b2d directories and .b2z zips): python-blosc2 writes them
# (tests/store_gen.py), `b2f ls` must list exactly the keys python-blosc2
# lists and `b2f cat` must give every value byte for byte as python-blosc2
# returns it (arrays in C order; --npy loads in NumPy with the same dtype,
# shape and values).  Bookkeeping files are never listed; damaged stores
# fail with one message naming the store, damaged leaves only themselves.
set -u
. "$(dirname "$0")/lib.sh"
if ! have_pyb2; then skip store "no python-blosc2 at $PYB2"; exit 0; fi
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
src=$tmp/src exp=$tmp/exp out=$tmp/out
mkdir -p "$src" "$exp" "$out"
if ! "$PYB2" "$here/store_gen.py" "$src" "$exp" 2>"$tmp/err"; then
  notok store "python-blosc2 could not write the stores: $(tail -c 300 "$tmp/err")"; exit 0
fi

stores="x.b2e t.b2d t.b2z d.b2d d.b2z o.b2d"

# keys NAME STORE: b2f ls of STORE lists the keys python-blosc2 listed.
keys() {
  if "$B2F" ls "$2" >"$out/$1.keys" 2>"$tmp/err" && cmp -s "$out/$1.keys" "$exp/$1.keys"; then
    ok "ls $1"
  else
    notok "ls $1" "$(diff "$exp/$1.keys" "$out/$1.keys" | head -5 | tr '\n' ' ') $(head -c 200 "$tmp/err")"
  fi
}

# values NAME STORE: every value through b2f cat.
values() {
  local name=$1 store=$2 bad=0 n=0 key kind file
  while IFS=$'\t' read -r key kind file _; do
    n=$((n + 1))
    case $kind in
      nd)  "$B2F" cat --c-order "$store" "$key" >"$out/v" 2>"$tmp/err" &&
           cmp -s "$out/v" "$file" &&
           "$B2F" cat --npy "$store" "$key" >"$out/v.npy" 2>>"$tmp/err" &&
           "$PYB2" -c 'import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
sys.exit(not (a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()))' "$out/v.npy" "$file.npy" ;;
      sc)  "$B2F" cat "$store" "$key" >"$out/v" 2>"$tmp/err" && cmp -s "$out/v" "$file" ;;
      obj) "$B2F" cat "$store" "$key" >"$out/v" 2>"$tmp/err" &&
           "$PYB2" -c 'import sys, blosc2
v = blosc2.from_cframe(open(sys.argv[1], "rb").read())
sys.exit(repr(list(v)).encode() != open(sys.argv[2], "rb").read())' "$out/v" "$file" ;;
    esac || { bad=$((bad + 1)); notok "cat $name $key ($kind)" "$(head -c 300 "$tmp/err")"; }
  done <"$exp/$name.tsv"
  [ "$bad" -eq 0 ] && [ "$n" -gt 0 ] && ok "cat $name: $n values as python-blosc2 returns them"
}

for s in $stores; do
  keys "$s" "$src/$s"
  values "$s" "$src/$s"
done

# Embedded, external and zip-member values are all there.
"$B2F" ls -l "$src/t.b2z" >"$out/l" 2>&1
check "ls -l: members and embedded values" \
  grep -q "member .*/a/big" "$out/l" && grep -q "embedded .*/a/b " "$out/l"
"$B2F" ls -l "$src/o.b2d" >"$out/l" 2>&1
check "ls -l: objects are named" grep -q "^objectarray .*/o " "$out/l"

# A leaf keeps its own attributes when extracted whole.
"$B2F" cat --raw "$src/t.b2z" /a/b >"$out/raw.b2nd" 2>"$tmp/err"
check "cat --raw keeps the leaf's attributes" "$PYB2" -c 'import sys, blosc2
a = blosc2.open(sys.argv[1])
sys.exit(not (a.vlmeta["leafattr"] == "hi" and list(a[:]) == list(range(10))))' "$out/raw.b2nd"

# Bookkeeping is not listed: lock sidecars, temporary files (even ones
# holding a whole frame), b2fs temporaries.
cp -r "$src/t.b2d" "$tmp/decoy.b2d"
cp "$src/t.b2d/a/big.b2nd" "$tmp/decoy.b2d/a/big.b2nd.123.tmp"
: >"$tmp/decoy.b2d/a/big.b2nd.b2lock"; : >"$tmp/decoy.b2d/embed.b2e.b2lock"
cp "$src/t.b2d/s.b2f" "$tmp/decoy.b2d/.s.b2f.b2tmp"
echo "not a frame" >"$tmp/decoy.b2d/notes.txt"
"$B2F" ls "$tmp/decoy.b2d" >"$out/decoy.keys" 2>"$tmp/err"
check "bookkeeping files are not listed" cmp -s "$out/decoy.keys" "$exp/t.b2d.keys"

# A deflated leaf cannot be read in place: left out (as python-blosc2
# does), with a note.
"$PY" - "$src/t.b2z" "$tmp/defl.b2z" "$tmp/defl_embed.b2z" <<'PY'
import sys, zipfile
src, leaf, emb = sys.argv[1:]
with zipfile.ZipFile(src) as z:
    items = [(i.filename, z.read(i.filename)) for i in z.infolist()]
for path, deflate in ((leaf, "a/big.b2nd"), (emb, "embed.b2e")):
    with zipfile.ZipFile(path, "w") as z:
        for n, d in items:
            z.writestr(n, d, zipfile.ZIP_DEFLATED if n == deflate else zipfile.ZIP_STORED)
PY
"$B2F" ls "$tmp/defl.b2z" >"$out/defl.keys" 2>"$tmp/err"
grep -v '^/a/big$' "$exp/t.b2z.keys" >"$out/defl.want"
check "deflated leaf left out" cmp -s "$out/defl.keys" "$out/defl.want"
check "deflated leaf: a note names it" grep -q "a/big.b2nd is compressed" "$tmp/err"

# zip64: more than 65535 members (the zip64 end record) and members with
# zip64 local extra fields, as Python's zipfile writes them.
"$PY" - "$src/t.b2z" "$tmp/z64.b2z" <<'PY'
import sys, zipfile
src, dst = sys.argv[1:]
with zipfile.ZipFile(src) as z:
    items = [(i.filename, z.read(i.filename)) for i in z.infolist()]
with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
    for k in range(66000):
        z.writestr(f"pad/x{k}.txt", b"")
    for n, d in items:
        with z.open(n, "w", force_zip64=True) as f:
            f.write(d)
PY
"$B2F" ls "$tmp/z64.b2z" >"$out/z64.keys" 2>"$tmp/err"
check "zip64 archive: the same keys" cmp -s "$out/z64.keys" "$exp/t.b2z.keys"
key=$(grep -P '^/a/big\t' "$exp/t.b2z.tsv" | cut -f3)
"$B2F" cat --c-order "$tmp/z64.b2z" /a/big 2>/dev/null | cmp -s - "$key"
check "zip64 archive: a value reads" [ $? -eq 0 ]

# damaged NAME FILE: b2f ls fails with status 1 and one message naming it.
damaged() {
  local rc
  [ -e "$2" ] || { notok "damaged store: $1" "$2 was not made"; return; }
  "$B2F" ls "$2" >/dev/null 2>"$tmp/err"; rc=$?
  if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "^b2f: $2: " "$tmp/err"; then
    ok "damaged store: $1"
  else
    notok "damaged store: $1" "status $rc: $(head -c 300 "$tmp/err")"
  fi
}
damaged "deflated embed.b2e" "$tmp/defl_embed.b2z"
head -c $(($(stat -c %s "$src/t.b2z") - 30)) "$src/t.b2z" >"$tmp/trunc.b2z"
damaged "truncated zip" "$tmp/trunc.b2z"
"$PY" - "$src/t.b2z" "$tmp" <<'PY'
import sys, struct
src, tmp = sys.argv[1:]
data = bytearray(open(src, "rb").read())
eocd = data.rindex(b"PK\x05\x06")
cd_size, cd_off = struct.unpack_from("<II", data, eocd + 12)
def save(name, buf): open(f"{tmp}/{name}", "wb").write(buf)
b = bytearray(data); b[cd_off:cd_off + 4] = b"XXXX"; save("badcd.b2z", b)
b = bytearray(data); struct.pack_into("<I", b, eocd + 12, cd_size + 1000); save("cdsize.b2z", b)
b = bytearray(data); struct.pack_into("<H", b, eocd + 10, 60000); save("count.b2z", b)
# the first member's local header offset points past the directory
b = bytearray(data); struct.pack_into("<I", b, cd_off + 42, cd_off + 10); save("lho.b2z", b)
# the first member's size runs into the central directory
b = bytearray(data); struct.pack_into("<II", b, cd_off + 20, 1 << 30, 1 << 30); save("csize.b2z", b)
save("notzip.b2z", b"hello, world\n" * 10)
PY
damaged "bad central directory signature" "$tmp/badcd.b2z"
damaged "central directory size past its end" "$tmp/cdsize.b2z"
damaged "entry count beyond the directory" "$tmp/count.b2z"
damaged "local header offset past the directory" "$tmp/lho.b2z"
damaged "member size past the directory" "$tmp/csize.b2z"
damaged "not a zip" "$tmp/notzip.b2z"

# Broken EmbedStore indexes (python-blosc2 rewrites estore_metadata).
"$PYB2" - "$src/x.b2e" "$tmp" <<'PY' 2>/dev/null
import shutil, sys, blosc2
src, tmp = sys.argv[1:]
for name, value in (("idx_bin", b"\x00garbage"),
                    ("idx_range", {"embed_map": {"/a": {"offset": 10**9, "length": 5}}, "current_offset": 0}),
                    ("idx_len", {"embed_map": {"/a": {"offset": 0, "length": -3}}, "current_offset": 0}),
                    ("idx_type", {"embed_map": {"/a": "nothing"}, "current_offset": 0}),
                    ("idx_none", {"current_offset": 0})):
    shutil.copy(src, f"{tmp}/{name}.b2e")
    s = blosc2.blosc2_ext.open(f"{tmp}/{name}.b2e", mode="a", offset=0)
    s.vlmeta["estore_metadata"] = value
PY
for n in idx_bin idx_range idx_len idx_type idx_none; do damaged "index $n" "$tmp/$n.b2e"; done
head -c 100 "$src/x.b2e" >"$tmp/trunc.b2e"
damaged "truncated .b2e" "$tmp/trunc.b2e"
cp -r "$src/d.b2d" "$tmp/noembed.b2d"; echo junk >"$tmp/noembed.b2d/embed.b2e"
damaged ".b2d with a broken embed.b2e" "$tmp/noembed.b2d"

# A damaged leaf fails alone: listed, its cat fails naming it, the others read.
cp -r "$src/t.b2d" "$tmp/leaf.b2d"
head -c 100 "$src/t.b2d/a/big.b2nd" >"$tmp/leaf.b2d/a/big.b2nd"
"$B2F" ls "$tmp/leaf.b2d" >"$out/leaf.keys" 2>"$tmp/err"
check "damaged leaf: still listed" cmp -s "$out/leaf.keys" "$exp/t.b2d.keys"
"$B2F" cat --c-order "$tmp/leaf.b2d" /a/big >/dev/null 2>"$tmp/err"; rc=$?
check "damaged leaf: cat fails naming it" [ "$rc" -eq 1 ] && grep -q "leaf.b2d:/a/big" "$tmp/err"
key=$(grep -P '^/s\t' "$exp/t.b2d.tsv" | cut -f3)
"$B2F" cat "$tmp/leaf.b2d" /s 2>/dev/null | cmp -s - "$key"
check "damaged leaf: the others still read" [ $? -eq 0 ]

# Usage errors.
"$B2F" cat "$src/t.b2d" /a >/dev/null 2>&1; check "cat of a group fails" [ $? -eq 1 ]
"$B2F" cat "$src/t.b2d" /nope >/dev/null 2>&1; check "cat of a missing key fails" [ $? -eq 1 ]
"$B2F" cat --c-order "$src/x.b2e" /d >/dev/null 2>&1; check "cat --c-order of an SChunk fails" [ $? -eq 1 ]
"$B2F" ls "$tmp/plain.txt" >/dev/null 2>&1; check "ls of a non-store fails" [ $? -eq 1 ]

# ---- through the mount ------------------------------------------------------
# A SOURCE holding every store: each is a directory whose tree is its keys,
# values read as python-blosc2 returns them, attributes as xattrs,
# bookkeeping hidden, .b2z/.b2e read-only, .b2d leaves writable, a damaged
# store EIO with one log line while the rest works.
if [ ! -x "$B2FS" ] || [ ! -e /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  skip "store mount" "no b2fs, /dev/fuse or fusermount3"; exit 0
fi
TMP=$tmp
. "$here/mount_lib.sh"
msrc=$tmp/msrc mnt=$tmp/mnt
mkdir -p "$msrc" "$mnt"
cp -r "$src"/. "$msrc"/
cp "$tmp/trunc.b2z" "$msrc/bad.b2z"
echo "plain" >"$msrc/plain.txt"
trap 'unmount_all; rm -rf "$tmp"' EXIT
mopts=timeout=0
[ "$(id -u)" = 0 ] && mopts+=,allow_other # another user makes values below
if ! mount_bg store "$msrc" "$mnt" "$mopts"; then
  notok "store mount" "the daemon did not start: $(tail -3 "$tmp/store.log")"; exit 0
fi

# The directory each store is shown as: its short name unless taken (t.b2d
# and t.b2z: the directory takes "t", the zip keeps its full name).
declare -A shown_as=([x.b2e]=x [t.b2d]=t [t.b2z]=t.b2z [d.b2d]=d [d.b2z]=d.b2z [o.b2d]=o)
for s in $stores; do
  top=$mnt/${shown_as[$s]}
  # Files: exactly the values' shown paths; directories: the groups.
  (cd "$top" 2>/dev/null && find . -type f | sed 's|^\.||' | LC_ALL=C sort) >"$out/m.files"
  cut -f4 "$exp/$s.tsv" | LC_ALL=C sort >"$out/m.want"
  check "mount $s: files are the values" cmp -s "$out/m.files" "$out/m.want"
  # Values, compared in one python run.
  if "$PYB2" - "$top" "$exp/$s.tsv" 2>"$tmp/err" <<'PY'; then ok "mount $s: values as python-blosc2 returns them"; else notok "mount $s: values" "$(tail -c 300 "$tmp/err")"; fi
import sys, numpy as np, blosc2
top, tsv = sys.argv[1:]
for line in open(tsv):
    key, kind, file, shown = line.rstrip("\n").split("\t")
    p = top + shown
    if kind == "nd":
        a, b = np.load(p), np.load(file + ".npy")
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), key
    elif kind == "sc":
        assert open(p, "rb").read() == open(file, "rb").read(), key
    else:
        v = blosc2.from_cframe(open(p, "rb").read())
        assert repr(list(v)).encode() == open(file, "rb").read(), key
PY
done
check "mount: a store is a directory" test -d "$mnt/t/g/h"
# Its directories list "." and ".." first, then the keys (ls -f: readdir's order).
for d in "$mnt/t" "$mnt/t/g" "$mnt/t.b2z"; do
  check "mount: ${d#"$mnt"/} lists . and .. and its keys" bash -c \
    '[ "$(ls -a1f "$1" | head -2 | tr "\n" " ")" = ". .. " ] &&
     [ "$(ls -a1f "$1" | tail -n +3 | LC_ALL=C sort)" = "$(ls -1 "$1" | LC_ALL=C sort)" ] &&
     [ "$(ls -1 "$1" | wc -l)" -gt 0 ]' _ "$d"
done
check "mount: bookkeeping hidden" test ! -e "$mnt/t/embed.b2e" -a ! -e "$mnt/t/__vlmeta__" -a ! -e "$mnt/t.b2z/a/__vlmeta__"

# Attributes: the groups' (TreeStore vlmeta) on directories, the leaves'
# own with the frame's on files.
if "$PYB2" - "$mnt" 2>"$tmp/err" <<'PY'; then ok "mount: group and leaf attributes"; else notok "mount: attributes" "$(tail -c 300 "$tmp/err")"; fi
import os, sys, msgpack
m = sys.argv[1]
def attr(p, n): return msgpack.unpackb(os.getxattr(p, "user.b2.vlmeta." + n))
for t in ("t", "t.b2z"):
    assert attr(f"{m}/{t}/a", "x") == 1
    assert attr(f"{m}/{t}/g/h", "deep") == "yes"
    assert attr(f"{m}/{t}/a/b.npy", "leafattr") == "hi"
    assert os.getxattr(f"{m}/{t}/a/b.npy", "user.b2.dtype") == b"<i4"
    assert "user.b2.vlmeta.k" in os.listxattr(f"{m}/{t}")
assert attr(f"{m}/o", "root") == "file carrier"
assert os.getxattr(f"{m}/o/o.b2f", "user.b2.kind") == b"objectarray"
PY

# Read-only: nothing in a zip or an EmbedStore is written, no store entry
# removed or renamed, no directory made there (.b2d: below).
erofs() { # NAME COMMAND...: fails with "Read-only file system"
  local name=$1; shift
  if "$@" 2>"$tmp/err"; then notok "$name" "succeeded"
  elif grep -q "Read-only file system" "$tmp/err"; then ok "$name"
  else notok "$name" "$(head -c 200 "$tmp/err")"; fi
}
before=$(sha256sum <"$msrc/t.b2z")
erofs "EROFS: write into a .b2z value" sh -c "echo x >>'$mnt/t.b2z/s'"
erofs "EROFS: new file in a .b2z" touch "$mnt/t.b2z/a/new"
erofs "EROFS: mkdir in a .b2z" mkdir "$mnt/t.b2z/a/sub"
erofs "EROFS: rename a store" mv "$mnt/x" "$mnt/y"
erofs "EROFS: chmod of a member" chmod 600 "$mnt/x/u.npy"
check "the .b2z is unchanged" [ "$(sha256sum <"$msrc/t.b2z")" = "$before" ]

# A .b2d leaf is an ordinary frame: writable, and python-blosc2 reads it.
old=$(grep -P '^/s\t' "$exp/t.b2d.tsv" | cut -f3)
printf 'APPENDED' >>"$mnt/t/s"
"$PYB2" - "$msrc/t.b2d" "$old" 2>"$tmp/err" <<'PY'
import sys, blosc2
ts = blosc2.TreeStore(sys.argv[1], mode="r")
assert bytes(ts["/s"][:]) == open(sys.argv[2], "rb").read() + b"APPENDED"
PY
check "a .b2d leaf written through the mount reads in python-blosc2" [ $? -eq 0 ]

# New values in a .b2d (python-blosc2 finds its values in files by walking
# it): numpy.save of NAME.npy makes the array NAME.b2nd, another new file an
# SChunk NAME.b2f, in the group's directory (made when its values were all
# embedded, as g/h's).  Keys already there: EEXIST; names python-blosc2
# would not make: EINVAL; .b2z, .b2e and a CTable's group: EROFS.
"$PYB2" - "$mnt" 2>"$tmp/err" <<'PY'
import errno, os, sys, numpy as np
m = sys.argv[1]
np.save(f"{m}/t/fresh.npy", np.arange(12.).reshape(3, 4))
np.save(f"{m}/t/g/h/fresh2.npy", np.arange(100, dtype="<i2"))
np.save(f"{m}/d/fresh3.npy", np.ones((4, 5), dtype="<f4"))
with open(f"{m}/t/rawnew", "wb") as f:
    f.write(b"0123456789abcdef")
assert (np.load(f"{m}/t/fresh.npy") == np.arange(12.).reshape(3, 4)).all()
assert "fresh2.npy" in os.listdir(f"{m}/t/g/h") and "rawnew" in os.listdir(f"{m}/t")
for p, e in ((f"{m}/t/a/b", errno.EEXIST), (f"{m}/t/a/b.npy", errno.EEXIST),
             (f"{m}/t/.b2fs-x", errno.EINVAL), (f"{m}/t/__vlmeta__", errno.EINVAL),
             (f"{m}/t.b2z/a/new.npy", errno.EROFS), (f"{m}/x/new", errno.EROFS),
             (f"{m}/o/tbl/new.npy", errno.EROFS)):
    try:
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        sys.exit(p + ": created")
    except OSError as x:
        assert x.errno == e, (p, errno.errorcode.get(x.errno), errno.errorcode[e])
PY
check "new values in a .b2d through the mount; refusals" [ $? -eq 0 ]
# A group's directory is made beneath the store without following links:
# ln.b2d's /grp/sub has no directory (its value is embedded); a link out of
# the store planted as grp is not followed (a mkdirat of grp/sub would be).
"$PYB2" -c 'import sys, numpy as np, blosc2
with blosc2.DictStore(sys.argv[1], mode="w", threshold=10**6) as ds:
    ds["/grp/sub/v"] = np.arange(3)' "$msrc/ln.b2d"
mkdir -p "$tmp/outside"; ln -s "$tmp/outside" "$msrc/ln.b2d/grp"
: 2>/dev/null >"$mnt/ln/grp/sub/new"
check "a link in a .b2d is not followed to make a group's directory" \
  test -s "$mnt/ln/grp/sub/v.npy" -a ! -e "$mnt/ln/grp/sub/new" -a -z "$(ls -A "$tmp/outside")"
"$PYB2" - "$msrc" 2>"$tmp/err" <<'PY'
import sys, numpy as np, blosc2
src = sys.argv[1]
ts = blosc2.TreeStore(f"{src}/t.b2d", mode="r")
assert {"/fresh", "/g/h/fresh2", "/rawnew", "/a/b", "/g/h/i"} <= set(ts.keys()), sorted(ts.keys())
assert (ts["/fresh"][:] == np.arange(12.).reshape(3, 4)).all()
assert ts["/g/h/fresh2"].dtype == np.dtype("<i2") and (ts["/g/h/fresh2"][:] == np.arange(100)).all()
assert b"".join(ts["/rawnew"].decompress_chunk(i) for i in range(ts["/rawnew"].nchunks)) == b"0123456789abcdef"
assert list(ts["/a/b"][:]) == list(range(10))
ds = blosc2.DictStore(f"{src}/d.b2d", mode="r")
assert (ds["/fresh3"][:] == np.ones((4, 5), dtype="<f4")).all() and "/small" in ds.keys()
PY
check "python-blosc2 opens the .b2d stores with the new values" [ $? -eq 0 ]
"$B2F" ls "$msrc/t.b2d" >"$out/t.keys.new" 2>"$tmp/err"
check "b2f ls lists the new values" grep -qx "/g/h/fresh2" "$out/t.keys.new"
# Removing a .b2d value in a file of its own deletes the file, as
# python-blosc2's del does (embedded values: below).
rm "$mnt/t/fresh.npy" 2>"$tmp/err"; rc1=$?
check "rm of a .b2d value in a file of its own" \
  test "$rc1" -eq 0 -a ! -e "$msrc/t.b2d/fresh.b2nd" -a ! -e "$mnt/t/fresh.npy"
"$PYB2" -c 'import sys, blosc2
ks = set(blosc2.TreeStore(sys.argv[1], mode="r").keys())
sys.exit(not ("/fresh" not in ks and {"/a/b", "/g/h/fresh2", "/rawnew"} <= ks))' "$msrc/t.b2d"
check "python-blosc2 no longer finds the value removed" [ $? -eq 0 ]

# Renames inside a .b2d move a value's file to where python-blosc2 finds
# it under its new key (a group's directory made when missing); across a
# store's boundary EXDEV, so mv copies and removes; groups are made and
# removed as directories.
"$PYB2" - "$mnt" "$msrc" 2>"$tmp/err" <<'PY'
import errno, os, sys, numpy as np
m, src = sys.argv[1], sys.argv[2]
def fails(e, f, *a):
    try:
        f(*a)
    except OSError as x:
        assert x.errno == e, (a, errno.errorcode.get(x.errno), errno.errorcode[e])
        return
    raise AssertionError(f"{a}: succeeded")
np.save(f"{m}/t/mv1.npy", np.arange(7, dtype="<i8"))
os.rename(f"{m}/t/mv1.npy", f"{m}/t/mv2.npy")              # same group
os.rename(f"{m}/t/mv2.npy", f"{m}/t/g/h/mv3.npy")          # a group with no directory yet
assert os.path.isfile(f"{src}/t.b2d/g/h/mv3.b2nd") and not os.path.exists(f"{src}/t.b2d/mv2.b2nd")
np.save(f"{m}/t/mv4.npy", np.zeros(3))
os.rename(f"{m}/t/mv4.npy", f"{m}/t/g/h/fresh2.npy")       # over a value in a file
assert (np.load(f"{m}/t/g/h/fresh2.npy") == np.zeros(3)).all()
os.rename(f"{m}/t/rawnew", f"{m}/t/raw2")                  # an SChunk keeps its kind
os.rename(f"{m}/t/raw2", f"{m}/t/raw3.npy")                # still an SChunk, key /raw3.npy
assert os.path.isfile(f"{src}/t.b2d/raw3.npy.b2f") and open(f"{m}/t/raw3.npy", "rb").read() == b"0123456789abcdef"
os.rename(f"{m}/t/raw3.npy", f"{m}/t/raw2")
np.save(f"{m}/t/arr.npy", np.arange(3))
fails(errno.EXDEV, os.rename, f"{m}/t/arr.npy", f"{m}/t/arr2")   # an array's name is NAME.npy: copy
os.remove(f"{m}/t/arr.npy")
fails(errno.EROFS, os.rename, f"{m}/t/g/h/mv3.npy", f"{m}/t/a/b.npy")  # over an embedded one
# Embedded values get their new key in the EmbedStore's index.
os.rename(f"{m}/t/a/b.npy", f"{m}/t/a/c.npy")
assert (np.load(f"{m}/t/a/c.npy") == np.arange(10)).all() and not os.path.exists(f"{m}/t/a/b.npy")
os.rename(f"{m}/t/a/c.npy", f"{m}/t/g/c2.npy")                    # into another group
fails(errno.EXDEV, os.rename, f"{m}/t/g/c2.npy", f"{m}/t/g/c3")   # an array's name is NAME.npy
fails(errno.EXDEV, os.rename, f"{m}/t/g/c2.npy", f"{m}/d/c2.npy") # another store
fails(errno.EEXIST, os.rename, f"{m}/t/g/c2.npy", f"{m}/t/g/h/fresh2.npy")  # a value in a file
os.rename(f"{m}/t/g/c2.npy", f"{m}/t/a/b.npy")                    # and back
fails(errno.EXDEV, os.rename, f"{m}/t/g", f"{m}/t/g9")            # holds embedded values: copy
fails(errno.EROFS, os.rename, f"{m}/t.b2z/a/b.npy", f"{m}/t.b2z/a/c.npy")  # a zip's
fails(errno.EROFS, os.remove, f"{m}/t.b2z/a/b.npy")
os.remove(f"{m}/x/d")              # an EmbedStore's (.b2e) value
os.remove(f"{m}/d/small.npy")      # a DictStore's embedded value
fails(errno.ENOENT, os.remove, f"{m}/d/small.npy")
assert "d" not in os.listdir(f"{m}/x") and "small.npy" not in os.listdir(f"{m}/d")
fails(errno.EXDEV, os.rename, f"{m}/t/g/h/mv3.npy", f"{m}/d/mv3.npy")  # another store
fails(errno.EXDEV, os.rename, f"{m}/t/g/h/mv3.npy", f"{m}/mv3.npy")    # out of it
fails(errno.EXDEV, os.rename, f"{m}/plain.txt", f"{m}/t/plain.txt")    # into it
fails(errno.ENOENT, os.rename, f"{m}/t/nothere.npy", f"{m}/t/x.npy")
os.makedirs(f"{m}/t/newg/sub")
assert os.path.isdir(f"{src}/t.b2d/newg/sub") and "newg" in os.listdir(f"{m}/t")
np.save(f"{m}/t/newg/sub/v.npy", np.arange(4, dtype="<u1"))
fails(errno.ENOTEMPTY, os.rmdir, f"{m}/t/newg")
fails(errno.EEXIST, os.mkdir, f"{m}/t/newg")
fails(errno.EINVAL, os.mkdir, f"{m}/t/.b2fs-mine")              # the daemon's own names
os.mkdir(f"{m}/t/.dotg")                                         # a dot name is a key
open(f"{m}/t/.dotg/.dotv", "wb").write(b"dot")
assert os.path.isfile(f"{src}/t.b2d/.dotg/.dotv.b2f")
fails(errno.EROFS, os.mkdir, f"{m}/o/tbl/sub")
os.mkdir(f"{m}/t/emptyg")
os.rmdir(f"{m}/t/emptyg")
assert not os.path.exists(f"{src}/t.b2d/emptyg") and "emptyg" not in os.listdir(f"{m}/t")
# A group whose values all lie in files moves with its directory; the
# directory inode the kernel holds follows it (a working directory too).
os.makedirs(f"{m}/t/mvg/in")
np.save(f"{m}/t/mvg/in/w.npy", np.arange(5, dtype="<i2"))
here = os.getcwd()
os.chdir(f"{m}/t/mvg/in")
os.rename(f"{m}/t/mvg", f"{m}/t/mvg2")
assert (np.load("w.npy") == np.arange(5)).all() and os.listdir(".") == ["w.npy"]
os.chdir(here)
assert os.path.isfile(f"{src}/t.b2d/mvg2/in/w.b2nd") and not os.path.exists(f"{src}/t.b2d/mvg")
os.mkdir(f"{m}/t/mvg3")
os.rename(f"{m}/t/mvg2", f"{m}/t/mvg3")                           # over an empty group
fails(errno.ENOTEMPTY, os.rename, f"{m}/t/newg", f"{m}/t/mvg3")  # over one that holds values
fails(errno.EINVAL, os.rename, f"{m}/t/mvg3", f"{m}/t/mvg3/in/x") # into itself
fails(errno.ENOTEMPTY, os.rename, f"{m}/t/mvg3/in/w.npy", f"{m}/t/mvg3")  # onto a group above
fails(errno.ENOTDIR, os.rename, f"{m}/t/mvg3", f"{m}/t/g/h/fresh2.npy")  # onto a value
fails(errno.EINVAL, os.rename, f"{m}/t/mvg3", f"{m}/t/.b2fs-mvg")
fails(errno.EXDEV, os.rename, f"{m}/t/mvg3", f"{m}/d/mvg3")      # another store
os.rename(f"{m}/t/g/h/fresh2.npy", f"{m}/t/g/h/fresh2.npy")      # onto itself
os.makedirs(f"{m}/t/held/in")                                    # a group whose value is
open(f"{m}/t/held/in/v", "wb").write(b"kept open")                # removed while open goes
fd = os.open(f"{m}/t/held/in/v", os.O_RDWR)
os.remove(f"{m}/t/held/in/v")
os.rmdir(f"{m}/t/held/in")
os.rmdir(f"{m}/t/held")
assert os.pread(fd, 100, 0) == b"kept open" and not os.path.exists(f"{src}/t.b2d/held")
os.close(fd)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def exchange(a, b):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
fails(errno.EINVAL, exchange, f"{m}/t/g/h/fresh2.npy", f"{m}/t/raw2")  # no swaps in a store
PY
if [ $? -eq 0 ]; then ok "renames, new groups and removed groups in a .b2d; refusals"; else notok "renames, new groups and removed groups in a .b2d; refusals" "$(tail -c 600 "$tmp/err" | tr "\n" " ")"; fi
echo "move me" >"$msrc/mvme.txt"
mv "$mnt/t/g/h/mv3.npy" "$mnt/d/" 2>"$tmp/err" && mv "$mnt/mvme.txt" "$mnt/t/" 2>>"$tmp/err"
check "mv between stores and into one copies and removes, quietly" \
  test ! -s "$tmp/err" -a -s "$msrc/d.b2d/mv3.b2nd" -a ! -e "$msrc/t.b2d/g/h/mv3.b2nd" \
  -a -s "$msrc/t.b2d/mvme.txt.b2f" -a ! -e "$msrc/mvme.txt"
mv "$mnt/t/mvme.txt" "$mnt/" 2>>"$tmp/err"
check "mv out of a store" \
  test "$(cat "$mnt/mvme.txt")" = "move me" -a ! -e "$msrc/t.b2d/mvme.txt.b2f" -a ! -s "$tmp/err"
"$PYB2" - "$msrc" 2>"$tmp/err" <<'PY'
import sys, numpy as np, blosc2
src = sys.argv[1]
ts = blosc2.TreeStore(f"{src}/t.b2d", mode="r")
ks = set(ts.keys())
assert {"/g/h/mv3" not in ks, "/mv1" not in ks, "/mv2" not in ks} == {True}, sorted(ks)
assert "/mvg3/in/w" in ks and not any(k.startswith("/mvg2") for k in ks), sorted(ks)
assert (ts["/mvg3/in/w"][:] == np.arange(5)).all()
assert {"/raw2", "/newg/sub/v", "/g/h/fresh2"} <= ks and "/emptyg" not in ks, sorted(ks)
assert (ts["/newg/sub/v"][:] == np.arange(4)).all() and (ts["/g/h/fresh2"][:] == 0).all()
assert b"".join(ts["/raw2"].decompress_chunk(i) for i in range(ts["/raw2"].nchunks)) == b"0123456789abcdef"
assert list(ts["/a/b"][:]) == list(range(10)) and "/a/c" not in ks and "/g/c2" not in ks
ds = blosc2.DictStore(f"{src}/d.b2d", mode="r")
assert (ds["/mv3"][:] == np.arange(7)).all() and "/small" not in ds.keys()
assert (ds["/big"][:] == np.arange(3000).reshape(30, 100)).all()
es = blosc2.EmbedStore(urlpath=f"{src}/x.b2e", mode="r")
assert "/d" not in es.keys() and (es["/multi"][:] == np.arange(5000)).all(), sorted(es.keys())
PY
if [ $? -eq 0 ]; then ok "python-blosc2 finds the values under their new keys"; else notok "python-blosc2 finds the values under their new keys" "$(tail -c 300 "$tmp/err")"; fi

# python-blosc2 sharing a .b2d under locking sees the values made, renamed
# and removed through the mount without opening the store again (the mount
# moves its EmbedStore's lock counter, as python-blosc2 does for its own).
"$PYB2" - "$mnt" "$msrc" 2>"$tmp/err" <<'PY'
import os, sys, numpy as np, blosc2
m, src = sys.argv[1], sys.argv[2]
with blosc2.TreeStore(f"{src}/sh.b2d", mode="w", locking=True, threshold=10**6) as ts:
    ts["/seed"] = np.arange(3)
    ts["/eg/x"] = np.arange(2)  # embedded: the group has no directory
    ts["/emb"] = np.arange(2)
ts = blosc2.TreeStore(f"{src}/sh.b2d", mode="r", locking=True)
assert set(ts.keys()) == {"/seed", "/eg", "/eg/x", "/emb"}
np.save(f"{m}/sh/new.npy", np.arange(9, dtype="<i2"))
assert "/new" in ts.keys() and (ts["/new"][:] == np.arange(9)).all(), sorted(ts.keys())
os.rename(f"{m}/sh/new.npy", f"{m}/sh/new2.npy")
assert "/new" not in ts.keys() and "/new2" in ts.keys(), sorted(ts.keys())
os.remove(f"{m}/sh/new2.npy")
os.rename(f"{m}/sh/emb.npy", f"{m}/sh/emb2.npy")  # in the EmbedStore's index
assert set(ts.keys()) == {"/seed", "/eg", "/eg/x", "/emb2"}, sorted(ts.keys())
os.remove(f"{m}/sh/emb2.npy")
assert set(ts.keys()) == {"/seed", "/eg", "/eg/x"}, sorted(ts.keys())
PY
if [ $? -eq 0 ]; then ok "python-blosc2 under locking sees values made, renamed, removed"
else notok "python-blosc2 under locking sees values made, renamed, removed" "$(tail -c 400 "$tmp/err" | tr '\n' ' ')"; fi
# Groups made for another user's new value are that user's, as its file.
if [ "$(id -u)" = 0 ] && id -u nobody >/dev/null 2>&1 && have_numpy; then
  chmod 755 "$tmp" "$msrc"; chmod 777 "$msrc/sh.b2d"
  runuser -u nobody -- "$PY" -c 'import os, sys, numpy as np
np.save(sys.argv[1] + "/eg/v.npy", np.arange(3))
os.makedirs(sys.argv[1] + "/ug/sub")
np.save(sys.argv[1] + "/ug/sub/v.npy", np.arange(3))' "$mnt/sh" 2>"$tmp/err"
  if [ -s "$tmp/err" ]; then notok "another user makes groups and values" "$(tail -c 300 "$tmp/err")"; fi
  check "groups made for another user's value are that user's: owners" \
    test "$(cd "$msrc/sh.b2d" && stat -c %U eg eg/v.b2nd ug ug/sub ug/sub/v.b2nd | sort -u)" = nobody
else
  skip "groups made for another user's value are that user's" "needs root, the user nobody, numpy"
fi

# Changes behind the mount: python-blosc2 adds values to the .b2d (a file
# and an embedded one) and rewrites the .b2z; the mount shows them.
"$PYB2" - "$msrc" 2>"$tmp/err" <<'PY'
import sys, numpy as np, blosc2
src = sys.argv[1]
with blosc2.TreeStore(f"{src}/t.b2d", mode="a", threshold=1000) as ts:
    ts["/a/new"] = np.arange(500, dtype="<i4")  # a file
    ts["/a/tiny2"] = np.arange(5, dtype="<i2")  # embedded: embed.b2e changes
with blosc2.TreeStore(f"{src}/t.b2z", mode="a") as ts:
    ts["/z/new"] = np.arange(6, dtype="<u2")
PY
"$PYB2" - "$mnt" 2>>"$tmp/err" <<'PY'
import sys, numpy as np
m = sys.argv[1]
assert (np.load(f"{m}/t/a/new.npy") == np.arange(500)).all()
assert (np.load(f"{m}/t/a/tiny2.npy") == np.arange(5)).all()
assert np.load(f"{m}/t.b2z/z/new.npy").dtype == np.dtype("<u2")
PY
check "stores changed behind the mount show their new values" [ $? -eq 0 ]

# python-blosc2 changing a store under locking (its EmbedStore rewritten in
# place under the sidecar lock) while the mount reads it: every read holds
# the right values, none fails.
"$PYB2" -c 'import sys, numpy as np, blosc2
with blosc2.TreeStore(sys.argv[1], mode="w", locking=True, threshold=10**6) as ts:
    ts["/seed"] = np.arange(3)' "$msrc/lk.b2d"
"$PYB2" "$here/store_lock.py" write "$msrc/lk.b2d" 5 >"$out/lk.count" 2>"$tmp/lkw.err" &
lkpid=$!
"$PYB2" "$here/store_lock.py" read "$mnt/lk" 5 >"$out/lk.read" 2>"$tmp/lkr.err"; lkrc=$?
wait "$lkpid"
if [ "$lkrc" -eq 0 ] && grep -q "errors=0" "$out/lk.read" && [ "$(cat "$out/lk.count" 2>/dev/null || echo 0)" -gt 0 ]; then
  ok "store changed under locking while read: $(cat "$out/lk.read"), $(cat "$out/lk.count") values written"
else
  notok "store changed under locking while read" "$(cat "$out/lk.read" "$tmp/lkr.err" "$tmp/lkw.err" 2>/dev/null | tail -c 300); log: $(grep lk.b2d "$tmp/store.log" | tail -3)"
fi

# Many members forgotten at once (the kernel drops its dentries while
# three readers look them up again): the daemon keeps running.  Two
# adjacent members freed by two threads once crashed it.
if [ "$(id -u)" = 0 ]; then
  "$PYB2" -c 'import sys, numpy as np, blosc2
with blosc2.TreeStore(sys.argv[1], mode="w", threshold=10**6) as ts:
    for g in range(10):
        for i in range(40):
            ts[f"/g{g}/v{i}"] = np.arange(10)' "$msrc/many.b2d"
  end=$((SECONDS + 8)) lookers=()
  for _ in 1 2 3; do
    (while [ $SECONDS -lt $end ]; do find "$mnt/many" -type f -exec stat -c %s {} + >/dev/null 2>&1; done) &
    lookers+=($!)
  done
  while [ $SECONDS -lt $end ]; do echo 2 >/proc/sys/vm/drop_caches; sleep 0.05; done
  wait "${lookers[@]}"
  check "members forgotten at once: the daemon lives" mountpoint -q "$mnt"
  check "members forgotten at once: values still read" \
    test "$(find "$mnt/many" -type f | wc -l)" = 400
else
  skip "members forgotten at once" "needs root (drop_caches)"
fi

# A .b2d's groups are its directories: their mode, owner, times and the
# user's own attributes are those of the directories in SOURCE, so tar x
# and cp -a of a tree into a store keep them (and exit 0); a CTable's
# group, a .b2z's and a .b2e's stay read-only.
mkdir -p "$tmp/tree/top/sub" && echo "leaf" >"$tmp/tree/top/sub/leaf.txt"
chmod 750 "$tmp/tree/top/sub" && touch -d 2001-02-03T04:05:06 "$tmp/tree/top/sub" "$tmp/tree/top"
setfattr -n user.note -v hi "$tmp/tree/top" 2>/dev/null
tar -C "$tmp/tree" -cf "$tmp/tree.tar" top
check "tar x into a .b2d exits 0" tar --xattrs -C "$mnt/t" -xf "$tmp/tree.tar"
check "cp -a into a .b2d exits 0" cp -a "$tmp/tree/top" "$mnt/t/top2"
check "rsync -aX into a .b2d exits 0 (its dot temporaries are values a while)" \
  rsync -aX "$tmp/tree/top/" "$mnt/t/top3/"
check "rsync -aX into a .b2d: the value" cmp -s "$mnt/t/top3/sub/leaf.txt" "$tmp/tree/top/sub/leaf.txt"
for d in top top2; do
  check "$d: groups keep mode and times (mount and SOURCE)" test     "$(stat -c '%a %Y' "$mnt/t/$d/sub" "$msrc/t.b2d/$d/sub" | sort -u)" =     "$(stat -c '%a %Y' "$tmp/tree/top/sub")"
done
check "cp -a into a .b2d: a group's own attribute"   test "$(getfattr --only-values -n user.note "$mnt/t/top2" 2>/dev/null)" = hi
touch -d 2011-01-01 "$mnt/t/g/h"  # a group of embedded values: its directory is made
check "utime of a group without a directory" test "$(stat -c %Y "$mnt/t/g/h")" =   "$(date -d 2011-01-01 +%s)" -a -d "$msrc/t.b2d/g/h"
check "a group's own attribute removed" setfattr -x user.note "$mnt/t/top2"
erofs "EROFS: chmod of a .b2z's group" chmod 700 "$mnt/t.b2z/a"
erofs "EROFS: chmod of a CTable's group" chmod 700 "$mnt/o/tbl"
erofs "EROFS: python's group attribute set by hand" setfattr -n user.b2.vlmeta.x -v 1 "$mnt/t/a"
"$PYB2" - "$msrc/t.b2d" 2>"$tmp/err" <<'PY'
import sys, blosc2
ks = set(blosc2.TreeStore(sys.argv[1], mode="r").keys())
assert {"/top/sub/leaf.txt", "/top2/sub/leaf.txt", "/top3/sub/leaf.txt", "/.dotg/.dotv"} <= ks, sorted(ks)
PY
check "python-blosc2 finds the values tar and cp made" [ $? -eq 0 ]

# A .npy value whose bytes make no array is kept as the SChunk NAME.npy.b2f
# (python-blosc2's key NAME.npy); a descriptor held open on it and its
# name keep one inode (a truncate by name while it is open is no second
# writer: EBUSY before); numpy.save over it makes it the array NAME.b2nd.
"$PYB2" - "$mnt" "$msrc" 2>"$tmp/err" <<'PY'
import os, sys, time, numpy as np, blosc2
m, src = sys.argv[1], sys.argv[2]
def settled(there, gone):  # the kernel's release after close(2) renames it
    for _ in range(100):
        if os.path.isfile(f"{src}/t.b2d/{there}") and not os.path.exists(f"{src}/t.b2d/{gone}"):
            return True
        time.sleep(0.05)
    return False
p = f"{m}/t/kept.npy"
open(p, "wb").write(b"not an array " * 100)
os.stat(p)  # waits for the release
assert settled("kept.npy.b2f", "kept.b2nd")
fd = os.open(p, os.O_RDWR)
os.pwrite(fd, b"more", 1300)
os.truncate(p, 2000)
assert os.fstat(fd).st_size == 2000 and os.stat(p).st_ino == os.fstat(fd).st_ino
os.close(fd)
ts = blosc2.TreeStore(f"{src}/t.b2d", mode="r")
v = ts["/kept.npy"]
assert b"".join(v.decompress_chunk(i) for i in range(v.nchunks))[:v.nbytes] == \
    (b"not an array " * 100) + b"more" + bytes(696)
np.save(p, np.arange(6, dtype="<i4"))
os.stat(p)
assert settled("kept.b2nd", "kept.npy.b2f")
assert (blosc2.TreeStore(f"{src}/t.b2d", mode="r")["/kept"][:] == np.arange(6)).all()
PY
check "a .npy value kept as bytes: SChunk NAME.npy.b2f, one inode while written, an array again" [ $? -eq 0 ]

# Many values made, renamed and removed in a row (the store is not walked
# again for each): listings right after show each change, a key taken by
# a value of the other kind or a group is refused, rm -r empties a group.
mkdir -p "$tmp/many" && for i in $(seq 300); do echo "v$i" >"$tmp/many/f$i"; done
cp -r "$tmp/many" "$mnt/t/many" && mv "$mnt/t/many/f1" "$mnt/t/many/g1"
check "300 values copied in, one renamed: listed at once" \
  test "$(ls "$mnt/t/many" | wc -l)" = 300 -a "$(cat "$mnt/t/many/g1")" = v1 -a ! -e "$mnt/t/many/f1"
"$PYB2" - "$mnt/t/many" 2>"$tmp/err" <<'PY'
import errno, os, sys, numpy as np
m = sys.argv[1]
open(f"{m}/zz", "w").write("made just now, not listed yet")
for p, e in ((f"{m}/zz.npy", errno.EEXIST), (f"{m}/f2.npy", errno.EEXIST),
             (f"{m}/sub.npy", errno.EEXIST)):
    if p.endswith("sub.npy"):
        os.mkdir(f"{m}/sub")
    try:
        np.save(p, np.arange(3))
        sys.exit(p + ": saved")
    except OSError as x:
        assert x.errno == e, (p, errno.errorcode.get(x.errno))
PY
check "a key taken by a value of the other kind or a group: refused" [ $? -eq 0 ]
rm -r "$mnt/t/many"
check "rm -r of a group of 300 values" test ! -e "$mnt/t/many" -a ! -e "$msrc/t.b2d/many"

# Random namespace calls inside a DictStore's groups (tests/tree_life.py,
# its "store" mode: no links; no swaps; an array is NAME.npy, an SChunk
# another name) against a plain directory, then python-blosc2 finds each
# file of the plain directory as a value holding its bytes, and no other.
"$PYB2" -c 'import sys, numpy as np, blosc2
with blosc2.DictStore(sys.argv[1], mode="w") as d:
    d["/seed"] = np.arange(4)' "$msrc/life.b2d"
for seed in 1 2 3; do
  mkdir -p "$mnt/life/g$seed" "$tmp/shadow$seed"
  r=$("$PYB2" "$here/tree_life.py" "$mnt/life/g$seed" "$tmp/shadow$seed" "$seed"         "${B2FS_TREE_LIFE_OPS:-250}" store 2>&1 | tail -1)
  [ "$r" = ok ] && r=$("$PYB2" -W ignore "$here/store_life_check.py" "$msrc/life.b2d" "g$seed"                          "$tmp/shadow$seed" 2>&1 | tail -1)
  [ "$r" = ok ] && ok "tree_life in a store, seed $seed" || notok "tree_life in a store, seed $seed" "$r"
done

# With -o layout=sparse, a store's new values are still files (python-blosc2
# finds no other), and an empty one cannot be made sparse.
mnt2=$tmp/mnt2
mkdir -p "$mnt2"
if mount_bg store_sparse "$msrc" "$mnt2" layout=sparse; then  # attribute timeout 1 s: snapshots kept
  echo "sparse mount" >"$mnt2/life/sv"
  touch "$mnt2/life/sv0"
  check "layout=sparse: a store's new value is a file" test -f "$msrc/life.b2d/sv.b2f"
  check "layout=sparse: an empty value is not made sparse" \
    bash -c '! setfattr -n user.b2.layout -v sparse "$1" 2>/dev/null && test -f "$2"' _ \
    "$mnt2/life/sv0" "$msrc/life.b2d/sv0.b2f"
  mkdir -p "$mnt2/life/s9" "$tmp/shadow9"
  r=$("$PYB2" "$here/tree_life.py" "$mnt2/life/s9" "$tmp/shadow9" 9 \
        "${B2FS_TREE_LIFE_OPS:-250}" store 2>&1 | tail -1)
  [ "$r" = ok ] && r=$("$PYB2" -W ignore "$here/store_life_check.py" "$msrc/life.b2d" s9 \
                         "$tmp/shadow9" 2>&1 | tail -1)
  [ "$r" = ok ] && ok "tree_life in a store, layout=sparse" || notok "tree_life in a store, layout=sparse" "$r"
  unmount_fg "$mnt2" store_sparse_unmount
else
  notok "layout=sparse mount" "the daemon did not start: $(tail -3 "$tmp/store_sparse.log")"
fi

# A damaged store: EIO inside it, one log line naming it, the rest works.
ls "$mnt/bad" >/dev/null 2>"$tmp/err"
check "damaged store: EIO" grep -q "Input/output error" "$tmp/err"
ls "$mnt/bad" >/dev/null 2>&1
check "damaged store: one log line naming it" [ "$(grep -c 'bad.b2z' "$tmp/store.log")" -eq 1 ]
check "damaged store: the rest of the mount works" cmp -s "$mnt/plain.txt" "$msrc/plain.txt"
check "damaged store: other stores still read" test -s "$mnt/x/multi.npy"
unmount_fg "$mnt" store_unmount
