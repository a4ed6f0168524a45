#!/usr/bin/env bash
# fault_build.sh - build the fault-injection flavour of the library (the
# sanitizer flags plus -DB2_FAULT_INJECTION, which arms the test hooks of
# src/common/fileio.c) and the unit tests that use it, into build/fault/.
# Never a production build.  Usage, from the repository root:
#   bash tests/fault_build.sh [test_NAME...]   (default: test_fwrite)
#   ./build/fault/tests/test_fwrite
# The Makefile equivalent is one more flavour line:
#   $(eval $(call flavour,build/fault,$(SAN) -DB2_FAULT_INJECTION))
# and `make build/fault/tests/test_fwrite`.
set -eu
cd "$(dirname "$0")/.."
PKGS="fuse3 liblz4 libzstd zlib"
CC=${CC:-cc}
BASE="-std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Isrc $(pkg-config --cflags $PKGS) -pthread"
WARN="-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wvla"
SAN="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined"
FLAGS="$BASE $WARN $SAN -DB2_FAULT_INJECTION"
AVX2=""
[ "$(uname -m)" = x86_64 ] && AVX2="-mavx2"
out=build/fault
mkdir -p "$out/obj" "$out/tests"
objs=()
for src in src/common/*.c src/codec/*.c src/chunk/*.c src/frame/*.c \
           src/b2nd/*.c src/cache/*.c src/file/*.c; do
  [ -f "$src" ] || continue
  obj="$out/obj/${src%.c}.o"
  mkdir -p "$(dirname "$obj")"
  extra=""
  case "$src" in *_avx2.c) extra=$AVX2 ;; esac
  if [ ! -f "$obj" ] || [ "$src" -nt "$obj" ] ||
     [ -n "$(find include src -name '*.h' -newer "$obj" -print -quit)" ]; then
    $CC $FLAGS $extra -c "$src" -o "$obj"
  fi
  objs+=("$obj")
done
rm -f "$out/libb2fs.a"
ar rcs "$out/libb2fs.a" "${objs[@]}"
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(test_fwrite)
for t in "${tests[@]}"; do
  $CC $FLAGS -c "tests/unit/$t.c" -o "$out/obj/$t.o"
  $CC $SAN -pthread -o "$out/tests/$t" "$out/obj/$t.o" "$out/libb2fs.a" \
    $(pkg-config --libs $PKGS)
done
echo "built: ${tests[*]/#/$out/tests/}"
