#!/usr/bin/env bash
# t_crash.sh - crash safety through the mount: the daemon is killed with
# SIGKILL while a writer works through it, then every frame must verify and
# hold a content the writer's log allows.
#
#   bash tests/t_crash.sh [TRIALS]      (default 16; `make test-crash`: 200)
#
# Each trial mounts SOURCE with the sanitizer daemon (layout, codec and the
# write-path knobs vary: idle_flush, cache_size, dirty_max, compaction at
# close with low thresholds, chunksize 64K so files of up to 2 MiB have
# many chunks), starts tests/crash_writer.c (random writes, appends,
# truncates, fsync/fdatasync, close, reads, renames, renames over open
# files, unlinks of open files; logged outside the mount) and, where NumPy
# is installed, tests/crash_npy.py (a b2nd array written through its .npy
# view: item writes, resizes by rows, fsync, reopen; same log), waits a random
# time and kills the daemon with SIGKILL, then the writer; unmounts with
# fusermount3 -uz and checks:
#   - `b2f verify` passes for every frame in SOURCE (sparse ones included);
#   - `crash_writer check` (see its header): the names are those after the
#     completed operations (or after the one under way), and each frame's
#     content equals, as a whole, one state between the last acknowledged
#     commit (completed fsync, fdatasync, close, creation) and the state after the
#     operation under way: nothing acknowledged is lost, no chunk mixes two
#     versions, no commit is torn across chunks;
#   - `crash_npy.py check`: the array equals one state between its last
#     acknowledged commit and the operation under way (shape and items);
#   - the daemon log holds no sanitizer report from before the kill.
# The next trial mounts the same SOURCE and the writer first reads every
# file through the new mount: the listing and the bytes must be exactly
# what the checker accepted (the remount check).  Trials run in groups on
# one SOURCE (4 per group, 10 with 100+ trials); each group ends with a
# clean mount/verify/unmount whose daemon must exit 0.  Groups cycle through
# {contiguous, sparse} x {zstd, lz4, blosclz}.
#
# A second phase (TRIALS/4 trials, at least 4; the array writer runs 150
# operations before or after the file writer) runs the fault-injection
# daemon build/fault/b2fs with B2FS_FAULT=op:nth:ERR (write, fsync,
# fdatasync, rename, open, ftruncate or unlink; EIO, ENOSPC, or a short
# write): the daemon survives, the writer gets the error or the engine
# redoes the failed work, and the same checks hold while still mounted and
# after a clean unmount.  These trials cycle through the layouts on one
# SOURCE, so frames of both layouts meet (renames between them included).
#
# For even seeds the array is in tiles that split its rows (its chunks
# get parked beside the frame); CRASH_TILES=0 keeps chunks across rows.
# Each trial prints its seed.  CRASH_SEED=N sets the first seed (trial k
# uses N+k: the operations, kill delay and options); the kill lands at a
# moment the seed does not fix, so a failing trial's SOURCE, logs and
# daemon log are kept in CRASH_KEEP (default /tmp/b2fs-crash-fail.*).
# Env: B2FS, B2F (sanitizer builds by default), B2FS_FAULTY (default
# build/fault/b2fs; the second phase is skipped when it is not built), CC.
set -u
cd "$(dirname "$0")/.."
. tests/lib.sh
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
N=${1:-16}
SEED=${CRASH_SEED:-$(( $(date +%s) % 1000000 * 1000 ))}
CS=65536

