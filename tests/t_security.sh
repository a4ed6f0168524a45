#!/usr/bin/env bash
# t_security.sh - the mount never reaches outside SOURCE and enforces
# permissions, checked as an unprivileged user (b2fsuser: created, and
# removed again, when absent) on a mount made by root with allow_other.
#
#   - Symbolic links in SOURCE (relative ones escaping it, absolute ones,
#     to a directory outside, named like a frame, as the index of a sparse
#     frame) are shown as links with their text and never followed by the
#     daemon: a user opening one follows it in his own namespace with his
#     own rights (the kernel's job).  (A sparse frame whose chunk file is a
#     symlink out of SOURCE is checked by t_mount.sh.)
#   - ".." is resolved by the kernel, never sent to the daemon; names with
#     "/" or NUL cannot come through the kernel at all (tests/fuzz covers
#     the name mapping); names over 255 bytes are refused; the engine's
#     temporary names (.NAME.b2tmp, chunks.b2frame.tmp) are invisible and
#     cannot be created or renamed to.
#   - default_permissions: the user cannot read others' 0600 files (plain,
#     frame, attribute values), write into a root 0755 directory or into
#     others' files, chmod/chown/touch them; his own new files are his.
#   - A user swapping a directory of his for a symlink while creating files
#     in it must not make the root daemon create anything outside SOURCE.
#   - -o no_default_permissions: the kernel no longer checks; the daemon
#     (root) must then not give users root's rights over SOURCE.
#
# Env: B2FS, B2F (set by tests/run.sh), PY; B2FS_SECURITY_RACE_SECONDS
# (default 5) bounds the directory-swap race.
set -u
cd "$(dirname "$0")/.."
B2FS=${B2FS:-$PWD/build/san/b2fs}
B2F=${B2F:-$PWD/build/san/b2f}
PY=${PY:-/usr/bin/python3}
RACE=${B2FS_SECURITY_RACE_SECONDS:-5}
T="timeout -s KILL 120"
U=b2fsuser

if [ "$(id -u)" != 0 ]; then echo "skip security: needs root (a user to test as, allow_other)"; exit 0; fi
if [ ! -x "$B2FS" ] || [ ! -x "$B2F" ]; then echo "skip security: b2fs or b2f is not built"; exit 0; fi
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
  echo "skip security: no /dev/fuse or fusermount3"; exit 0
fi

created_user=0
if ! id -u "$U" >/dev/null 2>&1; then
  if ! useradd -M -s /usr/sbin/nologin "$U" 2>/dev/null; then echo "skip security: cannot create user $U"; exit 0; fi
  created_user=1
fi
UID_U=$(id -u "$U") GID_U=$(id -g "$U")
# as_user CMD...: run as the unprivileged user (no supplementary groups).
if command -v runuser >/dev/null; then AS=(runuser -u "$U" --)
else AS=(setpriv --reuid="$UID_U" --regid="$GID_U" --clear-groups --); fi
as_user() { "${AS[@]}" "$@"; }

TMP=$(mktemp -d /tmp/b2fs-t_security.XXXXXX)
chmod 755 "$TMP" # the user must reach the mount point
. tests/mount_lib.sh
cleanup() {
  unmount_all
  rm -rf "$TMP"
  [ "$created_user" = 1 ] && userdel "$U" 2>/dev/null
}
trap cleanup EXIT
# check NAME WHY COND...: ok when the command succeeds.
check() { local n=$1 why=$2; shift 2; if "$@"; then ok "$n"; else nok "$n" "$why"; fi; }
# fails CMD...: the user's command fails (any reason); denied: EACCES/EPERM.
fails() { ! as_user "$@" >/dev/null 2>&1; }
denied() {
  local err
  err=$(as_user "$@" 2>&1 >/dev/null) && return 1
  [[ "$err" == *"ermission denied"* || "$err" == *"ot permitted"* ]] || { echo "  ($* -> $err)"; return 1; }
}

