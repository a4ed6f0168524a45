#!/usr/bin/env bash
# t_behind.sh - frames changed or truncated behind the mount's back while
# it reads them: every read either fails (EIO) or returns the frame's true
# bytes at that offset (a chunk read while it was rewritten is read again,
# one that rotted fails its checksum), the daemon stays up, and its log
# holds no sanitizer report.
set -u
cd "$(dirname "$0")/.."
: "${B2FS:=build/san/b2fs}" "${B2F:=build/san/b2f}"
[ -e /dev/fuse ] || { echo "skip behind: no /dev/fuse"; exit 0; }
TMP=$(mktemp -d /tmp/b2fs-t_behind.XXXXXX)
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
mkdir -p "$TMP/src" "$TMP/mnt"
# Two versions of one frame with different content, 64K chunks.
head -c 3000000 /dev/urandom >"$TMP/a"
head -c 2500000 /dev/urandom >"$TMP/b"
"$B2F" pack -c lz4 -t 1 --chunksize 64K "$TMP/a" "$TMP/a.b2frame" || { nok behind_pack "pack failed"; exit 0; }
"$B2F" pack -c zstd -t 1 --chunksize 64K "$TMP/b" "$TMP/b.b2frame" || { nok behind_pack "pack failed"; exit 0; }
cp "$TMP/a.b2frame" "$TMP/src/x.b2frame"
if ! mount_bg behind "$TMP/src" "$TMP/mnt" "timeout=0,cache_size=4M"; then
  nok behind_mount "daemon did not mount: $(head -c 300 "$TMP/behind.log")"; exit 0
fi
# Readers: random ranges; each page of a good read must match version a or b.
cat >"$TMP/reader.py" <<'PY'
import os, random, sys, time
mnt, a, b, secs, seed = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
A, B = open(a, "rb").read(), open(b, "rb").read()
rnd, end, bad, good, errs = random.Random(seed), time.time() + secs, 0, 0, 0
while time.time() < end:
    off, n = rnd.randrange(0, 3100000), rnd.randrange(1, 300000)
    try:
        with open(mnt, "rb") as f:
            f.seek(off); got = f.read(n)
    except OSError:
        errs += 1; continue
    # One read() may span several FUSE requests, each of which can see a
    # different version of the file (as on any file system rewritten under
    # a reader); the kernel fills whole pages per request, so every piece
    # between 4 KiB file-offset boundaries must equal version a or b there.
    ok, p = True, off
    while p < off + len(got):
        q = min((p // 4096 + 1) * 4096, off + len(got))
        g = got[p - off:q - off]
        if g != A[p:q] and g != B[p:q]:
            # what the page holds instead, for the log (the first few):
            # zeros, or a piece of either version found elsewhere (a shift)
            if bad < 5: sys.stderr.write("wrong page %d-%d of read %d+%d (got %d): %d zero bytes, "
                             "its first 64 at %d in a, %d in b (sizes %d, %d)\n" % (
                p, q, off, n, len(got), g.count(0), A.find(g[:64]), B.find(g[:64]), len(A), len(B)))
            ok = False; break
        p = q
    if ok:
        good += 1
    else:
        bad += 1
print("reads %d good, %d failed cleanly, %d wrong" % (good, errs, bad))
sys.exit(1 if bad else 0)
PY
PYBIN=${PY:-/usr/bin/python3}
"$PYBIN" "$TMP/reader.py" "$TMP/mnt/x" "$TMP/a" "$TMP/b" 8 1 >"$TMP/r1" 2>&1 & r1=$!
"$PYBIN" "$TMP/reader.py" "$TMP/mnt/x" "$TMP/a" "$TMP/b" 8 2 >"$TMP/r2" 2>&1 & r2=$!
# Bit rot: 16 bytes of file $1 at offset $2 flipped, its times kept (a
# program writing the file moves its time, and then what it wrote is read
# as it is: another program may rewrite a chunk in place, as the reference
# library does).
cat >"$TMP/rot.py" <<'PY'
import os, sys
path, at = sys.argv[1], int(sys.argv[2])
st = os.stat(path)
fd = os.open(path, os.O_RDWR)
os.pwrite(fd, bytes(b ^ 0x5A for b in os.pread(fd, 16, at)), at)
os.close(fd)
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
PY
# Meanwhile: truncate, swap and rewrite the source frame in place, and
# replace it by a copy that rotted.
end=$((SECONDS + 8))
while [ $SECONDS -lt $end ]; do
  truncate -s $((RANDOM * 40)) "$TMP/src/x.b2frame"
  cp "$TMP/b.b2frame" "$TMP/src/x.b2frame"          # rewrite in place
  cp "$TMP/a.b2frame" "$TMP/src/.x.new" && mv "$TMP/src/.x.new" "$TMP/src/x.b2frame"  # replace
  cp -p "$TMP/a.b2frame" "$TMP/src/.x.new" && "$PYBIN" "$TMP/rot.py" "$TMP/src/.x.new" $((RANDOM * 30)) &&
    mv "$TMP/src/.x.new" "$TMP/src/x.b2frame"       # replaced by a copy that rotted
  cp "$TMP/a.b2frame" "$TMP/src/x.b2frame"
done
wait $r1; s1=$?; wait $r2; s2=$?
echo "  $(cat "$TMP/r1") / $(cat "$TMP/r2")" >&2
if [ $s1 -eq 0 ] && [ $s2 -eq 0 ]; then ok behind_reads_consistent; else nok behind_reads_consistent "$(cat "$TMP/r1" "$TMP/r2" | tr '\n' ' ')"; fi
if kill -0 "${PIDS[$TMP/mnt]}" 2>/dev/null && cmp -s "$TMP/mnt/x" "$TMP/a"; then ok behind_daemon_up; else nok behind_daemon_up "daemon gone or final content wrong"; fi
unmount_fg "$TMP/mnt" behind
