#!/usr/bin/env bash
# t_fuzz_regress.sh - replay every input a fuzzer ever found a problem with
# (tests/fuzz/regress/NAME/) and the kept corpus (tests/fuzz/corpus/NAME/)
# through the fuzz target NAME built without libFuzzer: the target's .c and
# tests/fuzz/replay_main.c, compiled by $CC with ASan+UBSan against
# build/san/libb2fs.a (no clang needed).  One line per target and input set:
# "ok fuzz-regress NAME: N inputs" or "not ok ...: the input and the error".
set -u
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
out=build/san/fuzz-replay
mkdir -p "$out"
if [ ! -f build/san/libb2fs.a ] && ! make -s build/san/libb2fs.a >"$out/lib.log" 2>&1; then
  notok "fuzz-regress build" "$(tail -3 "$out/lib.log")"; exit 0
fi
libs=$(make -s print-libs) # as the library was built (libzfp or not)
flags="-std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -O1 -g -fno-omit-frame-pointer
       -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla
       -fsanitize=address,undefined -fno-sanitize-recover=undefined -Iinclude -Isrc -I."

for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c); name=${name#fuzz_}
  sets=()
  for kind in regress corpus; do
    d=tests/fuzz/$kind/$name
    [ -d "$d" ] && [ -n "$(ls -A "$d")" ] && sets+=("$kind")
  done
  [ ${#sets[@]} -eq 0 ] && continue
  bin=$out/replay_$name
  # shellcheck disable=SC2086
  if ! ${CC:-cc} $flags -o "$bin" "$src" tests/fuzz/replay_main.c \
       build/san/libb2fs.a $libs -pthread >"$out/$name.build.log" 2>&1; then
    notok "fuzz-regress $name build" "$(head -3 "$out/$name.build.log")"; continue
  fi
  for kind in "${sets[@]}"; do
    d=tests/fuzz/$kind/$name
    n=$(find "$d" -maxdepth 1 -type f | wc -l)
    log=$out/$name-$kind.log
    if "$bin" "$d" >"$log" 2>&1; then
      ok "fuzz-regress $name $kind: $n inputs"
    else
      last=$(grep '^replaying ' "$log" | tail -1 | cut -d' ' -f2)
      why=$(grep -m1 -E 'ERROR: AddressSanitizer|runtime error|SUMMARY|not ok' "$log")
      notok "fuzz-regress $name $kind" "${last:-?}: ${why:-crashed} ($log)"
    fi
  done
done
