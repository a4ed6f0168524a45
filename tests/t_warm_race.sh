#!/usr/bin/env bash
# t_warm_race.sh - frames read in a directory's order (two tar, a cat and
# a slow reader holding each file open, in a loop) while they are replaced
# behind the mount (renamed over, as writers of frames do), under
# ThreadSanitizer:
# the daemon warms them ahead and hands the small ones to the page cache
# from its warming thread (fuse/warm.c, b2fs_handle_store_ahead).
#
# tests/warm_race.py is the oracle: every file read is one version of it
# or the start of one (the kernel may keep the old size for the attribute
# timeout), never bytes of two; once the replacing stops, every file reads
# as its last version.  Then, stopped by SIGTERM while a reader goes on:
# the daemon exits 0 (its warming thread stopped before the device is
# closed), says it handed frames over ahead, and TSan reports nothing.
#
# Env: B2F, PY (set by tests/run.sh), B2FS_TSAN, B2FS_RACE_SECONDS (6),
# B2FS_RACE_SEED.
set -u
cd "$(dirname "$0")/.."
. tests/mount_lib.sh
mount_test_start warm_race
tsan_daemon warm_race || exit 0
SECS=${B2FS_RACE_SECONDS:-6}
SEED=${B2FS_RACE_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "  seed $SEED (B2FS_RACE_SEED replays the choices), $SECS s, daemon $TSAN_BIN"

S=$TMP/src M=$TMP/mnt
mkdir -p "$S/d" "$M" "$TMP/scratch"
if ! TSAN_OPTIONS="halt_on_error=0 log_path=$TMP/race.tsan" \
     B2FS="$TMP/b2fs-tsan" mount_bg warm_race "$S" "$M" "cache_size=16M"; then
  nok warm_race_mount "did not mount: $(head -c 300 "${LOGS[$M]}")"; exit 0
fi
$T "$PY" tests/warm_race.py "$B2F" "$S/d" "$M/d" "$TMP/scratch" "$SECS" "$SEED" ||
  nok warm_race_run "warm_race.py failed (seed $SEED)"
# Stopped by a signal while a reader goes on in order (the warming thread
# busy handing frames over): a clean exit, nothing written to the device
# after it is closed.
( while ls "$M/d" >/dev/null 2>&1 && cat "$M"/d/f* >/dev/null 2>&1; do :; done ) &
reader=$!
sleep 1
kill -TERM "${PIDS[$M]}"
unmount_fg "$M" warm_race
wait "$reader"
n=$(sed -n 's/.* \([0-9][0-9]*\) of them handed to the page cache.*/\1/p' "${LOGS[$M]}" | tail -1)
if [ "${n:-0}" -gt 0 ]; then ok warm_race_handed; else
  nok warm_race_handed "the daemon handed no frame over ahead: $(tail -c 300 "${LOGS[$M]}")"; fi
tsan_clean warm_race_tsan "$TMP"/race.tsan* "${LOGS[$M]}"
