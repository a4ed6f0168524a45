#!/usr/bin/env bash
# t_cli_fixtures.sh - b2f against every reference fixture: `cat` hashes to
# the manifest's sha256, `cat --c-order` to corder_sha256, `cat --npy` loads
# in NumPy with the manifest's shape and dtype; `info --json` parses; bad/
# files give one clear line on stderr and a non-zero status.
set -u
. "$(dirname "$0")/lib.sh"
if ! have_fixtures; then skip cli_fixtures "no fixtures at $B2FS_FIXTURES"; exit 0; fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

while IFS=$'\t' read -r path nbytes nchunks sum shape dtype csum; do
  f="$B2FS_FIXTURES/$path"
  got=$("$B2F" cat "$f" 2>"$tmp/err" | sha)
  check "cat $path" [ "$got" = "$sum" ]
  [ -s "$tmp/err" ] && sed 's/^/  /' "$tmp/err" >&2
  if "$B2F" info --json "$f" >"$tmp/info.json" 2>"$tmp/err" &&
     "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["nbytes"]==int(sys.argv[2]) and d["nchunks"]==int(sys.argv[3]) else 1)' \
       "$tmp/info.json" "$nbytes" "$nchunks"; then
    ok "info $path"
  else
    notok "info $path" "$(head -c 300 "$tmp/err")"
  fi
  [ "$shape" = "-" ] && continue
  got=$("$B2F" cat --c-order "$f" | sha)
  check "cat --c-order $path" [ "$got" = "$csum" ]
  if have_numpy; then
    "$B2F" cat --npy "$f" >"$tmp/a.npy"
    if "$PY" - "$tmp/a.npy" "$shape" "$dtype" <<'PY'
import sys, numpy
a = numpy.load(sys.argv[1])
shape = tuple(int(x) for x in sys.argv[2].split("x"))
want = numpy.dtype(eval(sys.argv[3])) if sys.argv[3].startswith("[") else numpy.dtype(sys.argv[3])
sys.exit(0 if a.shape == shape and a.dtype == want else 1)
PY
    then ok "npy load $path"; else notok "npy load $path"; fi
  else
    skip "npy load $path" "no numpy at $PY"
  fi
done < <(manifest_lines "$B2FS_FIXTURES/manifest.tsv")

while IFS=$'\t' read -r path nbytes nchunks sum; do
  got=$("$B2F" cat "$B2FS_FIXTURES/$path" | sha)
  check "cat $path" [ "$got" = "$sum" ]
done < <(manifest_lines "$B2FS_FIXTURES/legacy/manifest.tsv")

# Damaged files: refused or partly read, with one line naming the file.
for f in "$B2FS_FIXTURES"/bad/*; do
  name=bad/$(basename "$f")
  "$B2F" verify -q "$f" >/dev/null 2>"$tmp/err"; rc=$?
  lines=$(wc -l <"$tmp/err")
  if [ $rc -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "^b2f: $f: " "$tmp/err"; then
    ok "verify refuses $name"
  elif [ $rc -eq 0 ] && [ "$lines" -eq 0 ]; then
    ok "verify $name (bit flip decodes without error)"   # the format has no checksums
  else
    notok "verify $name" "status $rc, stderr: $(head -c 300 "$tmp/err")"
  fi
  "$B2F" cat "$f" >/dev/null 2>"$tmp/err"; rc=$?
  if [ $rc -le 1 ] && [ "$(wc -l <"$tmp/err")" -le 1 ]; then ok "cat $name"; else notok "cat $name" "status $rc"; fi
done
