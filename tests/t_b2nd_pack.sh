#!/usr/bin/env bash
# t_b2nd_pack.sh - `b2f pack` of NumPy .npy files into b2nd arrays.
#
# NumPy writes arrays of many shapes and dtypes (big-endian, structured,
# strings, datetimes, 0-d, empty, items wider than 255 bytes, a field name
# that needs a format 3.0 header); each is packed (from the file, from a
# pipe, as a sparse frame, with given chunk/block shapes) and
# `b2f cat --npy` must give back the .npy file byte for byte, `b2f verify`
# must pass and `b2f info` must show the geometry; `b2f unpack` to a .npy
# name gives it back too.  Bad inputs (Fortran
# order, object arrays, truncated or overlong data, not a .npy) must fail
# with one message and leave no output behind.
set -u
. "$(dirname "$0")/lib.sh"
if ! have_numpy; then skip b2nd_pack "no numpy at $PY"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$PY" - "$tmp" <<'PY'
import sys, warnings, numpy as np
warnings.simplefilter("ignore")
d = sys.argv[1]
r = np.random.default_rng(7)
def save(name, a): np.save(f"{d}/{name}.npy", a)
save("f8-1d", np.cumsum(r.normal(size=100000)))
save("f4-2d", r.normal(size=(1000, 777)).astype("<f4"))
save("i4-big", r.integers(-1000, 1000, size=(300, 200)).astype(">i4"))
save("u1-2d", r.integers(0, 255, size=(400, 3)).astype("|u1"))
save("c16", (r.normal(size=5000) + 1j * r.normal(size=5000)).astype("<c16"))
st = np.dtype([("x", "<f4"), ("y", "<i2"), ("flag", "|u1"), ("pad", "|V1")])
a = np.zeros((2000, 3), dtype=st); a["x"] = r.normal(size=(2000, 3)); a["y"] = 7
save("struct", a)
nest = np.dtype([("p", "<f8", (2, 3)), ("q", [("a", "|u1"), ("b", ">i2", (4,))])])
save("nested", np.frombuffer(r.bytes(nest.itemsize * 123), dtype=nest))
save("f8-4d", r.normal(size=(6, 7, 8, 9)))
save("scalar", np.float64(3.25))
save("empty", np.zeros((0, 10)))
save("strings", np.array([b"ab", b"cde", b""] * 333, dtype="|S5"))
save("unicode", np.array(["x", "\u00e9t\u00e9", "\u4e2d"] * 50, dtype="<U3"))
save("dates", np.arange("2020-01-01", "2021-01-01", dtype="datetime64[D]").astype("<M8[ns]"))
save("bool", r.integers(0, 2, size=(33, 17)).astype(bool))
save("f2-3d", r.normal(size=(20, 30, 40)).astype("<f2"))
save("wide", np.frombuffer(r.bytes(300 * 40), dtype="V300").reshape(8, 5))
save("utf8-name", np.zeros(10, dtype=[("\u4e2d", "<i4")]))
save("u2-3d", (np.arange(3 * 700 * 1000) % 65521).astype("<u2").reshape(3, 700, 1000))
save("fortran", np.asfortranarray(r.normal(size=(4, 5))))
np.save(f"{d}/object.npy", np.array([1, "a", None], dtype=object), allow_pickle=True)
PY
[ -f "$tmp/f8-1d.npy" ] || { notok b2nd_pack "numpy could not write the inputs"; exit 0; }

# roundtrip NAME OUT [pack options]: pack, cat --npy, compare; verify.
roundtrip() {
  local name=$1 out=$2; shift 2
  if ! "$B2F" pack "$@" "$tmp/$name.npy" "$out" 2>"$tmp/err"; then
    notok "pack $name${*:+ $*}" "$(head -c 300 "$tmp/err")"; return 1
  fi
  if "$B2F" cat --npy "$out" 2>"$tmp/err" | cmp -s - "$tmp/$name.npy"; then
    ok "roundtrip $name${*:+ $*}"
  else
    notok "roundtrip $name${*:+ $*}" "$(head -c 300 "$tmp/err")"
  fi
  if "$B2F" verify "$out" >"$tmp/err" 2>&1; then ok "verify $name${*:+ $*}"
  else notok "verify $name${*:+ $*}" "$(head -c 300 "$tmp/err")"; fi
}

for n in f8-1d f4-2d i4-big u1-2d c16 struct nested f8-4d scalar empty strings unicode \
         dates bool f2-3d wide utf8-name u2-3d; do
  roundtrip "$n" "$tmp/$n.b2nd"
