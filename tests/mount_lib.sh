# mount_lib.sh - helpers of the b2fs mount tests (sourced by t_mount.sh and
# t_mount_write.sh): start a foreground daemon, unmount it and check that
# it exited cleanly with no sanitizer report in its log.
#
# The caller sets TMP (a scratch directory) and B2FS; PIDS and LOGS map a
# mount point to its daemon and log.  ok/nok print the test lines.

declare -A PIDS=() LOGS=()

# mount_test_start NAME: the tools of a mount test (B2FS, B2F, PY, T) and
# its scratch directory TMP (removed at exit, every daemon unmounted); or
# "skip NAME" and exit when b2fs, b2f or FUSE are missing.
mount_test_start() {
  B2FS=${B2FS:-$PWD/build/san/b2fs}
  B2F=${B2F:-$PWD/build/san/b2f}
  PY=${PY:-/usr/bin/python3}
  T="timeout -s KILL 300"
  if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then echo "skip $1: b2fs or b2f not built"; exit 0; fi
  if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "skip $1: no /dev/fuse or fusermount3"; exit 0
  fi
  TMP=$(mktemp -d "/tmp/b2fs-t_$1.XXXXXX")
  trap 'unmount_all; rm -rf "$TMP"' EXIT
}
ok() { echo "ok $1"; }
nok() { echo "not ok $1: $2"; }
skip() { echo "skip $1${2:+: $2}"; }

# starts_like_frame FILE: does FILE (a directory: its chunks.b2frame)
# start like a frame (b2_frame_starts_like: bytes 0-1 9e|9d a8, or bytes
# 2-9 "b2frame\0")?  What does not is shown as the plain entry it is.
starts_like_frame() {
  local f=$1 h
  [ -d "$f" ] && f=$f/chunks.b2frame
  h=$(head -c 10 "$f" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  [[ "$h" == 9[de]a8* ]] || [ "${h:4:16}" = 62326672616d6500 ]
}

# mount_bg NAME SOURCE MOUNTPOINT OPTIONS: start a foreground daemon.
mount_bg() {
  local name=$1 src=$2 mnt=$3 opts=$4
  LOGS[$mnt]=$TMP/$name.log
  "$B2FS" "$src" "$mnt" -f -o "$opts" 2>"${LOGS[$mnt]}" &
  PIDS[$mnt]=$!
  for _ in $(seq 300); do
    if mountpoint -q "$mnt"; then return 0; fi
    kill -0 "${PIDS[$mnt]}" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

# sanitizer_clean NAME LOGFILE...: no ASan/UBSan/LSan report in the logs.
sanitizer_clean() {
  local name=$1; shift
  local hits
  hits=$(cat "$@" 2>/dev/null | grep -m1 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:|SUMMARY: (Address|Undefined)')
  if [ -n "$hits" ]; then nok "$name" "sanitizer report: $hits"; else ok "$name"; fi
}

# unmount_fg MOUNTPOINT NAME: unmount, wait for the daemon, check its log.
unmount_fg() {
  local mnt=$1 name=$2 pid=${PIDS[$1]:-}
  [ -n "$pid" ] || return 0
  local i
  for i in $(seq 50); do
    fusermount3 -u "$mnt" 2>/dev/null && break
    sleep 0.1
  done
  mountpoint -q "$mnt" && fusermount3 -uz "$mnt" 2>/dev/null
  local rc=0
  for i in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"; nok "${name}_exit" "daemon still running 60 s after unmount"
  else
    wait "$pid"; rc=$?
    if [ "$rc" -eq 0 ]; then ok "${name}_exit"; else nok "${name}_exit" "daemon exited with $rc"; fi
  fi
  sanitizer_clean "${name}_sanitizers" "${LOGS[$mnt]}"
  unset "PIDS[$mnt]"
}

# unmount_all: for an EXIT trap.
unmount_all() {
  local m
  for m in "${!PIDS[@]}"; do unmount_fg "$m" "cleanup_$(basename "$m")"; done
}

# tsan_daemon NAME: the ThreadSanitizer daemon (B2FS_TSAN, or build/tsan/b2fs
# made here) as the executable $TMP/b2fs-tsan, run without ASLR where the
# kernel maps memory where TSan does not expect it; its path in TSAN_BIN.
# Prints "skip NAME: why" and returns 1 when there is none.
tsan_daemon() {
  TSAN_BIN=${B2FS_TSAN:-}
  if [ -z "$TSAN_BIN" ] && make -s build/tsan/b2fs >/dev/null 2>&1; then
    TSAN_BIN=$PWD/build/tsan/b2fs
  fi
  if [ -z "$TSAN_BIN" ] || [ ! -x "$TSAN_BIN" ]; then
    echo "skip $1: cannot build the ThreadSanitizer daemon (make build/tsan/b2fs)"; return 1
  fi
  local run=""
  if ! "$TSAN_BIN" --version >/dev/null 2>&1; then
    if setarch "$(uname -m)" -R "$TSAN_BIN" --version >/dev/null 2>&1; then
      run="setarch $(uname -m) -R"
    else
      echo "skip $1: the ThreadSanitizer daemon does not start: $("$TSAN_BIN" --version 2>&1 | head -c 200)"
      return 1
    fi
  fi
  # exec: the daemon's pid is the wrapper's
  printf '#!/bin/sh\nexec %s "%s" "$@"\n' "$run" "$TSAN_BIN" >"$TMP/b2fs-tsan"
  chmod +x "$TMP/b2fs-tsan"
}

# tsan_clean NAME FILE...: no ThreadSanitizer warning in the files (its
# reports, the daemon's log); the first ones shown on stderr otherwise.
tsan_clean() {
  local name=$1 n; shift
  n=$(cat "$@" 2>/dev/null | grep -c 'WARNING: ThreadSanitizer')
  if [ "$n" -eq 0 ]; then ok "$name"; else
    nok "$name" "$n ThreadSanitizer warnings"
    cat "$@" 2>/dev/null | grep -A14 'WARNING: ThreadSanitizer' | grep -E 'WARNING|#[0-3] ' |
      head -40 | sed 's/^/  | /' >&2
  fi
}