# ---- SOURCE ------------------------------------------------------------------
S=$TMP/src M=$TMP/mnt O=$TMP/outside
mkdir -p "$S" "$M" "$O"
head -c 300000 /dev/urandom | od -An -tx1 >"$TMP/data.txt"
"$B2F" pack "$TMP/data.txt" "$S/secretframe.b2frame" >/dev/null
"$B2F" pack "$TMP/data.txt" "$S/pubframe.b2frame" >/dev/null
"$B2F" pack "$TMP/data.txt" "$O/real.b2frame" >/dev/null
echo outside >"$O/outside.txt"
echo TOPSECRET >"$S/secret.txt"
chmod 600 "$S/secret.txt" "$S/secretframe.b2frame"
echo public >"$S/pub.txt"
mkdir "$S/rootdir" "$S/home"
echo rootfile >"$S/rootdir/file.txt"
: >"$S/rootdir/.tmpf.b2tmp"
: >"$S/rootdir/chunks.b2frame.tmp"
chown "$UID_U:$GID_U" "$S/home"
up=$(printf '../%.0s' $(seq 12))
ln -s "${up}etc/passwd" "$S/relup"
ln -s /etc/shadow "$S/abs"
ln -s "$O" "$S/dirout"
ln -s "$O/real.b2frame" "$S/evil.b2frame"
ln -s /etc/shadow "$S/evil2.b2frame"
mkdir "$S/spx.b2frame"
ln -s "$O/real.b2frame" "$S/spx.b2frame/chunks.b2frame"
# What must not change: every root entry (owner, mode, content).
snapshot() {
  (cd "$S" && find . -path ./home -prune -o -print0 | sort -z |
     xargs -0 stat -c '%n %u %g %a %s %Y' && find . -path ./home -prune -o -type f -print0 |
     sort -z | xargs -0 sha256sum) 2>&1
  (cd "$O" && find . -print0 | sort -z | xargs -0 stat -c '%n %u %a %s')
}
snapshot >"$TMP/before"

if ! mount_bg security "$S" "$M" "allow_other,timeout=0"; then
  nok security_mount "daemon did not mount: $(head -c 300 "${LOGS[$M]}")"; exit 0
fi

