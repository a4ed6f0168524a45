#!/usr/bin/env bash
# t_npy_rename.sh - .npy files saved under another name and renamed to
# their .npy name (rsync's temporary files, atomic savers' os.replace)
# become the b2nd arrays a .npy file written under its name becomes, and
# arrays renamed to other names the plain frames of their bytes.
#
# On a contiguous and a sparse mount:
#   1. rsync -aX of a directory of .npy files (2-D float32, a 3 MB float64
#      series over several chunks, an int16 with a user.* attribute) and of
#      files that are no array (text under a .npy name, Fortran order, a
#      header promising more items than follow): SOURCE holds NAME.b2nd
#      for the arrays and NAME.npy.b2frame for the rest; every file reads
#      back byte for byte, with the input's mtime, mode and attributes
#      (a user.* one kept on the file, a vlmeta one in the frame);
#      python-blosc2 (when installed) opens NDArrays equal to numpy.load of
#      the input; nothing hidden is left in SOURCE.
#   2. rsync -I (same sizes, maybe the same second) with changed arrays: the arrays are replaced (a reader
#      holding the old one open reads it whole), 24 `os.replace` of a file
#      just written and closed give arrays, a file still open for writing
#      or hard-linked when renamed stays a plain frame (its bytes exact),
#      a reader of the temporary file keeps reading it; an array moved to
#      c.bak (mv: no warning) is a plain frame of its bytes with its mtime
#      and vlmeta, and os.replace back makes it the array again (python-
#      blosc2 reads it, vlmeta included); `b2f scrub` finds
#      every frame whole; after a remount everything reads the same.
#   3. rsync -aX of the mount into a plain directory (a backup carrying
#      every user.b2.* attribute) and back into another mount with other
#      parameters, and from mount to mount: exit 0 with no message, the
#      same bytes and mtimes, vlmeta and user.* attributes, arrays as
#      arrays (python-blosc2 reads them), the new mount's own codec; an
#      SChunk and an NDArray python-blosc2 made with `meta` and vlmeta
#      arrive with both; so with tar --xattrs into the new mount (tar sets
#      the attributes first: the source's codec).
# Env: B2FS, B2F, PY, PYB2 (tests/run.sh, tests/lib.sh).
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
. tests/mount_lib.sh
mount_test_start npy_rename
if ! have_numpy; then echo "skip npy_rename: no numpy at $PY"; exit 0; fi
if ! command -v rsync >/dev/null; then echo "skip npy_rename: no rsync"; exit 0; fi
PYB2_OK=0
have_pyb2 && PYB2_OK=1
[ "$PYB2_OK" = 1 ] || echo "skip npy_rename_pyb2: python-blosc2 is not installed (make venv)"

IN=$TMP/in
mkdir -p "$IN"
gen() { # SEED: the input directory's files
  "$PY" - "$IN" "$1" <<'PY'
import sys, numpy as np
d, seed = sys.argv[1], int(sys.argv[2])
r = np.random.default_rng(seed)
np.save(f"{d}/a.npy", (r.normal(size=(300, 700)) * 100).astype("<f4"))
np.save(f"{d}/b.npy", np.cumsum(r.normal(size=400000)))
np.save(f"{d}/c.npy", r.integers(-999, 999, size=(17, 19, 23), dtype="<i2"))
with open(f"{d}/text.npy", "w") as f: f.write("no numpy here %d\n" % seed)
np.save(f"{d}/fortran.npy", np.asfortranarray(r.normal(size=(40, 30))))
# a header for 1000 float64 items followed by 80 of them
with open(f"{d}/short.npy", "wb") as f:
    np.save(f, np.zeros(1000))
with open(f"{d}/short.npy", "r+b") as f: f.truncate(128 + 640)
PY
  setfattr -n user.origin -v "seed $1" "$IN/c.npy"
  # python-blosc2's vlmeta as b2fs shows it (one msgpack object: "m/s"),
  # as rsync -X copies it from another mount
  setfattr -n user.b2.vlmeta.units -v 0so20vcw== "$IN/c.npy"
}

# kinds SRC: "name:kind" of each entry, sorted (a = array, p = plain frame)
kinds() {
  (cd "$1" && ls -A | LC_ALL=C sort | while read -r n; do
    case "$n" in *.b2nd) echo "${n%.b2nd}.npy:a" ;; *.npy.b2frame) echo "${n%.b2frame}:p" ;; *) echo "$n:?" ;; esac
  done | tr '\n' ' ')
}

