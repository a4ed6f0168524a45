# bench_common.sh - shell helpers shared by the b2fs benchmark scripts
# (scripts/bench-read, scripts/bench-write).  Source it; it defines only
# functions and the variable BENCH_ROOT (the repository root).
#
#   bench_build_tools        release build (make all; skipped when BENCH_NO_MAKE
#                            is set) and build/bench/gen_data
#   bench_gen KIND SIZE OUT  data set from scripts/gen_data.c (kept when OUT
#                            already holds exactly these bytes' recipe)
#   bench_now                seconds since the epoch, nanosecond resolution
#   bench_rate BYTES SECS    MB/s (10^6 bytes), one decimal
#   bench_ratio A B          A/B with two decimals ("-" when either is absent)
#   bench_drop_caches        sync and drop the kernel's page cache (root)
#   bench_mounted DIR        true when DIR is a mount point
#   bench_wait_mount DIR [S] wait up to S seconds (5) for DIR to be mounted
#   bench_umount DIR         unmount a FUSE mount, waiting until it is gone
#   bench_hwm_kib PID        peak resident set (VmHWM) of PID in KiB
#   bench_cpu_secs PID       CPU time (user + system) PID has used, seconds
#   bench_on_exit CMD        run CMD when the script exits (several allowed)
#   bench_log MSG...         a progress line on stderr
#
# Data generator interface (scripts/gen_data.c, built by bench_build_tools
# as build/bench/gen_data): gen_data KIND SIZE [OUT] [--seed N] with KIND
# signal (smooth float64), text (pseudo-English), random or zeros; SIZE in
# bytes with an optional K/M/G suffix.  Same arguments, same bytes.

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_GEN="$BENCH_ROOT/build/bench/gen_data"

bench_log() { printf '%s\n' "$*" >&2; }

bench_build_tools() {
  if [ -z "${BENCH_NO_MAKE:-}" ]; then make -s -C "$BENCH_ROOT" all >&2 || return 1; fi
  mkdir -p "$BENCH_ROOT/build/bench"
  local src="$BENCH_ROOT/scripts/gen_data.c"
  if [ ! -x "$BENCH_GEN" ] || [ "$src" -nt "$BENCH_GEN" ]; then
    ${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow \
      -Wstrict-prototypes -Wvla -o "$BENCH_GEN" "$src" -lm || return 1
  fi
}

# The recipe of a data file: generator source, kind and size.  A file is
# regenerated when its recipe (kept in OUT.recipe) differs.
bench_gen() {
  local kind=$1 size=$2 out=$3
  local recipe
  recipe="$(sha256sum <"$BENCH_ROOT/scripts/gen_data.c" | cut -c1-16) $kind $size"
  if [ -f "$out" ] && [ -f "$out.recipe" ] && [ "$(cat "$out.recipe")" = "$recipe" ]; then
    return 0
  fi
  mkdir -p "$(dirname "$out")"
  bench_log "generating $out ($kind, $size)"
  "$BENCH_GEN" "$kind" "$size" "$out.tmp" || return 1
  mv "$out.tmp" "$out"
  printf '%s\n' "$recipe" >"$out.recipe"
}

bench_now() { date +%s.%N; }

bench_rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", (s > 0 ? b / s / 1e6 : 0) }'; }

bench_ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    if (a == "" || b == "" || a == "-" || b == "-" || b + 0 == 0) print "-";
    else printf "%.2f", a / b }'
}

bench_drop_caches() {
  sync
  if ! echo 3 >/proc/sys/vm/drop_caches 2>/dev/null; then
    bench_log "warning: cannot drop the page cache (not root?): results are not cold"
    return 1
  fi
}

bench_mounted() { mountpoint -q "$1" 2>/dev/null; }

bench_wait_mount() {
  local dir=$1 secs=${2:-5} i
  for ((i = 0; i < secs * 50; i++)); do
    bench_mounted "$dir" && return 0
    sleep 0.02
  done
  bench_log "error: $dir did not get mounted"
  return 1
}

bench_umount() {
  local dir=$1 i
  bench_mounted "$dir" || return 0
  for ((i = 0; i < 250; i++)); do
    fusermount3 -u "$dir" 2>/dev/null || umount "$dir" 2>/dev/null || true
    bench_mounted "$dir" || return 0
    sleep 0.02
  done
  bench_log "warning: $dir still busy, detaching it lazily"
  fusermount3 -uz "$dir" 2>/dev/null || umount -l "$dir" 2>/dev/null || true
}

bench_hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# CPU time (user + system, seconds) PID has used so far.
bench_cpu_secs() {
  local st
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  st=${st##*) } # fields after the command name (which may hold spaces)
  awk -v t="$(getconf CLK_TCK)" '{ printf "%.3f", ($12 + $13) / t }' <<<"$st"
}

BENCH_EXIT_CMDS=()
bench_run_exit() {
  local i
  for ((i = ${#BENCH_EXIT_CMDS[@]} - 1; i >= 0; i--)); do eval "${BENCH_EXIT_CMDS[i]}" || true; done
}
bench_on_exit() {
  BENCH_EXIT_CMDS+=("$1")
  trap bench_run_exit EXIT
  trap 'exit 130' INT TERM
}
