#!/usr/bin/env bash
# t_scrub.sh - checksums end to end: frames packed by b2f carry the
# b2fs.crc32c table; bytes flipped inside stored chunks (memcpy'd chunks,
# which the format alone would decode silently to other bytes) are
# reported by `b2f scrub DIR` (every damaged chunk, one line each, exit 1)
# and `b2f verify` (naming the chunk); frames without a table (reference
# fixtures), files that are not frames, and symbolic links are handled as
# documented in src/cli/cmd_scrub.c.
set -u
. "$(dirname "$0")/lib.sh"
[ -x "$PY" ] || { skip scrub "no python at $PY"; exit 0; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
T=$tmp/tree
mkdir -p "$T/a" "$T/b" "$tmp/outside"

# Random input (incompressible: stored memcpy'd at clevel 0), 5 chunks.
"$PY" -c 'import os,random,sys; random.seed(7); sys.stdout.buffer.write(bytes(random.getrandbits(8) for _ in range(5*65536-1000)))' >"$tmp/in.bin"
pk() { local out=$1; shift; "$B2F" pack -l 0 --chunksize 65536 "$@" "$tmp/in.bin" "$out" >/dev/null; }
pk "$T/a/good.b2frame"
pk "$T/b/dmg.b2f"
pk "$T/b/sp.b2frame" --sparse
pk "$T/b/nosuffix.b2frame" && mv "$T/b/nosuffix.b2frame" "$T/b/nosuffix"
pk "$tmp/outside/linked.b2frame"
echo "just text" >"$T/a/notes.txt"
ln -s "$tmp/outside/linked.b2frame" "$T/a/link.b2frame"
ln -s "$tmp/outside" "$T/b/linkdir"

# damage FRAME CHUNK: flip one byte of chunk CHUNK's data, found on disk by
# content (contiguous: in the file; sparse: among the chunk files).
damage() {
  "$PY" - "$tmp/in.bin" "$1" "$2" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
path, k = sys.argv[2], int(sys.argv[3])
probe = data[k * 65536 + 5000: k * 65536 + 5064]
files = [path] if os.path.isfile(path) else \
    [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".chunk")]
for f in files:
    b = bytearray(open(f, "rb").read())
    at = b.find(probe)
    if at >= 0:
        st = os.stat(f)
        b[at + 10] ^= 0x20
        open(f, "wb").write(b)
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # as bit rot: times kept
        sys.exit(0)
sys.exit("chunk %d not found in %s" % (k, path))
PY
}
damage "$T/b/dmg.b2f" 1 && damage "$T/b/dmg.b2f" 3 && damage "$T/b/sp.b2frame" 2 &&
  damage "$T/b/nosuffix" 0 && damage "$tmp/outside/linked.b2frame" 4
check "damage planted" [ $? -eq 0 ]

have_ref=0
if have_fixtures; then
  cp "$B2FS_FIXTURES/cframe/zstd-shuffle-f64.b2frame" "$T/a/ref.b2frame"
  cp -r "$B2FS_FIXTURES/sframe/lz4-edited-i32.b2frame" "$T/a/refsparse"
  # No checksums, 4 chunks the codec itself finds damaged.
  cp "$B2FS_FIXTURES/bad/bitflip-00.b2frame" "$T/b/bitflip.b2frame"
  have_ref=1
fi

# The table is there.
"$B2F" info "$T/a/good.b2frame" | grep -q 'b2fs\.crc32c'
check "packed frame has b2fs.crc32c" [ $? -eq 0 ]

# scrub: every damaged chunk, in tree order, then the summary.
"$B2F" scrub "$T" >"$tmp/out" 2>"$tmp/err"; rc=$?
check "scrub exit status 1 on damage" [ "$rc" -eq 1 ]
sed -E 's/\(stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}\)/(X)/; s/(bitflip.b2frame: chunk [0-9]+: ).*/\1(codec)/' \
  "$tmp/out" | grep -v '^scrub:' >"$tmp/got"
{
  if [ "$have_ref" = 1 ]; then
    for i in 0 1 2 3; do echo "$T/b/bitflip.b2frame: chunk $i: (codec)"; done
  fi
  cat <<EOF
$T/b/dmg.b2f: chunk 1: checksum mismatch (X)
$T/b/dmg.b2f: chunk 3: checksum mismatch (X)
$T/b/nosuffix: chunk 0: checksum mismatch (X)
$T/b/sp.b2frame: chunk 2: checksum mismatch (X)
EOF
} >"$tmp/want"
if cmp -s "$tmp/got" "$tmp/want"; then ok "scrub lists every damaged chunk"; else
  notok "scrub lists every damaged chunk" "$(diff "$tmp/want" "$tmp/got" | head -c 600)"; fi
