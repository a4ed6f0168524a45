# lib.sh - helpers for the shell tests (sourced).  Each test prints
# "ok NAME", "not ok NAME: why" or "skip NAME: why".
: "${B2FS_FIXTURES:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/shared/fixtures}"
: "${B2F:=build/san/b2f}" "${B2FS:=build/san/b2fs}" "${PY:=/usr/bin/python3}"

ok()    { echo "ok $1"; }
notok() { echo "not ok $1${2:+: $2}"; }
skip()  { echo "skip $1${2:+: $2}"; }
# check NAME COND...: run the condition, report ok / not ok.
check() { local n=$1; shift; if "$@"; then ok "$n"; else notok "$n"; fi; }

have_fixtures() { [ -f "$B2FS_FIXTURES/manifest.tsv" ]; }
have_numpy()    { [ -x "$PY" ] && "$PY" -c 'import numpy' 2>/dev/null; }
# python-blosc2 and NumPy from PyPI in build/venv (scripts/setup-venv); the
# tests that need them say skip where the venv could not be made.
: "${PYB2:=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/build/venv/bin/python}"
have_pyb2()     { [ -x "$PYB2" ] && "$PYB2" -c 'import blosc2, numpy' 2>/dev/null; }

# manifest_lines FILE: the data lines of a manifest (no comments).
manifest_lines() { grep -v '^#' "$1" | grep -v '^$'; }

sha() { sha256sum | cut -d' ' -f1; }
