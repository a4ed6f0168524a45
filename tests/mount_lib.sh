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