done

# geometry: the default follows the trailing dimensions; options are kept
info=$("$B2F" info "$tmp/f4-2d.b2nd")
check "default geometry f4-2d" grep -q "blockshape *50 x 777" <<<"$info"
roundtrip u2-3d "$tmp/u2-given.b2nd" --chunkshape 2,300,128 --blockshape 1,50,64 -c lz4 -l 5
info=$("$B2F" info "$tmp/u2-given.b2nd")
check "given chunkshape" grep -q "chunkshape *2 x 300 x 128" <<<"$info"
check "given blockshape" grep -q "blockshape *1 x 50 x 64" <<<"$info"
check "given codec" grep -q "codec *lz4" <<<"$info"
check "inspect is info" [ "$("$B2F" inspect "$tmp/u2-given.b2nd")" = "$info" ]
roundtrip f4-2d "$tmp/f4-blocks.b2nd" --blockshape=10,100 -j1
roundtrip i4-big "$tmp/i4-sparse.b2nd" --sparse -f bitshuffle
check "sparse is a directory" test -f "$tmp/i4-sparse.b2nd/chunks.b2frame"

# from a pipe (front to back), and --npy for a name without .npy
cp "$tmp/f8-4d.npy" "$tmp/plain.bin"
if cat "$tmp/f4-2d.npy" | "$B2F" pack --npy - "$tmp/pipe.b2nd" 2>"$tmp/err" &&
   "$B2F" cat --npy "$tmp/pipe.b2nd" | cmp -s - "$tmp/f4-2d.npy"; then
  ok "pack from a pipe"
else
  notok "pack from a pipe" "$(head -c 300 "$tmp/err")"
fi
if "$B2F" pack --npy "$tmp/plain.bin" "$tmp/plain.b2nd" 2>"$tmp/err" &&
   "$B2F" cat --npy "$tmp/plain.b2nd" | cmp -s - "$tmp/f8-4d.npy"; then
  ok "pack --npy"
else
  notok "pack --npy" "$(head -c 300 "$tmp/err")"
fi
# --raw: the .npy file's bytes, packed as they are
if "$B2F" pack --raw "$tmp/u1-2d.npy" "$tmp/raw.b2frame" 2>"$tmp/err" &&
   "$B2F" cat "$tmp/raw.b2frame" | cmp -s - "$tmp/u1-2d.npy" &&
   ! "$B2F" info "$tmp/raw.b2frame" | grep -q b2nd; then
  ok "pack --raw"
else
  notok "pack --raw" "$(head -c 300 "$tmp/err")"
fi
# cat --npy of a frame that is no array: its bytes when they are a .npy
# file (pack --raw above), else an error and nothing written
check "cat --npy of a .npy kept as bytes" bash -c "'$B2F' cat --npy '$tmp/raw.b2frame' | cmp -s - '$tmp/u1-2d.npy'"
printf 'not an array at all' >"$tmp/text.bin"
"$B2F" pack "$tmp/text.bin" "$tmp/text.b2frame" 2>/dev/null
if "$B2F" cat --npy "$tmp/text.b2frame" >"$tmp/out" 2>"$tmp/err"; then
  notok "cat --npy of an SChunk fails" "exit 0, $(wc -c <"$tmp/out") bytes"
else
  check "cat --npy of an SChunk fails" bash -c "[ ! -s '$tmp/out' ] && grep -q 'not a b2nd array' '$tmp/err'"
fi
# --force replaces a frame; without it an existing OUT is kept
check "no overwrite" bash -c "! '$B2F' pack '$tmp/u1-2d.npy' '$tmp/f8-1d.b2nd' 2>/dev/null"
if "$B2F" pack --force "$tmp/u1-2d.npy" "$tmp/f8-1d.b2nd" &&
   "$B2F" cat --npy "$tmp/f8-1d.b2nd" | cmp -s - "$tmp/u1-2d.npy"; then
  ok "pack --force"
else
  notok "pack --force"
fi
# the same for a frame of bytes; a file that is no frame is never replaced
printf 'abc' >"$tmp/plain.txt"
"$B2F" pack "$tmp/text.bin" "$tmp/t2.b2frame" 2>/dev/null
check "pack without --force says OUT exists" bash -c "! '$B2F' pack '$tmp/text.bin' '$tmp/t2.b2frame' 2>'$tmp/err' && grep -q 'exists (--force replaces' '$tmp/err'"
check "pack --force replaces a frame of bytes" bash -c "'$B2F' pack --force '$tmp/plain.txt' '$tmp/t2.b2frame' && [ \"\$('$B2F' cat '$tmp/t2.b2frame')\" = abc ]"
for src in "$tmp/text.bin" "$tmp/u1-2d.npy"; do
  check "pack --force keeps a file that is no frame ($(basename "$src"))" bash -c "! '$B2F' pack --force '$src' '$tmp/plain.txt' 2>'$tmp/err' && grep -q 'not replaced' '$tmp/err' && [ \"\$(cat '$tmp/plain.txt')\" = abc ]"