# ---- symbolic links ------------------------------------------------------------
links_ok=1
for l in "relup:${up}etc/passwd" "abs:/etc/shadow" "dirout:$O" "evil.b2frame:$O/real.b2frame" \
         "evil2.b2frame:/etc/shadow"; do
  n=${l%%:*} want=${l#*:}
  if [ "$(as_user stat -c %F "$M/$n" 2>&1)" != "symbolic link" ] || [ "$(as_user readlink "$M/$n")" != "$want" ]; then
    links_ok=0; echo "  $n: $(as_user stat -c %F "$M/$n" 2>&1) -> $(as_user readlink "$M/$n" 2>&1)"
  fi
done
check sec_symlinks_shown "links not shown as links with their text" test $links_ok = 1
# A link named like a frame is no frame: no short name, and opening it
# follows the link (in the user's namespace) to the raw, compressed bytes.
raw=$(sha256sum <"$O/real.b2frame" | cut -c1-64)
got=$(as_user cat "$M/evil.b2frame" 2>/dev/null | sha256sum | cut -c1-64)
check sec_frame_named_symlink_not_opened "short name shown or content decoded (got $got)" \
  test ! -e "$M/evil" -a ! -L "$M/evil" -a "$got" = "$raw"
check sec_symlink_to_root_only_file_denied "the user read /etc/shadow through a link" \
  denied cat "$M/evil2.b2frame"
check sec_symlink_to_root_only_file_denied_abs "the user read /etc/shadow through a link" \
  denied cat "$M/abs"
# A link to a directory outside: the kernel follows it to the real
# directory (raw names), the daemon serves nothing there.
listed=$(as_user ls "$M/dirout/" 2>&1 | tr '\n' ' ')
check sec_symlinked_dir_not_served "listed '$listed'" \
  test "$listed" = "outside.txt real.b2frame " -a ! -e "$M/dirout/real"
check sec_symlinked_sparse_index "spx.b2frame: $(stat -c %F "$M/spx.b2frame" 2>&1)" \
  test "$(as_user stat -c %F "$M/spx.b2frame")" = directory -a ! -e "$M/spx"

# ---- names -----------------------------------------------------------------------
check sec_dotdot_is_the_kernels "$M/.. or $M/rootdir/.. resolved elsewhere" \
  test "$(as_user stat -c %d:%i "$M/..")" = "$(stat -c %d:%i "$TMP")" -a \
       "$(as_user stat -c %d:%i "$M/rootdir/..")" = "$(stat -c %d:%i "$M")"
l300=$(printf 'a%.0s' $(seq 300)) l255=$(printf 'c%.0s' $(seq 255))
err=$(as_user touch "$M/home/$l300" 2>&1)
as_user touch "$M/home/$l255"
# 255 bytes: too long for NAME.b2frame, so kept as a plain file.
check sec_long_names "300 bytes: touch said '${err: -30}'; 255 bytes: source holds names of $(ls "$S/home" | awk '{printf "%d ", length($0)}')bytes" \
  eval '[[ "$err" == *"too long"* ]] && fails stat "$M/home/$l300" && [ -f "$S/home/$l255" ] &&
        [ "$(as_user ls "$M/home")" = "$l255" ]'
as_user rm -f "$M/home/$l255"
shown=$(as_user ls -A "$M/rootdir" | tr '\n' ' ')
check sec_hidden_names_invisible "rootdir lists '$shown'" \
  eval 'test "$shown" = "file.txt " && fails stat "$M/rootdir/.tmpf.b2tmp" && fails stat "$M/rootdir/chunks.b2frame.tmp"'
check sec_hidden_names_not_created "a hidden name was created: $(ls -A "$S/home" | tr '\n' ' ')" \
  eval 'fails mkdir "$M/home/chunks.b2frame.tmp" && fails ln -s x "$M/home/.q.b2tmp" &&
        fails mkdir "$M/home/.d.b2tmp" && [ -z "$(ls -A "$S/home")" ]'
# Renaming a link or a directory (entries kept as they are) to a hidden
# name would make it vanish from the mount.
as_user mkdir "$M/home/dd"; as_user ln -s /etc/passwd "$M/home/lnk"
as_user mv "$M/home/dd" "$M/home/.dd.b2tmp" 2>/dev/null
as_user mv "$M/home/lnk" "$M/home/chunks.b2frame.tmp" 2>/dev/null
check sec_hidden_names_not_renamed_to "renamed to hidden names: source home holds $(ls -A "$S/home" | tr '\n' ' ')" \
  test -z "$(ls -A "$S/home" | grep -E '^(\.dd\.b2tmp|chunks\.b2frame\.tmp)$')"
rm -rf "$S/home/.dd.b2tmp" "$S/home/chunks.b2frame.tmp" "$S/home/dd" "$S/home/lnk"

# ---- permissions (default_permissions) -------------------------------------------
check sec_perm_read_others_0600 "the user read a root 0600 file" \
  eval 'denied cat "$M/secret.txt" && denied cat "$M/secretframe" && denied getfattr -n user.b2.codec "$M/secretframe"'
check sec_perm_write_root_dir "the user changed a root 0755 directory" \
  eval 'denied touch "$M/rootdir/new" && denied mkdir "$M/rootdir/d" && denied rm "$M/rootdir/file.txt" &&
        denied mv "$M/rootdir/file.txt" "$M/home/f" && denied ln -s x "$M/rootdir/l" && denied mv "$M/pubframe" "$M/home/p"'
check sec_perm_write_root_files "the user wrote a root 0644 file" \
  eval 'denied sh -c "echo x >>\"$M/pubframe\"" && denied truncate -s 0 "$M/pub.txt" && denied truncate -s 0 "$M/pubframe" &&
        denied setfattr -n user.b2.vlmeta.x -v y "$M/pubframe" && denied setfattr -n user.x -v y "$M/pub.txt"'
check sec_perm_chmod_chown_others "the user changed the owner, mode or times of a root file" \
  eval 'denied chmod 666 "$M/pub.txt" && denied chmod 666 "$M/pubframe" && denied chown "$U" "$M/pub.txt" &&
        denied chown "$U" "$M/pubframe" && denied touch -d 2001-01-01 "$M/pub.txt" && denied chgrp "$GID_U" "$M/pubframe"'
as_user sh -c "umask 022; echo mine >'$M/home/mine'"
as_user chmod 640 "$M/home/mine"
check sec_own_files "new file: $(stat -c '%U %a' "$S/home/mine.b2frame" 2>&1)" \
  test "$(stat -c '%u %a' "$S/home/mine.b2frame" 2>&1)" = "$UID_U 640" -a "$(as_user cat "$M/home/mine")" = mine

# ---- a directory swapped for a symlink while files are created in it ---------------
# The daemon hands the engine paths (text): if they are resolved again
# after the user has replaced a directory on the way by a symlink, root
# works wherever that link points.  The user holds a descriptor of his
# directory D (so his calls reach D whatever its name) while another
# process keeps renaming D between two names, the other one a symlink to
# the root-only directory O.  One process creates new files in D, one
# creates, writes and removes D/victim while O holds a root frame
# victim.b2frame: nothing may appear in O and victim.b2frame must keep
# its content.
cat >"$TMP/race.py" <<'EOF'
import os, sys, time, multiprocessing as mp
d, target, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
a, b = os.path.join(d, "sub"), os.path.join(d, "sub2")
os.makedirs(a, exist_ok=True)
os.symlink(target, b)
dfd = os.open(a, os.O_RDONLY | os.O_DIRECTORY)
def swapper():
    end = time.time() + secs
    names = [a, b]; cur = 0  # names[cur] is D, the other name the link
    while time.time() < end:
        o = 1 - cur
        try:
            os.unlink(names[o]); os.rename(names[cur], names[o]); os.symlink(target, names[cur])
            cur = o
        except OSError:
            pass
def creator(k):
    end = time.time() + secs; i = 0
    while time.time() < end:
        i += 1
        name = "victim" if k == 0 else "x%d_%d" % (k, i)
        try:
            fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644, dir_fd=dfd)
            os.write(fd, b"PWNED " * 1000); os.close(fd)
        except OSError:
            pass
        if k == 0:
            try: os.unlink(name, dir_fd=dfd)
            except OSError: pass