if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then skip crash "$B2FS or $B2F is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  skip crash "no /dev/fuse or fusermount3"; exit 0
fi
TMP=$(mktemp -d /tmp/b2fs-t_crash.XXXXXX)
KEEP=${CRASH_KEEP:-}
SRC=$TMP/src MNT=$TMP/mnt LOGD=$TMP/log W=$TMP/crash_writer
mkdir -p "$MNT" "$LOGD"
DPID="" WPID="" NPID=""
NPY_OK=0; have_numpy && NPY_OK=1
cleanup() {
  [ -n "$WPID" ] && kill -9 "$WPID" 2>/dev/null
  [ -n "$NPID" ] && kill -9 "$NPID" 2>/dev/null
  [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null
  mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
  rm -rf "$TMP"
}
trap cleanup EXIT
if ! ${CC:-cc} -std=c11 -O2 -Wall -Wextra -Werror -o "$W" tests/crash_writer.c; then
  notok crash_build "cannot build tests/crash_writer.c"; exit 1
fi

CONFIGS=("contiguous zstd" "sparse lz4" "contiguous lz4" "sparse zstd" "contiguous blosclz"
         "sparse blosclz")
G=4; [ "$N" -ge 100 ] && G=10

# mount OPTS [DAEMON]: start the daemon in the foreground, wait for the mount.
mount_src() {
  "${2:-$B2FS}" "$SRC" "$MNT" -f -o "$1" 2>>"$TMP/daemon.log" &
  DPID=$!
  for _ in $(seq 300); do
    mountpoint -q "$MNT" && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.05
  done
  return 1
}

sanitizer_hits() {
  grep -m1 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)' \
    "$TMP/daemon.log" 2>/dev/null
}

# keep_trial NAME: copy what a failing trial leaves for a post mortem.
keep_trial() {
  [ -n "$KEEP" ] || KEEP=$(mktemp -d /tmp/b2fs-crash-fail.XXXXXX)
  mkdir -p "$KEEP/$1"
  cp -a "$SRC" "$LOGD" "$TMP/daemon.log" "$KEEP/$1/" 2>/dev/null
  echo "  kept in $KEEP/$1" >&2
}

fresh_source() {
  rm -rf "$SRC" "$LOGD"
  mkdir -p "$SRC/d" "$LOGD"
}

# Clean end of a group: mount, the writer's remount check alone, unmount;
# the daemon must exit 0 with no sanitizer report.
group_end() {
  local name=$1 opts=$2 why=""
  : >"$TMP/daemon.log"
  if ! mount_src "$opts"; then
    why="no mount: $(head -c 300 "$TMP/daemon.log")"
  elif ! "$W" run "$MNT/d" "$LOGD" 0 0 2>"$TMP/final.err"; then
    why="remount check: $(head -c 400 "$TMP/final.err")"
  fi
  if mountpoint -q "$MNT"; then
    for _ in $(seq 50); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.1; done
  fi
  if [ -n "$DPID" ]; then
    local rc=0 i
    for i in $(seq 600); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$DPID" 2>/dev/null; then kill -9 "$DPID"; why="$why daemon alive after unmount"; fi
    wait "$DPID"; rc=$?
    [ "$rc" -ne 0 ] && why="$why daemon exited with $rc"
    DPID=""
  fi
  local hit; hit=$(sanitizer_hits)
  [ -n "$hit" ] && why="$why sanitizer: $hit"
  if [ -z "$why" ]; then ok "$name"; else notok "$name" "$why"; keep_trial "$name"; fi
}

