#!/usr/bin/env bash
# t_fuzz.sh - a short run of every fuzz target (libFuzzer) when clang is
# present: builds them and runs each for FUZZ_SECONDS (default 10).
set -u
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.."
if ! command -v clang >/dev/null 2>&1; then skip fuzz "clang is not installed"; exit 0; fi
bins=()
for src in tests/fuzz/fuzz_*.c; do bins+=("build/fuzz/$(basename "$src" .c)"); done
if ! make -s "${bins[@]}" >build/fuzz-build.log 2>&1; then
  notok "fuzz build" "$(tail -5 build/fuzz-build.log)"; exit 0
fi
bash tests/fuzz/run.sh "${FUZZ_SECONDS:-10}" "${bins[@]}"
