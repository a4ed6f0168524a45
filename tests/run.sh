#!/usr/bin/env bash
# run.sh - run every test and print "N passed, N failed" last.
#
# Unit tests: build/san/tests/* (and build/tsan/tests/* for threaded code).
# Integration tests: tests/t_*.sh, run with B2F, B2FS and FIXTURES set.
# Each test prints lines "ok NAME", "not ok NAME[: why]" or "skip NAME".
set -u
cd "$(dirname "$0")/.."
export B2FS_FIXTURES="${B2FS_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
export B2F="$PWD/build/san/b2f" B2FS="$PWD/build/san/b2fs"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export PY=/usr/bin/python3
only="${1:-}"

pass=0 fail=0 skip=0
failed_names=()
run_one() { # name command...
  local name=$1; shift
  local out rc
  out=$("$@" 2> >(sed "s|^|  [$name] |" >&2))
  rc=$?
  local p f s
  p=$(grep -c '^ok ' <<<"$out")
  f=$(grep -c '^not ok ' <<<"$out")
  s=$(grep -c '^skip ' <<<"$out")
  grep -E '^(not ok|skip) ' <<<"$out" | sed "s|^|[$name] |"
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
    echo "[$name] not ok: exited with status $rc"
    f=1
  fi
  pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
  [ "$f" -gt 0 ] && failed_names+=("$name")
  echo "[$name] $p passed, $f failed, $s skipped"
}

for t in build/san/tests/* build/tsan/tests/* build/fault/tests/*; do
  [ -x "$t" ] || continue
  case "$t" in *"$only"*) ;; *) continue ;; esac
  run_one "${t#build/}" "$t"
done
for t in tests/t_*.sh; do
  [ -f "$t" ] || continue
  case "$t" in *"$only"*) ;; *) continue ;; esac
  run_one "$(basename "$t" .sh)" bash "$t"
done

[ ${#failed_names[@]} -gt 0 ] && echo "failing: ${failed_names[*]}"
[ "$skip" -gt 0 ] && echo "$skip skipped (inputs absent)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
