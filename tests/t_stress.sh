#!/usr/bin/env bash
# t_stress.sh - concurrency stress of the b2fs daemon under ThreadSanitizer.
#
# tests/stress.c runs writers, readers, a truncator and a renamer on one
# mount for a bounded time (see its header for the oracle: every read must
# be what some order of the completed writes gives; an operation over 10 s
# is a deadlock, and the daemon's threads are dumped with gdb).  Two
# mounts: contiguous frames, then sparse frames, both with small chunks,
# a small cache (evictions), idle commits every 50 ms and compaction at
# close.  The daemon is the ThreadSanitizer build (build/tsan/b2fs, made
# here if needed; B2FS_TSAN overrides); its TSan log must hold no warning.
# After unmounting, every frame in SOURCE passes `b2f verify` and holds
# exactly the content the stress program expects.
#
# Env: B2FS_STRESS_SECONDS (default 15: two thirds contiguous, one third
# sparse), B2FS_STRESS_SEED replays a run's choices (the threads' timing
# still varies), B2FS_STRESS_KEEP=1 keeps the scratch directory,
# B2FS_TSAN, B2F, CC.
set -u
cd "$(dirname "$0")/.."
B2F=${B2F:-$PWD/build/san/b2f}
SECS=${B2FS_STRESS_SECONDS:-15}
SEED=${B2FS_STRESS_SEED:-$(( (RANDOM << 15) | RANDOM ))}

if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skip stress: no /dev/fuse or fusermount3"; exit 0
fi
if [ ! -x "$B2F" ]; then echo "skip stress: $B2F is not built"; exit 0; fi

TMP=$(mktemp -d /tmp/b2fs-t_stress.XXXXXX)
. tests/mount_lib.sh
# B2FS_STRESS_KEEP=1 keeps the logs, SOURCEs and thread dumps.
trap 'unmount_all; if [ -n "${B2FS_STRESS_KEEP:-}" ]; then echo "  kept $TMP"; else rm -rf "$TMP"; fi' EXIT
# The daemon's wrapper for mount_bg ($TMP/b2fs-tsan).
tsan_daemon stress || exit 0

STRESS=$TMP/stress
if ! ${CC:-cc} -O2 -g -std=c11 -Wall -Wextra -Werror -pthread -o "$STRESS" tests/stress.c 2>"$TMP/cc.log"; then
  nok stress_build "$(head -c 500 "$TMP/cc.log")"; exit 0
fi

echo "  seed $SEED (B2FS_STRESS_SEED=$SEED replays the choices), $SECS s, daemon $TSAN_BIN"

# frame_of SOURCE REL: the source frame of a file shown as REL.
frame_of() { echo "$1/$2.b2frame"; }

run_stress() { # name seconds options
  local name=$1 secs=$2 opts=$3
  local src=$TMP/$name.src mnt=$TMP/$name.mnt out=$TMP/$name.out
  mkdir -p "$src" "$mnt" "$out"
  if ! TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 log_path=$TMP/$name.tsan" \
       B2FS="$TMP/b2fs-tsan" mount_bg "$name" "$src" "$mnt" "$opts"; then
    nok "$name" "daemon did not mount: $(head -c 300 "${LOGS[$mnt]}")"; return
  fi
  local pid=${PIDS[$mnt]} rc
  # The wrapper execs, so the pid is the daemon's own.
  timeout -s KILL $((secs * 3 + 300)) "$STRESS" "$mnt" "$secs" "$SEED" "$out" "$pid" >"$out/log" 2>&1
  rc=$?
  case $rc in
    0) ok "$name"; grep -E '^(writers|readers|truncator|renamer|racer):' "$out/log" | sed 's/^/  /' ;;
    3) nok "$name" "$(grep -m1 deadlock "$out/log")"
       sed -n '1,200p' "$out/hang.txt" 2>/dev/null | sed 's/^/  | /' >&2
       kill -9 "$pid" 2>/dev/null ;; # (stress did already) stuck calls return
    *) nok "$name" "exit $rc (seed $SEED): $(grep -m5 -E 'FAIL|rror' "$out/log" | tr '\n' ' ' | head -c 3000); daemon log: $(tail -n 5 "${LOGS[$mnt]}" 2>/dev/null | tr '\n' ' ' | head -c 1500)" ;;
  esac
  unmount_fg "$mnt" "$name"
  # ThreadSanitizer: data races, lock-order inversions, ...
  tsan_clean "${name}_tsan" "$TMP/$name".tsan* "${LOGS[$mnt]}"
  [ "$rc" = 0 ] || return
  # SOURCE: every frame verifies and holds what the program expects.
  local bad="" f n=0 key rel
  while read -r key rel; do
    f=$(frame_of "$src" "$rel")
    n=$((n + 1))
    if ! "$B2F" verify "$f" >/dev/null 2>"$TMP/verify.err"; then
      bad="$bad $rel: verify: $(head -c 200 "$TMP/verify.err");"
    elif ! cmp -s <("$B2F" cat "$f" 2>/dev/null) "$out/$key.expected"; then
      bad="$bad $rel: content differs from the expected ($(stat -c %s "$out/$key.expected") bytes);"
    fi
  done <"$out/names"
  left=$(find "$src" \( -name '.*.b2tmp' -o -name 'chunks.b2frame.tmp' \) | head -3)
  [ -n "$left" ] && bad="$bad leftovers: $left"
  if [ -z "$bad" ] && [ "$n" -gt 0 ]; then ok "${name}_source"; else nok "${name}_source" "${bad:-no files}"; fi
}

s1=$(( SECS * 2 / 3 )); [ "$s1" -lt 1 ] && s1=1
s2=$(( SECS - s1 )); [ "$s2" -lt 1 ] && s2=1
base="chunksize=64K,cache_size=4M,dirty_max=1M,idle_flush=50,compact_min=64K,compact_pct=20"
run_stress stress_contig "$s1" "$base"
run_stress stress_sparse "$s2" "$base,layout=sparse,codec=lz4,nthreads=3"
exit 0