# 4 frames of ours + 3 reference frames; 20 stored chunks with checksums.
nframes=$((4 + 3 * have_ref))
if grep -q "^scrub: $nframes frames, .* (20 with checksums), $((4 + 4 * have_ref)) damaged chunks, $((3 + have_ref)) damaged frames, $((3 * have_ref)) frames not fully checksummed$" "$tmp/out"
then ok "scrub summary"; else notok "scrub summary" "$(grep '^scrub:' "$tmp/out")"; fi
check "scrub stderr empty" [ ! -s "$tmp/err" ]

# A clean tree: exit 0, only the summary; the engine's leftovers in it (a
# compaction's temporary cut short by a crash, a lock sidecar) are not frames.
head -c 3000 "$T/a/good.b2frame" >"$T/a/.good.b2frame.b2tmp"
: >"$T/a/good.b2frame.b2lock"
"$B2F" scrub "$T/a/" >"$tmp/out" 2>&1; rc=$?
check "scrub clean tree exits 0" [ "$rc" -eq 0 ]
check "scrub clean tree prints only the summary" [ "$(grep -vc '^scrub:' "$tmp/out")" -eq 0 ]
"$B2F" scrub -q "$T/a" >"$tmp/out" 2>&1
check "scrub -q clean: silent" [ ! -s "$tmp/out" ]

# A frame named directly, and a link named directly (followed).
"$B2F" scrub -q "$T/a/link.b2frame" >"$tmp/out"; rc=$?
check "scrub of a named link: status 1" [ "$rc" -eq 1 ]
grep -q "link.b2frame: chunk 4: checksum mismatch" "$tmp/out"
check "scrub of a named link follows it" [ $? -eq 0 ]

# verify names the chunk; cat refuses the damaged frame.
"$B2F" verify "$T/b/dmg.b2f" >/dev/null 2>"$tmp/err"; rc=$?
check "verify exit status on damage" [ "$rc" -eq 1 ]
grep -q "dmg.b2f: chunk 1: checksum mismatch (stored 0x[0-9a-f]*, computed 0x[0-9a-f]*)" "$tmp/err"
check "verify names the chunk" [ $? -eq 0 ]
"$B2F" cat "$T/b/sp.b2frame" >/dev/null 2>"$tmp/err"
check "cat fails on a damaged chunk" [ $? -ne 0 ]
grep -q "chunk 2: checksum mismatch" "$tmp/err"
check "cat names the chunk" [ $? -eq 0 ]
"$B2F" verify -q "$T/a/good.b2frame"
check "verify of an intact frame" [ $? -eq 0 ]

# Compaction keeps the checksums: the damage stays visible.
"$B2F" compact "$T/b/dmg.b2f" >/dev/null 2>&1
"$B2F" scrub -q "$T/b/dmg.b2f" | grep -c "checksum mismatch" >"$tmp/n"
check "damage still reported after compaction" [ "$(cat "$tmp/n")" -eq 2 ]

# A hard-linked frame's in-place rewrite cut short: the frame is torn and
# its redo file beside it; scrub says so, and `b2f compact` finishes it.
mkdir -p "$tmp/redo"
cp "$T/a/good.b2frame" "$tmp/redo/x.b2frame"
cp "$T/a/good.b2frame" "$tmp/redo/.x.b2frame.redo.b2tmp"
printf 'torn torn torn torn' | dd of="$tmp/redo/x.b2frame" conv=notrunc status=none
"$B2F" scrub "$tmp/redo" >"$tmp/out" 2>&1; rc=$?
check "scrub of a torn frame: status 1" [ "$rc" -eq 1 ]
grep -q "x.b2frame: .*its redo file is beside it" "$tmp/out"
check "scrub names the redo file of a torn frame" [ $? -eq 0 ]
"$B2F" compact "$tmp/redo/x.b2frame" >/dev/null 2>&1 && "$B2F" scrub -q "$tmp/redo" &&
  [ ! -e "$tmp/redo/.x.b2frame.redo.b2tmp" ]
check "b2f compact finishes the rewrite" [ $? -eq 0 ]

# A frame another program changed since its table was written (here its
# time moved): a note, not damage; its chunks are still decoded.  A file
# with a frame suffix that does not start like a frame is the plain file
# the mount shows, not a damaged frame.
mkdir -p "$tmp/note"
cp "$T/a/good.b2frame" "$tmp/note/moved.b2frame"
touch -d '2001-01-01' "$tmp/note/moved.b2frame"
echo "plain words" >"$tmp/note/words.b2"
"$B2F" scrub "$tmp/note" >"$tmp/out" 2>&1; rc=$?
check "scrub: a stale table is a note, status 0" [ "$rc" -eq 0 ]
grep -q "moved.b2frame: note: checksum table ignored" "$tmp/out"
check "scrub: the stale table is named" [ $? -eq 0 ]
grep -q "^scrub: 1 frames," "$tmp/out"
check "scrub: a text file with a frame suffix is no frame" [ $? -eq 0 ]

# Usage errors.
"$B2F" scrub >/dev/null 2>&1
check "scrub without DIR: status 2" [ $? -eq 2 ]
"$B2F" scrub --bogus "$T" >/dev/null 2>&1
check "scrub unknown option: status 2" [ $? -eq 2 ]
exit 0