same_files() { # MNT: every input file reads back exact, with its mtime and mode
  local f bad=""
  for f in "$IN"/*.npy; do
    local n=${f##*/}
    cmp -s "$f" "$1/$n" || bad="$bad $n:bytes"
    [ "$(stat -c '%Y %a' "$f")" = "$(stat -c '%Y %a' "$1/$n")" ] || bad="$bad $n:$(stat -c '%Y/%a' "$1/$n")"
  done
  CHECK_WHY=$bad
  [ -z "$bad" ]
}

pyb2_equal() { # SRC: python-blosc2 opens the arrays, equal to numpy.load of the input
  "$PYB2" - "$IN" "$1" <<'PY'
import sys, numpy as np, blosc2
i, s = sys.argv[1:3]
for n in "abc":
    a = blosc2.open(f"{s}/{n}.b2nd")
    want = np.load(f"{i}/{n}.npy")
    assert isinstance(a, blosc2.NDArray), (n, type(a))
    assert a.dtype == want.dtype and a.shape == want.shape, (n, a.dtype, a.shape)
    assert np.array_equal(a[...], want), n
c = blosc2.open(f"{s}/c.b2nd")
assert c.vlmeta["units"] == "m/s", c.vlmeta.getall()
print("ok")
PY
}

for layout in contiguous sparse; do
  L=${layout:0:1}
  S=$TMP/src$L M=$TMP/mnt$L
  mkdir -p "$S" "$M"
  rm -f "$IN"/*
  gen 1
  if ! mount_bg ren$L "$S" "$M" "layout=$layout"; then nok npy_rename_${L}_mount "cannot mount"; continue; fi

  # ---- 1. rsync ------------------------------------------------------------
  rsync -aX "$IN/" "$M/" 2>"$TMP/rsync$L.err" && ok npy_rename_${L}_rsync ||
    nok npy_rename_${L}_rsync "$(head -c 300 "$TMP/rsync$L.err")"
  want="a.npy:a b.npy:a c.npy:a fortran.npy:p short.npy:p text.npy:p "
  got=$(kinds "$S")
  [ "$got" = "$want" ] && ok npy_rename_${L}_kinds || nok npy_rename_${L}_kinds "SOURCE: '$got', want '$want'"
  same_files "$M" && ok npy_rename_${L}_bytes_times || nok npy_rename_${L}_bytes_times "$CHECK_WHY"
  v=$(getfattr --absolute-names --only-values -n user.origin "$M/c.npy" 2>&1)
  u=$(getfattr --absolute-names --only-values -n user.b2.vlmeta.units "$M/c.npy" 2>&1 | od -An -tx1 | tr -d ' \n')
  [ "$v" = "seed 1" ] && [ "$u" = a36d2f73 ] && ok npy_rename_${L}_xattr ||
    nok npy_rename_${L}_xattr "user.origin: '$v', user.b2.vlmeta.units: $u"
  if [ "$PYB2_OK" = 1 ]; then
    r=$(pyb2_equal "$S" 2>&1)
    [ "$r" = ok ] && ok npy_rename_${L}_pyb2 || nok npy_rename_${L}_pyb2 "$(tail -c 300 <<<"$r")"
  fi

  # ---- 2. replacing, saving atomically, writers, links, readers ------------------
  gen 2
  # a reader of the old a.npy, holding it open across the replacement
  "$PY" - "$M/a.npy" "$TMP/old$L.sha" "$TMP/reader$L.go" <<'PY' &
import sys, os, time, hashlib
f = open(sys.argv[1], "rb")
head = f.read(1000)
open(sys.argv[3], "w").close()
for _ in range(100):
    if not os.path.exists(sys.argv[3]): break
    time.sleep(0.05)
open(sys.argv[2], "w").write(hashlib.sha256(head + f.read()).hexdigest())
PY
  READER=$!
  for _ in $(seq 100); do [ -e "$TMP/reader$L.go" ] && break; sleep 0.05; done
  old_sha=$(sha256sum <"$M/a.npy" | cut -d' ' -f1)
  rsync -aXI "$IN/" "$M/" 2>"$TMP/rsync2$L.err" || nok npy_rename_${L}_rsync_again "$(head -c 300 "$TMP/rsync2$L.err")"
  rm -f "$TMP/reader$L.go"; wait "$READER"
  [ "$(cat "$TMP/old$L.sha" 2>/dev/null)" = "$old_sha" ] && ok npy_rename_${L}_reader_of_replaced ||
    nok npy_rename_${L}_reader_of_replaced "the reader read $(cat "$TMP/old$L.sha" 2>/dev/null), the old file was $old_sha"
  got=$(kinds "$S")
  [ "$got" = "$want" ] && same_files "$M" && ok npy_rename_${L}_replaced ||
    nok npy_rename_${L}_replaced "SOURCE: '$got'; $CHECK_WHY"
  if [ "$PYB2_OK" = 1 ]; then
    r=$(pyb2_equal "$S" 2>&1)
    [ "$r" = ok ] && ok npy_rename_${L}_pyb2_replaced || nok npy_rename_${L}_pyb2_replaced "$(tail -c 300 <<<"$r")"
  fi
  r=$("$PY" - "$M" "$layout" <<'PY' 2>&1
import sys, os, numpy as np
m = sys.argv[1]
out = []
# atomic saves: write, close, rename at once (the release comes after close)
for i in range(24):
    a = np.arange(1000 * (i + 1), dtype="<i4").reshape(-1, 10) * (i + 1)
    with open(f"{m}/save{i}.tmp", "wb") as f: np.save(f, a)
    os.replace(f"{m}/save{i}.tmp", f"{m}/save{i}.npy")
    if not np.array_equal(np.load(f"{m}/save{i}.npy"), a): out.append(f"save{i}")
# renamed while still open for writing, then written on: stays the bytes
f = open(f"{m}/w.tmp", "wb"); np.save(f, np.arange(100.0)); f.flush()
os.replace(f"{m}/w.tmp", f"{m}/w.npy"); f.write(b"tail"); f.close()
if open(f"{m}/w.npy", "rb").read()[-4:] != b"tail": out.append("w")
# a reader of the temporary keeps reading it
with open(f"{m}/r.tmp", "wb") as g: np.save(g, np.arange(5000.0))
want = open(f"{m}/r.tmp", "rb").read()
g = open(f"{m}/r.tmp", "rb"); part = g.read(100)
os.replace(f"{m}/r.tmp", f"{m}/r.npy")
if part + g.read() != want or os.fstat(g.fileno()).st_size != len(want): out.append("r")
g.close()
if open(f"{m}/r.npy", "rb").read() != want: out.append("r.npy")
# hard-linked: both names stay the same file (sparse frames have no links)
if sys.argv[2] == "contiguous":
    with open(f"{m}/h.tmp", "wb") as g: np.save(g, np.arange(10.0))
    os.link(f"{m}/h.tmp", f"{m}/h2.tmp"); os.replace(f"{m}/h.tmp", f"{m}/h.npy")
    if os.stat(f"{m}/h.npy").st_ino != os.stat(f"{m}/h2.tmp").st_ino: out.append("h")
print(" ".join(out) or "ok")
PY
)
  [ "$r" = ok ] && ok npy_rename_${L}_saves || nok npy_rename_${L}_saves "$(tail -c 300 <<<"$r")"
  arrays=$(cd "$S" && ls -d save*.b2nd r.b2nd 2>/dev/null | wc -l)
  plain=$(cd "$S" && ls -d w.npy.b2frame h.npy.b2frame 2>/dev/null | wc -l)
  nplain=2; [ "$layout" = sparse ] && nplain=1
  [ "$arrays" = 25 ] && [ "$plain" = $nplain ] && ok npy_rename_${L}_save_kinds ||
    nok npy_rename_${L}_save_kinds "arrays $arrays of 25, plain $plain of $nplain: $(ls "$S" | tr '\n' ' ' | head -c 400)"
  hidden=$(cd "$S" && ls -A | grep -E '^\.' | tr '\n' ' ')
  [ -z "$hidden" ] && ok npy_rename_${L}_nothing_left || nok npy_rename_${L}_nothing_left "$hidden"
  # an array moved to a name that is no .npy name: the plain frame of its
  # bytes, in one rename (mv copied it before, warning of every attribute
  # it could not copy); and back
  c_sha=$(sha256sum <"$M/c.npy"); c_t=$(stat -c %Y "$M/c.npy")
  mv "$M/c.npy" "$M/c.bak" 2>"$TMP/mv$L.err"
  u=$(getfattr --absolute-names --only-values -n user.b2.vlmeta.units "$M/c.bak" 2>&1 | od -An -tx1 | tr -d ' \n')
  [ -e "$S/c.bak.b2frame" ] && [ ! -e "$S/c.b2nd" ] && [ ! -s "$TMP/mv$L.err" ] &&
    [ "$(sha256sum <"$M/c.bak")" = "$c_sha" ] && [ "$(stat -c %Y "$M/c.bak")" = "$c_t" ] && [ "$u" = a36d2f73 ] &&
    ok npy_rename_${L}_array_to_plain ||
    nok npy_rename_${L}_array_to_plain "$(ls "$S" | tr '\n' ' '); vlmeta '$u'; $(head -c 300 "$TMP/mv$L.err")"
  r=$("$PY" -c 'import os, sys; os.replace(sys.argv[1], sys.argv[2]); print("ok")' "$M/c.bak" "$M/c.npy" 2>&1)
  [ "$r" = ok ] && [ -e "$S/c.b2nd" ] && [ "$(sha256sum <"$M/c.npy")" = "$c_sha" ] &&
    ok npy_rename_${L}_plain_to_array_again || nok npy_rename_${L}_plain_to_array_again "$r; $(ls "$S" | tr '\n' ' ')"
  if [ "$PYB2_OK" = 1 ]; then
    r=$(pyb2_equal "$S" 2>&1)
    [ "$r" = ok ] && ok npy_rename_${L}_pyb2_round_trip || nok npy_rename_${L}_pyb2_round_trip "$(tail -c 300 <<<"$r")"
  fi

  # ---- 3. a backup in a plain directory, restored into another mount ------
  # rsync -aX carries every user.b2.* attribute; the mount it restores to
  # (other parameters) takes the copies' as a copy's: exit 0, its own codec.
  B=$TMP/bak$L S2=$TMP/src2$L M2=$TMP/mnt2$L
  mkdir -p "$B" "$S2" "$M2"
  if [ "$PYB2_OK" = 1 ]; then # python-blosc2's own metalayers (meta, vlmeta) travel too
    "$PYB2" - "$S" <<'PY' || nok npy_rename_${L}_pyb2_meta_made "python-blosc2 could not write"
import sys, numpy as np, blosc2
s = sys.argv[1]
c = blosc2.SChunk(chunksize=40000, data=np.arange(30000, dtype="<i4"), urlpath=f"{s}/pm.b2frame",
                  mode="w", meta={"info": {"units": "m", "n": 3}})
c.vlmeta["note"] = "hello"
a = blosc2.asarray(np.arange(600.0).reshape(20, 30), urlpath=f"{s}/pa.b2nd", mode="w",
                   meta={"calib": [1, 2, 3]})
a.vlmeta["who"] = "me"
PY
  fi
  if mount_bg back$L "$S2" "$M2" "layout=$layout,codec=lz4,clevel=5"; then
    e=""
    rsync -aX "$M/" "$B/" 2>"$TMP/bk$L.err" || e="$e to-backup:$?"
    rsync -aX "$B/" "$M2/" 2>>"$TMP/bk$L.err" || e="$e restore:$?"
    rsync -aX "$M/" "$M2/direct/" 2>>"$TMP/bk$L.err" || e="$e mount-to-mount:$?"
    # tar sets attributes before the data: the file takes them (the
    # source's parameters, its metalayers)
    mkdir -p "$M2/tar"
    # (hard links stored as files: an array linked to a name of another
    # kind cannot be, EXDEV)
    tar --xattrs --xattrs-include='user.*' --hard-dereference -C "$M" -cf "$TMP/t$L.tar" . 2>>"$TMP/bk$L.err" &&
      tar --xattrs --xattrs-include='user.*' -C "$M2/tar" -xf "$TMP/t$L.tar" 2>>"$TMP/bk$L.err" || e="$e tar:$?"
    [ -z "$e" ] && [ ! -s "$TMP/bk$L.err" ] && ok npy_rename_${L}_backup_restore ||
      nok npy_rename_${L}_backup_restore "rsync exits:$e $(head -c 400 "$TMP/bk$L.err")"
    bad=""
    for f in "$M"/*; do
      n=${f##*/}
      for d in "$M2" "$M2/direct" "$M2/tar"; do
        cmp -s "$f" "$d/$n" || bad="$bad $d/$n:bytes"
        [ "$(stat -c %Y "$f")" = "$(stat -c %Y "$d/$n")" ] || bad="$bad $d/$n:mtime"
      done
    done
    for d in "$M2" "$M2/direct" "$M2/tar"; do
      u=$(getfattr --absolute-names --only-values -n user.b2.vlmeta.units "$d/c.npy" 2>&1 | od -An -tx1 | tr -d ' \n')
      v=$(getfattr --absolute-names --only-values -n user.origin "$d/c.npy" 2>&1)
      c=$(getfattr --absolute-names --only-values -n user.b2.codec "$d/a.npy" 2>&1)
      want="a36d2f73 seed 2 lz4"; [ "$d" = "$M2/tar" ] && want="a36d2f73 seed 2 zstd"
      [ "$u $v $c" = "$want" ] || bad="$bad $d: vlmeta '$u', user.origin '$v', codec '$c'"
    done
    [ -e "$S2/a.b2nd" ] && [ -e "$S2/direct/save3.b2nd" ] && [ -e "$S2/text.npy.b2frame" ] &&
      [ -e "$S2/tar/c.b2nd" ] ||
      bad="$bad kinds: $(ls "$S2" | tr '\n' ' ' | head -c 300)"
    CHECK_WHY=$bad
    [ -z "$bad" ] && ok npy_rename_${L}_backup_restore_same || nok npy_rename_${L}_backup_restore_same "$bad"
    if [ "$PYB2_OK" = 1 ]; then
      r=$(pyb2_equal "$S2" 2>&1; pyb2_equal "$S2/direct" 2>&1; pyb2_equal "$S2/tar" 2>&1)
      [ "$r" = $'ok\nok\nok' ] && ok npy_rename_${L}_pyb2_restored || nok npy_rename_${L}_pyb2_restored "$(tail -c 300 <<<"$r")"
      r=$("$PYB2" - "$S2" "$S2/direct" "$S2/tar" 2>&1 <<'PY'
import sys, numpy as np, blosc2
for s in sys.argv[1:]:
    c = blosc2.open(f"{s}/pm.b2frame")
    assert type(c) is blosc2.SChunk and c.meta["info"] == {"units": "m", "n": 3}, (s, c.meta.keys())
    assert c.vlmeta["note"] == "hello" and c[:] == np.arange(30000, dtype="<i4").tobytes()
    a = blosc2.open(f"{s}/pa.b2nd")
    assert isinstance(a, blosc2.NDArray) and a.schunk.meta["calib"] == [1, 2, 3], (s, type(a))
    assert a.vlmeta["who"] == "me" and np.array_equal(a[...], np.arange(600.0).reshape(20, 30))
print("ok")
PY
)
      [ "$r" = ok ] && ok npy_rename_${L}_pyb2_meta_restored || nok npy_rename_${L}_pyb2_meta_restored "$(tail -c 300 <<<"$r")"
    fi
    unmount_fg "$M2" back$L
  else
    nok npy_rename_${L}_backup_restore "cannot mount $S2"
  fi

  sum_before=$(cd "$M" && sha256sum -- * | sha256sum)
  unmount_fg "$M" ren$L
  "$B2F" scrub "$S" >"$TMP/scrub$L.out" 2>&1 && grep -q " 0 damaged frames" "$TMP/scrub$L.out" &&
    ok npy_rename_${L}_scrub || nok npy_rename_${L}_scrub "$(tail -c 300 "$TMP/scrub$L.out")"
  if mount_bg ren2$L "$S" "$M" "layout=$layout"; then
    [ "$(cd "$M" && sha256sum -- * | sha256sum)" = "$sum_before" ] && ok npy_rename_${L}_remount ||
      nok npy_rename_${L}_remount "the files read otherwise after a remount"
    unmount_fg "$M" ren2$L
  else
    nok npy_rename_${L}_remount "cannot mount again"
  fi
done
