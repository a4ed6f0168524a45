#!/usr/bin/env bash
# run.sh SECONDS BIN... - run each libFuzzer target for SECONDS, one after
# the other, and print per target "ok fuzz NAME: duration, execs, exec/s,
# coverage" or "not ok fuzz NAME: ..." (a finding; its input is left in
# build/fuzz/crash-NAME-*, and the exit status is 1).
#
# Each target starts from a work corpus build/fuzz/corpus-NAME holding the
# seeds taken from the fixtures (seeds.c: frames, sparse directories, lone
# chunks, b2nd metalayers, directory listings; npy_seeds.py: .npy headers
# NumPy writes), the kept corpus tests/fuzz/corpus/NAME and the regression
# inputs tests/fuzz/regress/NAME.
#
# FUZZ_KEEP=1: afterwards, merge the work corpus (inputs <= 16 KiB) into a
# fresh minimal corpus that replaces tests/fuzz/corpus/NAME (keep_corpus).
# SECONDS "keep": no fuzzing, only that merge of the existing work corpora.
# FUZZ_NICE (default 19): the niceness of the fuzzers.
set -u
cd "$(dirname "$0")/../.."
secs=$1; shift
fix="${B2FS_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
py="${PY:-/usr/bin/python3}"
status=0
mkdir -p build/fuzz

# keep_corpus BIN NAME: merge the work corpus's inputs of at most 16 KiB
# into a fresh corpus (every feature); when that exceeds 512 KiB, merge
# again on edges only.  The result replaces tests/fuzz/corpus/NAME.
keep_corpus() {
  local bin=$1 name=$2 small=build/fuzz/small-$2 fresh=build/fuzz/fresh-$2 opt
  rm -rf "$small"; mkdir -p "$small"
  find "build/fuzz/corpus-$name" -maxdepth 1 -type f -size -16385c -exec cp {} "$small/" \;
  for opt in -use_counters=1 -use_counters=0; do
    rm -rf "$fresh"; mkdir -p "$fresh"
    if ! "$bin" -merge=1 "$opt" -rss_limit_mb=2048 -timeout=10 "$fresh" "$small" \
        >"build/fuzz/$name-merge.log" 2>&1; then
      echo "# merge of $name failed: build/fuzz/$name-merge.log"; return
    fi
    [ "$(du -sk --apparent-size "$fresh" | cut -f1)" -le 512 ] && break
  done
  rm -rf "tests/fuzz/corpus/$name"; mkdir -p "tests/fuzz/corpus/$name"
  cp "$fresh"/* "tests/fuzz/corpus/$name/" 2>/dev/null
  echo "# kept corpus $name ($opt): $(ls "tests/fuzz/corpus/$name" | wc -l) files," \
       "$(du -sk --apparent-size "tests/fuzz/corpus/$name" | cut -f1) KiB"
}

if [ "$secs" = keep ]; then
  for bin in "$@"; do n=$(basename "$bin"); keep_corpus "$bin" "${n#fuzz_}"; done
  exit 0
fi

# Seeds from the fixtures (regenerated on every run: cheap).
seeds=build/fuzz/seeds-out
rm -rf "$seeds"; mkdir -p "$seeds"
if [ -d "$fix" ]; then
  if make -s build/san/libb2fs.a >build/fuzz/seeds-build.log 2>&1 &&
     ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -g -fsanitize=address,undefined -Iinclude -Isrc \
       -o build/fuzz/seeds tests/fuzz/seeds.c build/san/libb2fs.a \
       $(make -s print-libs) -pthread >>build/fuzz/seeds-build.log 2>&1; then
    ./build/fuzz/seeds "$fix" "$seeds" || echo "# seeds: the seed writer failed"
  else
    echo "# seeds: cannot build the seed writer (build/fuzz/seeds-build.log)"
  fi
else
  echo "# seeds: no fixtures at $fix, kept corpus only"
fi
[ -x "$py" ] && "$py" tests/fuzz/npy_seeds.py "$seeds" >/dev/null

for bin in "$@"; do
  name=$(basename "$bin"); name=${name#fuzz_}
  work=build/fuzz/corpus-$name
  log=build/fuzz/$name.log
  mkdir -p "$work"
  for src in "$seeds/$name" "tests/fuzz/corpus/$name" "tests/fuzz/regress/$name"; do
    [ -d "$src" ] && find "$src" -maxdepth 1 -type f -exec cp -n {} "$work/" \;
  done
  rm -f build/fuzz/crash-"$name"-* build/fuzz/timeout-"$name"-* build/fuzz/oom-"$name"-*
  start=$(date +%s)
  nice -n "${FUZZ_NICE:-19}" "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
    -max_len=1048576 -print_final_stats=1 -artifact_prefix="build/fuzz/crash-$name-" \
    "$work" >"$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -ao 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  files=$(find "$work" -maxdepth 1 -type f | wc -l)
  summary="${took} s, ${execs:-?} execs, ${rate:-?} exec/s, cov ${cov:-?}, ft ${ft:-?}, corpus $files"
  if [ "$rc" -eq 0 ]; then
    echo "ok fuzz $name: $summary"
  else
    art=$(ls build/fuzz/crash-"$name"-* 2>/dev/null | head -1)
    why=$(grep -a -m1 -E 'ERROR: (AddressSanitizer|libFuzzer|LeakSanitizer)|runtime error|SUMMARY' "$log")
    echo "not ok fuzz $name: ${why:-exit $rc} (${art:-no artifact}; $log) after $summary"
    status=1
  fi
  if [ "${FUZZ_KEEP:-0}" = 1 ] && [ "$rc" -eq 0 ]; then
    keep_corpus "$bin" "$name"
  fi
done
exit $status