done

# unpack, pack's inverse: to OUT.npy (or --npy) an array's .npy file; to
# another name (or --raw) the logical content; --c-order the items
check "unpack to .npy gives numpy's file" bash -c "'$B2F' unpack '$tmp/f4-2d.b2nd' '$tmp/back.npy' && cmp -s '$tmp/back.npy' '$tmp/f4-2d.npy'"
check "unpack --npy to another name" bash -c "'$B2F' unpack --npy '$tmp/f4-2d.b2nd' - | cmp -s - '$tmp/f4-2d.npy'"
check "unpack --c-order: the items" bash -c "'$B2F' unpack --c-order '$tmp/f4-2d.b2nd' - | cmp -s - <('$B2F' cat --c-order '$tmp/f4-2d.b2nd') && [ \$('$B2F' unpack --c-order '$tmp/f4-2d.b2nd' - | wc -c) -gt 0 ]"
check "unpack --raw: the logical content" bash -c "'$B2F' unpack --raw '$tmp/f4-2d.b2nd' '$tmp/raw.npy' && cmp -s '$tmp/raw.npy' <('$B2F' cat '$tmp/f4-2d.b2nd')"
check "unpack of bytes to a plain name" bash -c "'$B2F' unpack '$tmp/text.b2frame' '$tmp/text.out' && [ \"\$(cat '$tmp/text.out')\" = 'not an array at all' ]"
check "unpack of an SChunk to .npy fails, no OUT left" bash -c "! '$B2F' unpack '$tmp/text.b2frame' '$tmp/text.npy' 2>'$tmp/err' && [ ! -e '$tmp/text.npy' ] && grep -q 'not a b2nd array' '$tmp/err'"

# bad inputs: non-zero status, one line naming the problem, no output left
head -c $(( $(stat -c %s "$tmp/f4-2d.npy") - 100 )) "$tmp/f4-2d.npy" >"$tmp/short.npy"
cat "$tmp/u1-2d.npy" >"$tmp/long.npy"; printf 'xx' >>"$tmp/long.npy"
head -c 40 "$tmp/f4-2d.npy" >"$tmp/cut-header.npy"
echo "not numpy" >"$tmp/text.npy"
bad() { # NAME FILE PATTERN [options]
  local name=$1 f=$2 pat=$3; shift 3
  if "$B2F" pack "$@" "$f" "$tmp/bad.b2nd" 2>"$tmp/err"; then
    notok "refuse $name" "accepted"
  elif ! grep -qi -- "$pat" "$tmp/err" || [ "$(wc -l <"$tmp/err")" -ne 1 ]; then
    notok "refuse $name" "message: $(head -c 300 "$tmp/err")"
  elif [ -e "$tmp/bad.b2nd" ]; then
    notok "refuse $name" "output left behind"
  else
    ok "refuse $name"
  fi
  rm -rf "$tmp/bad.b2nd"
}
bad fortran "$tmp/fortran.npy" "fortran"
bad object "$tmp/object.npy" "object"
bad truncated "$tmp/short.npy" "holds"
cat "$tmp/short.npy" | bad "truncated pipe" - "ends inside" --npy
bad "trailing bytes" "$tmp/long.npy" "follow"
cat "$tmp/long.npy" | bad "trailing bytes in a pipe" - "follow" --npy
bad "cut header" "$tmp/cut-header.npy" "npy"
bad "not npy" "$tmp/text.npy" "npy"
bad "chunkshape dims" "$tmp/f4-2d.npy" "dimensions" --chunkshape 10,10,10
bad "chunkshape value" "$tmp/f4-2d.npy" "positive" --chunkshape 10,x
bad "block over chunk" "$tmp/f4-2d.npy" "exceeds" --chunkshape 10,10 --blockshape 20,10
if "$B2F" pack "$tmp/f4-2d.npy" - >"$tmp/out" 2>"$tmp/err" || ! grep -q stdout "$tmp/err"; then
  notok "refuse stdout" "$(head -c 300 "$tmp/err")"
else
  ok "refuse stdout"
fi