start=$(date +%s)
fresh=1 passed=0 failed=0 prev_opts=""
echo "# t_crash: $N trials, first seed $SEED, groups of $G" >&2
for ((t = 0; t < N; t++)); do
  seed=$((SEED + t))
  RANDOM=$seed
  cfg=(${CONFIGS[$(( (t / G) % ${#CONFIGS[@]} ))]})
  layout=${cfg[0]} codec=${cfg[1]}
  if [ $((t % G)) -eq 0 ] && [ "$t" -gt 0 ] && [ "$fresh" -eq 0 ]; then
    group_end "crash_group_$((t / G - 1))_remount" "$prev_opts"
  fi
  [ $((t % G)) -eq 0 ] && fresh=1
  [ "$fresh" -eq 1 ] && fresh_source
  fresh=0
  idle=(0 20 150 1000); caches=("1M 256K" "4M 1M" "64M 8M")
  cache=(${caches[$((RANDOM % 3))]})
  opts="layout=$layout,codec=$codec,clevel=$((RANDOM % 9 + 1)),chunksize=64K"
  opts+=",typesize=$((1 << (RANDOM % 4))),idle_flush=${idle[$((RANDOM % 4))]}"
  opts+=",cache_size=${cache[0]},dirty_max=${cache[1]},compact_pct=20,compact_min=128K,nthreads=2"
  prev_opts=$opts
  # Kill delay after the writer is ready: short, medium or long.
  case $((RANDOM % 5)) in
    0|1) delay=$((RANDOM % 300)) ;;
    2|3) delay=$((300 + RANDOM % 1200)) ;;
    *) delay=$((1500 + RANDOM % 1500)) ;;
  esac
  name="crash_${t}"
  tag="seed=$seed $layout $codec kill=${delay}ms"
  : >"$TMP/daemon.log"
  rm -f "$LOGD/log" "$LOGD/npy.log" "$LOGD"/*.new
  if ! mount_src "$opts"; then
    notok "$name" "$tag: no mount: $(head -c 300 "$TMP/daemon.log")"
    keep_trial "$name"; failed=$((failed + 1)); fresh=1
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null; DPID=""
    mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
    continue
  fi
  "$W" run "$MNT/d" "$LOGD" "$seed" -1 2>"$LOGD/writer.err" &
  WPID=$!
  if [ "$NPY_OK" = 1 ]; then
    "$PY" tests/crash_npy.py run "$MNT/a" "$LOGD" "$seed" 2>"$LOGD/npy.err" &
    NPID=$!
  fi
  why=""
  for _ in $(seq 600); do
    [ -s "$LOGD/log" ] && { [ "$NPY_OK" = 0 ] || grep -q '^[RS]' "$LOGD/npy.log" 2>/dev/null; } && break
    kill -0 "$WPID" 2>/dev/null || break
    [ -n "$NPID" ] && ! kill -0 "$NPID" 2>/dev/null && break
    sleep 0.05
  done
  if [ -n "$NPID" ] && ! kill -0 "$NPID" 2>/dev/null; then
    why="array writer stopped (remount check?): $(tail -c 500 "$LOGD/npy.err")"
  elif ! kill -0 "$WPID" 2>/dev/null || [ ! -s "$LOGD/log" ]; then
    why="writer did not start (remount check?): $(head -c 500 "$LOGD/writer.err")"
  else
    sleep "$(printf '%d.%03d' $((delay / 1000)) $((delay % 1000)))"
    kill -0 "$WPID" 2>/dev/null ||
      why="writer stopped before the kill: $(head -c 500 "$LOGD/writer.err")"
    [ -n "$NPID" ] && ! kill -0 "$NPID" 2>/dev/null &&
      why="$why array writer stopped before the kill: $(tail -c 500 "$LOGD/npy.err")"
  fi
  kill -9 "$DPID" 2>/dev/null
  wait "$DPID" 2>/dev/null
  DPID=""
  sleep 0.02
  kill -9 "$WPID" 2>/dev/null
  wait "$WPID" 2>/dev/null
  WPID=""
  if [ -n "$NPID" ]; then kill -9 "$NPID" 2>/dev/null; wait "$NPID" 2>/dev/null; NPID=""; fi
  fusermount3 -uz "$MNT" 2>/dev/null
  for _ in $(seq 100); do mountpoint -q "$MNT" || break; sleep 0.05; done
  hit=$(sanitizer_hits)
  [ -n "$hit" ] && why="$why daemon sanitizer report: $hit"
  # Every frame in SOURCE must verify.  Hidden entries are not frames:
  # engine temporaries (.NAME.b2tmp, chunks.b2frame.tmp) are partial by
  # design, and .b2fs-gone-* are frames the daemon was deleting.
  mapfile -t frames < <(find "$SRC" -name '.*' -prune -o \( -name '*.b2frame' -o -name '*.b2nd' \) -prune -print | sort)
  if [ ${#frames[@]} -gt 0 ] && ! out=$("$B2F" verify "${frames[@]}" 2>&1); then
    why="$why verify: $(grep -v ': ok' <<<"$out" | head -c 500)"
  fi
  if ! out=$("$W" check "$SRC/d" "$LOGD" "$B2F" "$CS" 2>&1); then
    why="$why check: $(grep -v '^#' <<<"$out" | head -c 800)"
  fi
  summary=$(grep '^#' <<<"$out" | head -1)
  if [ "$NPY_OK" = 1 ]; then
    if nout=$("$PY" tests/crash_npy.py check "$SRC/a" "$LOGD" "$B2F" 2>&1); then
      summary="$summary; ${nout#ok }"
    else
      why="$why array check: $(head -c 600 <<<"$nout")"
    fi
  fi
  if [ -z "$why" ]; then
    mv "$LOGD/state.new" "$LOGD/state"
    for f in "$LOGD"/base*.new "$LOGD"/npy.base.new; do [ -e "$f" ] && mv "$f" "${f%.new}"; done
    ok "$name $tag ${summary#\# }"
    passed=$((passed + 1))
  else
    notok "$name" "$tag:$why"
    echo "  options: $opts; $summary" >&2
    keep_trial "$name"
    failed=$((failed + 1))
    fresh=1
  fi
done
[ "$fresh" -eq 0 ] && group_end "crash_group_$(( (N - 1) / G ))_remount" "$prev_opts"
echo "# t_crash: $passed of $N trials passed, $failed failed, $(( $(date +%s) - start )) s" >&2

# ---- the disk refusing, the daemon surviving --------------------------------
# The fault-injection daemon (build/fault/b2fs: B2FS_FAULT=op:nth:ERR makes
# the nth call of one write-side operation fail) serves a writer of 400
# operations.  The writer either gets the error (EIO or ENOSPC, at the
# operation that needed the failed I/O: write, fsync, close, rename...) and
# stops, or the engine redid the failed work unseen.  Either way the daemon
# must still serve the mount, and the same checks as above hold twice: on
# SOURCE as it is right after the error (the daemon alive), and after a
# clean unmount (its last flush).  Then the next trial remounts.
FB2FS=${B2FS_FAULTY:-$PWD/build/fault/b2fs}
NF=$(( N / 4 )); [ "$NF" -lt 4 ] && NF=4
if [ ! -x "$FB2FS" ]; then
  skip crash_faults "$FB2FS is not built (make build/fault/b2fs)"
  exit 0
fi
# npy_fault_run: the array writer, 150 operations, in a fault trial.
npy_fault_run() {
  [ "$NPY_OK" = 1 ] || return 0
  rm -f "$LOGD/npy.log"
  timeout -s KILL 300 "$PY" tests/crash_npy.py run "$MNT/a" "$LOGD" "$seed" 150 2>"$LOGD/npy.err"
  case $? in
    0) ;;
    4) fgot=$((fgot + 1)); npy_got="array: $(tail -1 "$LOGD/npy.log"); " ;;
    *) why="$why array writer failed: $(tail -c 300 "$LOGD/npy.err")" ;;
  esac
}
fstart=$(date +%s) fpassed=0 fgot=0
FOPS=(pwrite pwrite pwrite fsync fsync fdatasync rename open ftruncate unlink)
fresh_source
for ((t = 0; t < NF; t++)); do
  seed=$((SEED + 100000 + t))
  RANDOM=$seed
  cfg=(${CONFIGS[$((t % ${#CONFIGS[@]}))]})
  layout=${cfg[0]} codec=${cfg[1]}
  op=${FOPS[$((RANDOM % ${#FOPS[@]}))]}
  nth=$((1 + RANDOM % 60))
  errs=(EIO ENOSPC); [ "$op" = pwrite ] && errs+=(SHORT)
  err=${errs[$((RANDOM % ${#errs[@]}))]}
  opts="layout=$layout,codec=$codec,chunksize=64K,idle_flush=$(( (RANDOM % 2) * 50 ))"
  opts+=",cache_size=1M,dirty_max=256K,compact_pct=20,compact_min=128K,nthreads=2"
  name="crash_fault_$t"
  tag="seed=$seed $layout $codec B2FS_FAULT=$op:$nth:$err"
  : >"$TMP/daemon.log"
  rm -f "$LOGD/log" "$LOGD"/*.new
  why=""
  if ! B2FS_FAULT=$op:$nth:$err mount_src "$opts" "$FB2FS"; then
    notok "$name" "$tag: no mount: $(head -c 300 "$TMP/daemon.log")"
    [ -n "$DPID" ] && kill -9 "$DPID" 2>/dev/null; DPID=""
    mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
    fresh_source
    continue
  fi
  # The array writer (where NumPy is) runs before the file writer in odd
  # trials, after it in even ones, so either may meet the fault.
  npy_got=""
  [ $((t % 2)) = 1 ] && npy_fault_run
  timeout -s KILL 300 "$W" run "$MNT/d" "$LOGD" "$seed" 400 2>"$LOGD/writer.err"
  wrc=$?
  [ $((t % 2)) = 0 ] && npy_fault_run
  got=$npy_got
  case $wrc in
    0) ;;
    4) got="$got$(tail -1 "$LOGD/log")"
       e=${got##* }
       [ "$e" = 5 ] || [ "$e" = 28 ] || why="$why writer error $(head -c 200 "$LOGD/writer.err")"
       fgot=$((fgot + 1)) ;;
    *) why="$why writer exited with $wrc: $(head -c 300 "$LOGD/writer.err")" ;;
  esac
  if ! mountpoint -q "$MNT" || ! kill -0 "$DPID" 2>/dev/null || ! ls "$MNT/d" >/dev/null; then
    why="$why daemon gone after the fault"
  fi
  # SOURCE right after the error, the daemon alive (once an idle commit
  # the error left behind has been retried).
  sleep 0.3
  mapfile -t frames < <(find "$SRC" -name '.*' -prune -o \( -name '*.b2frame' -o -name '*.b2nd' \) -prune -print | sort)
  if [ ${#frames[@]} -gt 0 ] && ! out=$("$B2F" verify "${frames[@]}" 2>&1); then
    why="$why verify (mounted): $(grep -v ': ok' <<<"$out" | head -c 300)"
  fi
  out=$("$W" check "$SRC/d" "$LOGD" "$B2F" "$CS" 2>&1) ||
    why="$why check (mounted): $(grep -v '^#' <<<"$out" | head -c 500)"
  if [ "$NPY_OK" = 1 ] && ! nout=$("$PY" tests/crash_npy.py check "$SRC/a" "$LOGD" "$B2F" 2>&1); then
    why="$why array check (mounted): $(head -c 500 <<<"$nout")"
  fi
  # Then after a clean unmount.
  for _ in $(seq 50); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.1; done
  mountpoint -q "$MNT" && fusermount3 -uz "$MNT"
  if [ -n "$DPID" ]; then
    for _ in $(seq 600); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$DPID" 2>/dev/null && { kill -9 "$DPID"; why="$why daemon alive after unmount"; }
    wait "$DPID"; drc=$?
    [ "$drc" -ge 128 ] && why="$why daemon died with status $drc"
    DPID=""
  fi
  hit=$(sanitizer_hits)
  [ -n "$hit" ] && why="$why sanitizer: $hit"
  mapfile -t frames < <(find "$SRC" -name '.*' -prune -o \( -name '*.b2frame' -o -name '*.b2nd' \) -prune -print | sort)
  if [ ${#frames[@]} -gt 0 ] && ! out=$("$B2F" verify "${frames[@]}" 2>&1); then
    why="$why verify: $(grep -v ': ok' <<<"$out" | head -c 300)"
  fi
  rm -f "$LOGD"/*.new
  if ! out=$("$W" check "$SRC/d" "$LOGD" "$B2F" "$CS" 2>&1); then
    why="$why check: $(grep -v '^#' <<<"$out" | head -c 500)"
  fi
  summary=$(grep '^#' <<<"$out" | head -1)
  if [ "$NPY_OK" = 1 ]; then
    rm -f "$LOGD/npy.base.new"
    if nout=$("$PY" tests/crash_npy.py check "$SRC/a" "$LOGD" "$B2F" 2>&1); then
      summary="$summary; ${nout#ok }"
    else
      why="$why array check: $(head -c 500 <<<"$nout")"
    fi
  fi
  if [ -z "$why" ]; then
    mv "$LOGD/state.new" "$LOGD/state"
    for f in "$LOGD"/base*.new "$LOGD"/npy.base.new; do [ -e "$f" ] && mv "$f" "${f%.new}"; done
    ok "$name $tag: ${got:+writer got the error ($got); }${summary#\# }"
    fpassed=$((fpassed + 1))
  else
    notok "$name" "$tag:$why"
    keep_trial "$name"
    fresh_source
  fi
done
echo "# t_crash: $fpassed of $NF fault trials passed ($fgot reached the writer), $(( $(date +%s) - fstart )) s" >&2
