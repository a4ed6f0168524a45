#!/usr/bin/env bash
# t_direct_io.sh - the mount with -o direct_io: frames are read without the
# kernel's page cache, with the same bytes, and can still be mapped shared.
#
# A 32 MiB file of repeated text is packed into a frame (a few KiB), so
# that what reading it adds to the page cache is the decoded bytes: at
# least 24 MiB through a default mount, under 8 MiB with -o direct_io.
# Reads of 4 KiB and 1 MiB give the file's bytes; a shared mapping gives
# them too, on Linux 6.6 and later; an array's .npy view loads in numpy,
# read and (6.6+) mapped with numpy.load(mmap_mode="r").
#
# Env: B2FS, B2F, PY (set by tests/run.sh).
set -u
cd "$(dirname "$0")/.."
. tests/mount_lib.sh
mount_test_start direct_io

S=$TMP/src
mkdir -p "$S" "$TMP/m1" "$TMP/m2"
yes "b2fs reads this line without the page cache, line after line" | head -c 33554432 >"$TMP/raw"
if ! $T "$B2F" pack -c zstd -l 1 "$TMP/raw" "$S/text.b2frame" >/dev/null 2>"$TMP/pack.err"; then
  nok direct_io_pack "b2f pack failed: $(head -c 300 "$TMP/pack.err")"
  exit 0
fi
want=$(sha256sum <"$TMP/raw" | cut -c1-64)

cached_kib() { awk '/^Cached:/ {print $2}' /proc/meminfo; }

# read_growth MOUNT: KiB the page cache grew by while the file was read.
read_growth() {
  local before after
  before=$(cached_kib)
  $T cat "$1/text" >/dev/null
  after=$(cached_kib)
  echo $((after - before))
}

if ! mount_bg default "$S" "$TMP/m1" "ro"; then
  nok direct_io_mount "default mount failed: $(head -c 300 "${LOGS[$TMP/m1]}")"; exit 0
fi
if ! mount_bg direct "$S" "$TMP/m2" "ro,direct_io"; then
  nok direct_io_mount "direct_io mount failed: $(head -c 300 "${LOGS[$TMP/m2]}")"; exit 0
fi

# Bytes, by 4 KiB and by 1 MiB reads.
bad=""
for bs in 4096 1048576; do
  got=$($T dd if="$TMP/m2/text" bs=$bs status=none | sha256sum | cut -c1-64)
  [ "$got" = "$want" ] || bad="$bad bs=$bs"
done
odd=$($T dd if="$TMP/m2/text" iflag=skip_bytes,count_bytes skip=1048573 count=70001 bs=65536 status=none | sha256sum | cut -c1-64)
[ "$odd" = "$(tail -c +1048574 "$TMP/raw" | head -c 70001 | sha256sum | cut -c1-64)" ] || bad="$bad odd-range"
if [ -z "$bad" ]; then ok direct_io_bytes; else nok direct_io_bytes "differ:$bad"; fi

# The page cache: filled through the default mount, not through this one.
g1=$(read_growth "$TMP/m1")
g2=$(read_growth "$TMP/m2")
if [ "$g1" -ge 24576 ] && [ "$g2" -lt 8192 ]; then
  ok direct_io_no_page_cache
else
  nok direct_io_no_page_cache "page cache grew by $g1 KiB (default) and $g2 KiB (direct_io)"
fi

# A shared mapping: refused by kernels before 6.6 (FUSE_DIRECT_IO_ALLOW_MMAP).
IFS=. read -r kmaj kmin _ <<<"$(uname -r)"
shared_ok=0
if [ "$kmaj" -gt 6 ] || { [ "$kmaj" -eq 6 ] && [ "${kmin%%[!0-9]*}" -ge 6 ]; }; then
  shared_ok=1
  got=$($T "$PY" -c '
import hashlib, mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    print(hashlib.sha256(m).hexdigest())
' "$TMP/m2/text" 2>&1)
  if [ "$got" = "$want" ]; then ok direct_io_mmap_shared; else nok direct_io_mmap_shared "got: $got"; fi
else
  echo "skip direct_io_mmap_shared: Linux $(uname -r) maps direct I/O files only privately"
fi

# An array: its .npy view through numpy.load, read and mapped.
if "$PY" -c 'import numpy' 2>/dev/null; then
  "$PY" -c '
import numpy as np, sys
a = (np.arange(3 * 700 * 500, dtype="<f8").reshape(3, 700, 500) * 0.25).astype("<f8")
np.save(sys.argv[1], a)' "$TMP/arr.npy"
  if ! $T "$B2F" pack "$TMP/arr.npy" "$S/arr.b2nd" >/dev/null 2>"$TMP/pack2.err"; then
    nok direct_io_npy "b2f pack failed: $(head -c 300 "$TMP/pack2.err")"
  else
    got=$($T "$PY" -c '
import numpy as np, sys
want = np.load(sys.argv[1])
read = np.load(sys.argv[2])
print(read.dtype == want.dtype and read.shape == want.shape and bool((read == want).all()))
if sys.argv[3] == "1":
    mapped = np.load(sys.argv[2], mmap_mode="r")
    print(bool((mapped == want).all()))
' "$TMP/arr.npy" "$TMP/m2/arr.npy" "$shared_ok" 2>&1 | tr '\n' ' ')
    case "$shared_ok:$got" in
      "1:True True ") ok direct_io_npy ;;
      "0:True ") ok direct_io_npy ;;
      *) nok direct_io_npy "numpy says: $got" ;;
    esac
  fi
else
  echo "skip direct_io_npy: no numpy at $PY"
fi

unmount_fg "$TMP/m1" default
unmount_fg "$TMP/m2" direct
exit 0
