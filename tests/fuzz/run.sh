#!/usr/bin/env bash
# run.sh SECONDS BIN... - run each libFuzzer target for SECONDS on a corpus
# seeded from the fixtures and the kept corpus tests/fuzz/corpus/NAME.
# Prints "ok fuzz NAME" or "not ok fuzz NAME" (a crash leaves its input in
# build/fuzz/crash-NAME-*).
set -u
cd "$(dirname "$0")/../.."
secs=$1; shift
fix="${B2FS_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
status=0
for bin in "$@"; do
  name=$(basename "$bin"); name=${name#fuzz_}
  work=build/fuzz/corpus-$name
  mkdir -p "$work" "tests/fuzz/corpus/$name"
  if [ -d "$fix" ]; then
    case $name in
      chunk) find "$fix/chunks" -name '*.cdata' -size -2M -exec cp -n {} "$work/" \; ;;
      frame) find "$fix" -type f -name '*.b2*' -size -2M -exec cp -n {} "$work/" \; ;;
      b2nd)  ;;
    esac
  fi
  cp -n tests/fuzz/corpus/"$name"/* "$work/" 2>/dev/null
  if "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=1048576 \
      -artifact_prefix="build/fuzz/crash-$name-" "$work" >"build/fuzz/$name.log" 2>&1; then
    echo "ok fuzz $name ($(grep -o 'cov: [0-9]*' "build/fuzz/$name.log" | tail -1))"
  else
    echo "not ok fuzz $name: see build/fuzz/$name.log"; status=1
  fi
done
exit $status
