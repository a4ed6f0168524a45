#!/usr/bin/env bash
# t_warm.sh - files read one after another in a directory's order (tar):
# the daemon decodes the next frames ahead of the reader (fuse/warm.c).
# Checks that every byte read that way is right, also for a frame changed
# behind the mount after it was warmed (and handed to the page cache) and
# for frames being written, that the daemon says it warmed frames (with -o
# warm=0, none) and handed the small ones to the page cache, and that a
# reader out of order warms nothing.
set -u
cd "$(dirname "$0")/.."
: "${B2FS:=build/san/b2fs}" "${B2F:=build/san/b2f}"
[ -e /dev/fuse ] || { echo "skip warm: no /dev/fuse"; exit 0; }
TMP=$(mktemp -d /tmp/b2fs-t_warm.XXXXXX)
. tests/mount_lib.sh
trap 'unmount_all; rm -rf "$TMP"' EXIT
PYBIN=${PY:-/usr/bin/python3}
mkdir -p "$TMP/src/d" "$TMP/plain" "$TMP/mnt"
# 24 files of 1 byte to 700 KiB, text and random, some of several chunks.
"$PYBIN" - "$TMP/plain" <<'PY'
import os, random, sys
rnd = random.Random(7)
words = [b"alpha ", b"bravo ", b"charlie ", b"delta ", b"echo "]
for i in range(24):
    n = [1, 100, 5000, 70000, 300000, 700000][i % 6] + rnd.randrange(1000)
    if i % 2:
        data = os.urandom(n)
    else:
        data = b"".join(rnd.choice(words) for _ in range(n // 5 + 1))[:n]
    open(os.path.join(sys.argv[1], "f%02d" % i), "wb").write(data)
PY
for f in "$TMP"/plain/f*; do
  "$B2F" pack -c zstd -l 1 --chunksize 256K "$f" "$TMP/src/d/$(basename "$f").b2frame" ||
    { nok warm_pack "b2f pack failed"; exit 0; }
done
mkdir "$TMP/src/d/sub" # a directory among the frames
cp "$TMP/plain/f00" "$TMP/src/d/plain.txt"

# tar through the mount, unpacked and compared with the originals.
tar_compare() { # NAME
  rm -rf "$TMP/out"
  mkdir "$TMP/out"
  if ! (cd "$TMP/mnt/d" && tar cf - .) | tar xf - -C "$TMP/out"; then
    nok "$1" "tar failed"; return
  fi
  local bad=""
  for f in "$TMP"/plain/f*; do
    cmp -s "$f" "$TMP/out/$(basename "$f")" || bad="$bad $(basename "$f")"
  done
  cmp -s "$TMP/plain/f00" "$TMP/out/plain.txt" || bad="$bad plain.txt"
  if [ -z "$bad" ]; then ok "$1"; else nok "$1" "bytes differ:$bad"; fi
}
warmed() { # LOG: frames the daemon says it warmed (0 if it says nothing)
  local n
  n=$(sed -n 's/.* \([0-9][0-9]*\) frames were decoded ahead of their readers.*/\1/p' "$1" | tail -1)
  echo "${n:-0}"
}

handed() { # LOG: of them, frames handed to the page cache ahead of their open
  local n
  n=$(sed -n 's/.* \([0-9][0-9]*\) of them handed to the page cache.*/\1/p' "$1" | tail -1)
  echo "${n:-0}"
}

# session NAME OPTS BODY: mount with OPTS, run the function BODY, unmount;
# $n is then the number of frames the daemon says it warmed, $stored of
# them handed to the page cache.
session() {
  n=-1
  if ! mount_bg "$1" "$TMP/src" "$TMP/mnt" "$2"; then
    nok "$1_mount" "daemon did not mount: $(head -c 300 "$TMP/$1.log")"; return 1
  fi
  "$3"
  unmount_fg "$TMP/mnt" "$1"
  n=$(warmed "$TMP/$1.log")
  stored=$(handed "$TMP/$1.log")
}
# count NAME TEST MIN-OR-EXACT WHAT: check $n.
count() {
  if [ "$n" "$2" "$3" ]; then ok "$1"; else nok "$1" "the daemon warmed $n frames $4"; fi
}

tar_and_more() {
  tar_compare warm_tar
  # A warmed frame changed behind the mount: its new bytes are read.
  (cd "$TMP/mnt/d" && cat f00 f01 >/dev/null) # f02, f03 warmed
  sleep 0.5
  cp "$TMP/plain/f05" "$TMP/plain/f02"
  "$B2F" pack -c lz4 --chunksize 64K "$TMP/plain/f02" "$TMP/src/d/.f02.new" &&
    mv "$TMP/src/d/.f02.new" "$TMP/src/d/f02.b2frame"
  sleep 1.1 # the attribute timeout
  if cmp -s "$TMP/mnt/d/f02" "$TMP/plain/f02"; then ok warm_changed_behind; else
    nok warm_changed_behind "the old bytes of a warmed frame were read"; fi
  # Frames open for writing are read with what was written.
  exec 7>>"$TMP/mnt/d/f04"
  printf 'tail' >&7
  (cd "$TMP/mnt/d" && cat f02 f03 f04 >"$TMP/cat.out")
  exec 7>&-
  printf 'tail' >>"$TMP/plain/f04"
  if cat "$TMP/plain/f02" "$TMP/plain/f03" "$TMP/plain/f04" | cmp -s - "$TMP/cat.out"; then
    ok warm_writer; else nok warm_writer "a frame being written read wrong"; fi
}
session warm "cache_size=8M" tar_and_more && count warm_said -ge 1 "in a tar"

# The count: frames read one by one in the listing's order, with a pause
# after each that leaves the warming thread its turn however loaded the
# machine is, are all warmed but the first (its open begins the pass and
# warms the next; the pause keeps this from depending on who wins a race;
# tar above does not pause).
paced() {
  ls "$TMP/mnt/d" >/dev/null
  local bad="" f
  for f in $(ls "$TMP/plain"); do
    cmp -s "$TMP/mnt/d/$f" "$TMP/plain/$f" || bad="$bad $f"
    sleep 0.3
  done
  if [ -z "$bad" ]; then ok warm_paced_bytes; else nok warm_paced_bytes "bytes differ:$bad"; fi
}
session warm_paced "cache_size=8M" paced && count warm_counted -ge 23 "for 24 read in order"
# All of them are of at most 1 MiB: each warmed whole is handed to the
# page cache before its open (and read right above).
if [ "$n" -ge 23 ] && [ "$stored" -eq "$n" ]; then ok warm_handed; else
  nok warm_handed "of $n frames warmed, $stored were handed to the page cache"; fi

# A frame the kernel has a file open of is warmed but not handed over
# ahead (a read of it could hold its pages locked, and the hand-over must
# never wait for a read): f03 held open, then f00..f05 read in order with
# pauses warms f01..f07, all handed over but f03.
held() {
  ls "$TMP/mnt/d" >/dev/null
  exec 8<"$TMP/mnt/d/f03"
  local bad="" f
  for f in f00 f01 f02 f03 f04 f05; do
    cmp -s "$TMP/mnt/d/$f" "$TMP/plain/$f" || bad="$bad $f"
    sleep 0.3
  done
  cmp -s - "$TMP/plain/f03" <&8 || bad="$bad f03(held)"
  exec 8<&-
  if [ -z "$bad" ]; then ok warm_held_bytes; else nok warm_held_bytes "bytes differ:$bad"; fi
}
if session warm_held "cache_size=8M,warm=2" held; then
  if [ "$n" -ge 6 ] && [ "$stored" -eq $((n - 1)) ]; then ok warm_held_not_handed; else
    nok warm_held_not_handed "of $n frames warmed, $stored handed to the page cache (want all but the one held open)"; fi
fi

# Out of order: nothing warmed.
shuffled() {
  ls "$TMP/mnt/d" >/dev/null
  (cd "$TMP/mnt/d" && cat f20 f10 f15 f05 f22 f01 f12 f17 | cmp -s - <(cd "$TMP/plain" && cat f20 f10 f15 f05 f22 f01 f12 f17)) &&
    ok warm_random_bytes || nok warm_random_bytes "bytes differ"
}
session warm_random "cache_size=8M" shuffled && count warm_random_none -eq 0 "for reads out of order"

# -o warm=0: the same bytes, nothing warmed.
tar_off() { tar_compare warm_off_tar; }
session warm_off "cache_size=8M,warm=0" tar_off && count warm_off_none -eq 0 "with warm=0"

# Frames kept idle hold descriptors: more than half the descriptor limit (at
# most 1048576, the kernel's nr_open) asked for is lowered (said in the
# log), and reading still works.
tar_idle() { tar_compare warm_idle_tar; }
if session warm_idle "idle_frames=1048576" tar_idle; then
  if grep -q "idle_frames=1048576 lowered to" "$TMP/warm_idle.log"; then ok warm_idle_clamped
  else nok warm_idle_clamped "no word of the idle_frames lowered: $(head -c 300 "$TMP/warm_idle.log")"; fi
fi

# -o warm= takes 0 to 32 entries: 32 mounts (a tar reads right), 33 is
# refused with a word naming the option, before anything is mounted.
tar_32() { tar_compare warm_32_tar; }
session warm_32 "cache_size=8M,warm=32" tar_32 && count warm_32_said -ge 1 "with warm=32"
if "$B2FS" "$TMP/src" "$TMP/mnt" -o warm=33 >"$TMP/w33.out" 2>&1; then
  nok warm_33_refused "b2fs -o warm=33 exited 0"; unmount_all
elif grep -q "bad warm '33' (0-32" "$TMP/w33.out" && ! mountpoint -q "$TMP/mnt"; then
  ok warm_33_refused
else
  nok warm_33_refused "$(head -c 300 "$TMP/w33.out")"
fi