ps = [mp.Process(target=swapper)] + [mp.Process(target=creator, args=(k,)) for k in range(2)]
for p in ps: p.start()
for p in ps: p.join()
EOF
chmod 644 "$TMP/race.py"
if [ -x "$PY" ]; then
  echo "root data" >"$TMP/victim.txt"
  "$B2F" pack "$TMP/victim.txt" "$O/victim.b2frame" >/dev/null
  vsha=$(sha256sum <"$O/victim.b2frame")
  "${AS[@]}" env HOME="$TMP" "$PY" "$TMP/race.py" "$M/home" "$O" "$RACE" >"$TMP/race.out" 2>&1 &
  rpid=$!
  for _ in $(seq $(( (RACE + 30) * 10 ))); do kill -0 $rpid 2>/dev/null || break; sleep 0.1; done
  if kill -0 $rpid 2>/dev/null; then
    # Stuck in the daemon: show where, then kill it so that the calls return.
    dpid=${PIDS[$M]}
    nok sec_race_no_deadlock "the race's calls are stuck $((RACE + 30)) s after it started; daemon threads:"
    timeout 60 gdb -batch -p "$dpid" -ex 'thread apply all bt' 2>/dev/null |
      grep -E '^#[0-9]+ .* in (b2fs_|op_|b2_)' | head -12 | sed 's/^/  | /' >&2
    kill -9 "$dpid"
    wait $rpid 2>/dev/null
  else
    wait $rpid
    ok sec_race_no_deadlock
  fi
  n=$(find "$S/home" -type f | wc -l)
  escaped=$(cd "$O" && ls | grep -v -x -e outside.txt -e real.b2frame -e victim.b2frame | head -3 | tr '\n' ' ')
  check sec_no_create_outside_swapped_dir "root created files outside SOURCE, in $O: $escaped($n files created in SOURCE)" \
    test -z "$escaped"
  what=$("$B2F" cat "$O/victim.b2frame" 2>&1 | head -c 24)
  check sec_no_write_outside_swapped_dir "the root frame $O/victim.b2frame was written through the mount: now '$what'" \
    test "$(sha256sum <"$O/victim.b2frame")" = "$vsha"
  rm -rf "$S/home/sub" "$S/home/sub2" "$S/home/.b2fs-gone-"*
  [ -d "$O" ] && (cd "$O" && ls | grep -v -x -e outside.txt -e real.b2frame | xargs -r rm -f)
else
  echo "skip sec_no_escape_swapped_dir: no python3"
fi

snapshot >"$TMP/after"
check sec_source_unchanged "$(diff "$TMP/before" "$TMP/after" | head -5 | tr '\n' ' ')" \
  cmp -s "$TMP/before" "$TMP/after"
unmount_fg "$M" security

# ---- -o no_default_permissions ----------------------------------------------------
# The kernel no longer checks modes; the daemon runs as root, so unless it
# acts with each caller's identity every user of the mount has root's
# rights over SOURCE.
S2=$TMP/src2 M2=$TMP/mnt2
mkdir -p "$S2/rootdir" "$M2"
echo TOPSECRET >"$S2/secret.txt"; chmod 600 "$S2/secret.txt"
echo public >"$S2/pub.txt"
if mount_bg nodefperm "$S2" "$M2" "allow_other,timeout=0,no_default_permissions"; then
  r_read=$(as_user cat "$M2/secret.txt" 2>&1)
  as_user chmod 666 "$M2/pub.txt" 2>/dev/null
  as_user touch "$M2/rootdir/new" 2>/dev/null
  st=$(stat -c %a "$S2/pub.txt"); made=$(ls "$S2/rootdir" | tr '\n' ' ')
  echo "  no_default_permissions: user reads a root 0600 file: '${r_read:0:40}'; chmod of a root file: mode now $st; new file in a root dir: '${made}'"
  check sec_nodefperm_no_root_rights "with no_default_permissions a user acts as root on SOURCE" \
    test "$r_read" != TOPSECRET -a "$st" = 644 -a -z "$made"
  unmount_fg "$M2" nodefperm
else
  nok nodefperm_mount "daemon did not mount: $(head -c 300 "${LOGS[$M2]}")"
fi
exit 0
