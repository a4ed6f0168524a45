#!/usr/bin/python3
"""posix_check.py DIR - POSIX conformance checks of the namespace calls in DIR.

Run as root with umask 0 on a directory where root may do anything (a
plain directory, a bindfs mount of one, a b2fs mount with
allow_other,default_permissions).  Each check prints "ok NAME" or
"not ok NAME: why"; t_posix.sh runs it on a plain directory, on bindfs and
on b2fs and compares.  Calls made as another user (nobody) run in a forked
child that drops its groups and sets its ids.

Regular files created here are frames on b2fs (NAME.b2frame in SOURCE):
every check on a "file" checks a frame there.
"""
import ctypes
import errno
import os
import shutil
import stat
import sys
import time

ROOT = sys.argv[1]
ONLY = sys.argv[2] if len(sys.argv) > 2 else ""
NOBODY = 65534
NOGROUP = 65534
results = []
_seq = [0]


def emit(name, ok, why=""):
    print(("ok %s" % name) if ok else ("not ok %s: %s" % (name, why)), flush=True)


def fresh(mode=0o777):
    """A new empty directory for one check."""
    _seq[0] += 1
    d = os.path.join(ROOT, "c%03d" % _seq[0])
    os.mkdir(d)
    os.chmod(d, mode)
    return d


def err(fn, *a, **k):
    """errno of a call, 0 when it succeeds."""
    try:
        r = fn(*a, **k)
        if isinstance(r, int) and fn in (os.open,):
            os.close(r)
        return 0
    except OSError as e:
        return e.errno


def ename(e):
    return errno.errorcode.get(e, str(e)) if e else "success"


def as_user(fn, uid=NOBODY, gid=NOGROUP):
    """Run fn() as uid:gid in a child; its errno (0: success)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            fn()
        except OSError as e:
            code = e.errno or 255
        except BaseException:
            code = 254
        os.write(w, str(code).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        b = os.read(r, 64)
        if not b:
            break
        data += b
    os.close(r)
    os.waitpid(pid, 0)
    return int(data or b"253")


def create(path, mode=0o666, data=b""):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    if data:
        os.write(fd, data)
    os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read()


def write_at(path, data, flags=os.O_WRONLY, off=0):
    fd = os.open(path, flags)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)


def lst(path):
    return os.lstat(path)


def later():
    """Let the clock move past the last change."""
    time.sleep(0.02)


CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


class Fail(Exception):
    pass


def want_errno(name, got, want):
    """Record that a call gave errno `want` (one of a tuple)."""
    wants = want if isinstance(want, tuple) else (want,)
    emit(name, got in wants, "got %s, want %s" % (ename(got), "/".join(ename(w) for w in wants)))


def want(name, cond, why):
    emit(name, bool(cond), why)


# ---- cause 4: modes exactly as asked (umask 0) ------------------------------

@check
def modes():
    d = fresh()

    def made(name, m, fn, *a):
        """Entry `name` made by fn(path, *a) must have mode m exactly."""
        p = os.path.join(d, name)
        e = err(fn, p, *a)
        got = stat.S_IMODE(lst(p).st_mode) if not e else -1
        want("mode_%s" % name, got == m, "%s: mode %o, want %o (%s)" % (name, got, m, ename(e)))

    for m in (0o777, 0o1777, 0o750, 0o700):
        made("mkdir_%o" % m, m, os.mkdir, m)
    for m in (0o666, 0o644, 0o600):
        made("mkfifo_%o" % m, m, os.mkfifo, m)
        made("mknod_fifo_%o" % m, m, os.mknod, m | stat.S_IFIFO)
    for m in (0o777, 0o666, 0o640):
        made("creat_%o" % m, m, create, m)
        made("mknod_reg_%o" % m, m, os.mknod, m | stat.S_IFREG)
    # a plain file: a frame suffix taken, so the new file keeps its name
    made("creat_777.txt", 0o777, create, 0o777)


# ---- cause 3: components over NAME_MAX ---------------------------------------

@check
def name_max():
    d = fresh()
    long = os.path.join(d, "x" * 256)
    ok255 = os.path.join(d, "y" * 255)
    e = err(create, ok255)
    want("namemax_255_creat", e == 0, "a 255-byte name: %s" % ename(e))
    want("namemax_255_stat", err(os.stat, ok255) == 0, "stat of a 255-byte name failed")
    want_errno("namemax_256_stat", err(os.stat, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_lstat", err(os.lstat, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_chmod", err(os.chmod, long, 0o644), errno.ENAMETOOLONG)
    want_errno("namemax_256_unlink", err(os.unlink, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_rmdir", err(os.rmdir, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_truncate", err(os.truncate, long, 0), errno.ENAMETOOLONG)
    want_errno("namemax_256_creat", err(create, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_mkdir", err(os.mkdir, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_rename_from", err(os.rename, long, ok255), errno.ENAMETOOLONG)
    want_errno("namemax_256_rename_to", err(os.rename, ok255, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_link", err(os.link, ok255, long), errno.ENAMETOOLONG)
    want_errno("namemax_256_symlink", err(os.symlink, "t", long), errno.ENAMETOOLONG)
    want_errno("namemax_256_open", err(os.open, long, os.O_RDONLY), errno.ENAMETOOLONG)
    want_errno("namemax_256_dir_component", err(os.stat, os.path.join(long, "a")),
               errno.ENAMETOOLONG)


# Names near NAME_MAX: b2fs stores a file NAME as NAME.b2frame and derives
# hidden temporaries from that (shortened when too long); a name a frame
# suffix does not fit after is stored plain, or, ending in a frame suffix
# itself, under a shorter frame suffix.
LONG = (234, 236, 240, 241, 244, 247, 248, 250, 252, 255)


@check
def long_names():
    d = fresh()
    for n in LONG:
        p = os.path.join(d, "a" * n)
        e = err(create, p, 0o644, b"data %d" % n)
        want("longname_create_%d" % n, e == 0 and read(p) == b"data %d" % n, ename(e))
        e = err(os.truncate, p, 0)
        want("longname_truncate_%d" % n, e == 0 and os.stat(p).st_size == 0, ename(e))
        e = err(write_at, p, b"again", os.O_WRONLY | os.O_APPEND)
        want("longname_append_%d" % n, e == 0 and read(p) == b"again", ename(e))
        # moved there from a short name, then emptied and written
        s, q = os.path.join(d, "short"), os.path.join(d, "b" * n)
        create(s, 0o644, b"moved %d" % n)
        e = err(os.rename, s, q)
        want("longname_rename_%d" % n, e == 0 and read(q) == b"moved %d" % n, ename(e))
        if e:  # (a copy where rename(2) cannot keep the file: mv's way)
            shutil.move(s, q)
        e = err(os.truncate, q, 0)
        want("longname_renamed_truncate_%d" % n, e == 0 and os.stat(q).st_size == 0, ename(e))
        e = err(write_at, q, b"x" * 100, os.O_WRONLY)
        want("longname_renamed_write_%d" % n, e == 0 and read(q) == b"x" * 100, ename(e))
        r = os.path.join(d, "c" * (n - 8) + ".b2frame")
        e = err(create, r, 0o644, b"suffixed")
        want("longname_frame_suffix_%d" % n, e == 0 and read(r) == b"suffixed", ename(e))
    names = sorted(os.listdir(d))
    wanted = sorted([c * n for n in LONG for c in "ab"] +
                     ["c" * (n - 8) + ".b2frame" for n in LONG if os.path.exists(
                         os.path.join(d, "c" * (n - 8) + ".b2frame"))])
    want("longname_listing", names == wanted, "%s" % [x[:3] + "..%d" % len(x) for x in names])


# ---- cause 2: paths near PATH_MAX ----------------------------------------------

def open_renamed_rewrite(p, move, data):
    """Create p, open it for writing, move it (move()), then empty it, sync,
    write data and sync through the open descriptor."""
    create(p, 0o644, b"first")
    fd = os.open(p, os.O_RDWR)
    try:
        move()
        os.ftruncate(fd, 0)
        os.fsync(fd)
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)

@check
def path_max():
    d = fresh()
    cwd = os.getcwd()
    os.chdir(d)
    try:
        # Directories of 250-byte names up to a relative path of 4095 bytes.
        comps = []
        total = 0
        while total + 251 + 40 < 4095:
            n = ("%03d" % len(comps)) + "d" * 247
            os.mkdir(n)
            os.chdir(n)
            comps.append(n)
            total += 251
        os.chdir(d)
        rel = "/".join(comps)
        last = "f" * (4095 - len(rel) - 1)
        path = rel + "/" + last
        e = err(create, path, 0o644, b"deep")
        want("pathmax_creat_4095", e == 0 and len(path) == 4095,
             "creat of a %d-byte relative path: %s" % (len(path), ename(e)))
        if e == 0:
            want("pathmax_read_4095", read(path) == b"deep", "content differs")
            e = err(write_at, path, b"DEEP")
            want("pathmax_write_4095", e == 0 and read(path) == b"DEEP",
                 "write: %s" % ename(e))
            e = err(os.chmod, path, 0o600)
            want("pathmax_chmod_4095", e == 0 and stat.S_IMODE(os.stat(path).st_mode) == 0o600,
                 "chmod: %s" % ename(e))
            # emptied and written again (an empty frame's commit rewrites it)
            e = err(os.truncate, path, 0)
            if not e:
                e = err(write_at, path, b"again", os.O_WRONLY)
            want("pathmax_rewrite_4095", e == 0 and read(path) == b"again",
                 "truncate and write: %s" % ename(e))
            l2 = rel + "/" + "l" * len(last)
            e = err(os.link, path, l2)
            want("pathmax_link_4095", e == 0 and read(l2) == b"again", "link: %s%s" % (
                ename(e), "" if e == 0 else "; the directory holds %s" % sorted(
                    n[:12] + "..." for n in os.listdir(rel))))
            if not e:
                os.unlink(l2)
            p2 = rel + "/" + "g" * len(last)
            e = err(os.rename, path, p2)
            want("pathmax_rename_4095", e == 0 and read(p2) == b"again", "rename: %s" % ename(e))
            e = err(os.unlink, p2)
            want("pathmax_unlink_4095", e == 0, "unlink: %s" % ename(e))
        # Open for writing, renamed, then emptied (an empty frame's commit
        # rewrites it by name) and written again through the descriptor:
        # the rewrite must land at the new name.
        p3 = rel + "/" + "k" * len(last)
        p4 = rel + "/" + "m" * len(last)
        e = err(open_renamed_rewrite, p3, lambda: os.rename(p3, p4), b"second")
        want("pathmax_rename_open_4095",
             e == 0 and read(p4) == b"second" and not os.path.lexists(p3),
             "%s; at the new name: %r" % (ename(e), err(read, p4) or read(p4)))
        err(os.unlink, p4)
        # The same with its directory renamed (the last one of the path).
        d1 = comps[-1]
        d2 = d1[:3] + "e" * (len(d1) - 3)
        q1 = "/".join(comps[:-1] + [d1]) + "/" + "n" * len(last)
        q2 = "/".join(comps[:-1] + [d2]) + "/" + "n" * len(last)
        parent = "/".join(comps[:-1])
        e = err(open_renamed_rewrite, q1,
                lambda: os.rename(os.path.join(parent, d1), os.path.join(parent, d2)), b"third")
        want("pathmax_dir_rename_open_4095", e == 0 and read(q2) == b"third",
             "%s" % ename(e))
        err(os.unlink, q2)
        err(os.rename, os.path.join(parent, d2), os.path.join(parent, d1))
        dp = rel + "/" + "h" * (4095 - len(rel) - 1)
        e = err(os.mkdir, dp, 0o755)
        want("pathmax_mkdir_4095", e == 0, "mkdir: %s" % ename(e))
        if e == 0:
            want("pathmax_rmdir_4095", err(os.rmdir, dp) == 0, "rmdir failed")
        e = err(create, rel + "/" + "i" * (4096 - len(rel) - 1))
        want_errno("pathmax_4096_creat", e, errno.ENAMETOOLONG)
    finally:
        os.chdir(cwd)


# ---- cause 5: writes by another user clear set-user-ID / set-group-ID ---------

def suid_case(name, mode, flags, want_mode, trunc=False, group=0):
    d = fresh(0o755)
    p = os.path.join(d, "f")
    create(p, 0o644, b"0123456789")
    os.chown(p, 0, group)
    os.chmod(p, mode)
    if trunc:
        e = as_user(lambda: os.truncate(p, 3))
    else:
        e = as_user(lambda: write_at(p, b"ab", flags))
    got = stat.S_IMODE(os.stat(p).st_mode)
    want(name, e == 0 and got == want_mode,
         "mode %o after the other user's %s: %o (%s), want %o" %
         (mode, "truncate" if trunc else "write", got, ename(e), want_mode))


@check
def suid():
    suid_case("suid_write_wronly", 0o4777, os.O_WRONLY, 0o777)
    suid_case("suid_write_rdwr", 0o4777, os.O_RDWR, 0o777)
    suid_case("sgid_xgrp_write_wronly", 0o2777, os.O_WRONLY, 0o777)
    suid_case("sgid_xgrp_write_rdwr", 0o2777, os.O_RDWR, 0o777)
    suid_case("suid_sgid_write_wronly", 0o6777, os.O_WRONLY, 0o777)
    # without group execute, set-group-ID stays for a writer of the group
    suid_case("sgid_noxgrp_write_kept", 0o2766, os.O_WRONLY, 0o2766, group=NOGROUP)
    suid_case("suid_truncate", 0o4777, 0, 0o777, trunc=True)
    # root (CAP_FSETID) keeps them
    d = fresh(0o755)
    p = os.path.join(d, "f")
    create(p, 0o644, b"0123456789")
    os.chmod(p, 0o4755)
    write_at(p, b"zz")
    got = stat.S_IMODE(os.stat(p).st_mode)
    want("suid_write_by_root_kept", got == 0o4755, "mode %o after root's write" % got)


# ---- cause 1: hard links of regular files -------------------------------------

@check
def links():
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    create(a, 0o644, b"hello")
    later()
    c0 = lst(a).st_ctime_ns
    dm0 = lst(d).st_mtime_ns
    e = err(os.link, a, b)
    want("link_file", e == 0, "link: %s" % ename(e))
    if e:
        return
    sa, sb = lst(a), lst(b)
    want("link_nlink", sa.st_nlink == 2 and sb.st_nlink == 2,
         "st_nlink %d/%d" % (sa.st_nlink, sb.st_nlink))
    want("link_same_ino", sa.st_ino == sb.st_ino, "different inodes")
    want("link_ctime", sa.st_ctime_ns > c0, "ctime not updated by link")
    want("link_parent_mtime", lst(d).st_mtime_ns > dm0, "parent mtime not updated by link")
    want("link_read", read(b) == b"hello", "content through the second name")
    write_at(b, b"HELLO world", os.O_WRONLY)
    want("link_write_shared", read(a) == b"HELLO world", "a write through b not seen through a")
    big = os.urandom(300000)
    with open(a, "wb") as f:  # a rewrite through a (truncate + write)
        f.write(big)
    want("link_rewrite_shared", read(b) == big, "a rewrite through a not seen through b")
    want("link_size", lst(b).st_size == len(big), "size through b %d" % lst(b).st_size)
    later()
    c1 = lst(b).st_ctime_ns
    os.unlink(a)
    sb = lst(b)
    want("unlink_link_nlink", sb.st_nlink == 1, "st_nlink %d after unlink" % sb.st_nlink)
    want("unlink_link_ctime", sb.st_ctime_ns > c1, "ctime not updated by unlink of a link")
    want("unlink_link_content", read(b) == big, "content lost with the other name")
    # rename onto a hard link of the same file does nothing
    c = os.path.join(d, "c")
    os.link(b, c)
    e = err(os.rename, b, c)
    want("rename_onto_own_link", e == 0 and os.path.exists(b) and os.path.exists(c),
         "rename b c (same inode): %s, b %s, c %s" % (ename(e), os.path.exists(b),
                                                       os.path.exists(c)))
    # rename of another file over a link
    x = os.path.join(d, "x")
    create(x, 0o644, b"other")
    os.rename(x, c)
    want("rename_over_link", read(c) == b"other" and read(b) == big and lst(b).st_nlink == 1,
         "b nlink %d" % lst(b).st_nlink)
    # links across directories
    d2 = fresh()
    e = err(os.link, b, os.path.join(d2, "b2"))
    want("link_other_dir", e == 0 and read(os.path.join(d2, "b2")) == big, ename(e))


@check
def symlink_links():
    """A hard link of a symbolic link: its times set through the other
    name once the first one is gone."""
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    os.symlink("nowhere", a)
    e = err(os.link, a, b, follow_symlinks=False)
    want("symlink_link", e == 0 and lst(b).st_nlink == 2, "link: %s" % ename(e))
    if e:
        return
    os.unlink(a)
    ns = (1234567890123456789, 1334567890123456789)
    e = err(os.utime, b, ns=ns, follow_symlinks=False)
    st = lst(b)
    want("symlink_link_times", e == 0 and (st.st_atime_ns, st.st_mtime_ns) == ns,
         "utime: %s, times %d %d" % (ename(e), st.st_atime_ns, st.st_mtime_ns))


@check
def removed_open():
    """A file open when its name goes: st_nlink 0, its directory removable
    while it is open and right after its close, its data still there."""
    d = fresh()
    sub = os.path.join(d, "s")
    bad_rmdir = []
    for i in range(12):
        os.mkdir(sub)
        f = os.path.join(sub, "f")
        fd = os.open(f, os.O_RDWR | os.O_CREAT, 0o644)
        data = os.urandom(150000) if i % 2 else b"x" * 150000
        os.write(fd, data)
        os.unlink(f)
        if i == 0:
            st = os.fstat(fd)
            want("removed_open_nlink", st.st_nlink == 0 and st.st_size == len(data),
                 "fstat after unlink: st_nlink %d, size %d" % (st.st_nlink, st.st_size))
        if i % 3 == 0:  # the directory goes while the file is open
            e = err(os.rmdir, sub)
            if e:
                bad_rmdir.append("open %d: %s" % (i, ename(e)))
            os.pwrite(fd, b"y" * 1000, 5)
            got = os.pread(fd, len(data), 0)
            os.close(fd)
            if got != data[:5] + b"y" * 1000 + data[1005:]:
                bad_rmdir.append("open %d: data read back differs" % i)
            if e:
                os.rmdir(sub)
            continue
        os.close(fd)
        e = err(os.rmdir, sub)  # right after the close
        if e:
            bad_rmdir.append("closed %d: %s" % (i, ename(e)))
            time.sleep(0.5)
            os.rmdir(sub)
    want("removed_open_rmdir", not bad_rmdir, "; ".join(bad_rmdir))
    want("removed_open_nothing_left", os.listdir(d) == [], "left: %s" % os.listdir(d))


@check
def link_kinds():
    d = fresh()
    d2 = fresh()
    b = os.path.join(d, "b")
    create(b, 0o644, b"b")
    os.mkfifo(os.path.join(d, "fifo"), 0o644)
    want_errno("linkk_fifo", err(os.link, os.path.join(d, "fifo"), os.path.join(d, "fifo2")), 0)
    os.symlink("target", os.path.join(d, "sl"))
    e = err(os.link, os.path.join(d, "sl"), os.path.join(d, "sl2"), follow_symlinks=False)
    want_errno("linkk_symlink", e, 0)
    want_errno("linkk_dir", err(os.link, d2, os.path.join(d, "dl")), errno.EPERM)
    want_errno("linkk_exists", err(os.link, b, os.path.join(d, "fifo")), errno.EEXIST)
    want_errno("linkk_enoent", err(os.link, os.path.join(d, "nope"), os.path.join(d, "n2")),
               errno.ENOENT)
    want_errno("linkk_enotdir", err(os.link, b, os.path.join(b, "n2")), errno.ENOTDIR)


@check
def link_survives_many_writes():
    """Many writes and closes (commits, compactions) keep both names one file."""
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    create(a, 0o644, os.urandom(200000))
    if err(os.link, a, b):
        emit("link_many_rewrites", False, "link failed")
        return
    data = bytearray(read(a))
    for i in range(30):
        chunk = os.urandom(50000)
        off = (i * 37777) % 200000
        name = a if i % 2 else b
        write_at(name, chunk, os.O_WRONLY, off)
        data[off:off + len(chunk)] = chunk
    ra, rb = read(a), read(b)
    want("link_many_rewrites", ra == bytes(data) and rb == bytes(data) and
         lst(a).st_ino == lst(b).st_ino and lst(a).st_nlink == 2,
         "names differ or lost data (nlink %d)" % lst(a).st_nlink)


@check
def user_xattrs():
    """A regular file's own user.* attributes: set, read, listed, kept
    through a rewrite of its content and through a rename, removed."""
    d = fresh()
    a = os.path.join(d, "x")
    create(a, 0o644, b"some content\n" * 1000)
    try:
        os.setxattr(a, "user.tag", b"one")
    except OSError as ex:
        emit("xattr_user_set", False, ename(ex.errno))
        return
    os.setxattr(a, "user.empty", b"")
    want("xattr_user_get", os.getxattr(a, "user.tag") == b"one" and
         os.getxattr(a, "user.empty") == b"", "values differ")
    want("xattr_user_list", {"user.tag", "user.empty"} <= set(os.listxattr(a)),
         "listed %s" % sorted(os.listxattr(a)))
    want_errno("xattr_user_create_exists",
               err(os.setxattr, a, "user.tag", b"two", os.XATTR_CREATE), errno.EEXIST)
    want_errno("xattr_user_replace_absent",
               err(os.setxattr, a, "user.nope", b"two", os.XATTR_REPLACE), errno.ENODATA)
    with open(a, "wb") as f:  # O_TRUNC and new content
        f.write(os.urandom(300000))
    b = os.path.join(d, "y")
    os.rename(a, b)
    want("xattr_user_kept", os.getxattr(b, "user.tag") == b"one", "lost with the rewrite or rename")
    os.removexattr(b, "user.tag")
    want_errno("xattr_user_removed", err(os.getxattr, b, "user.tag"), errno.ENODATA)


@check
def link_other_name_after_unlink():
    """A linked file whose name last looked up is removed is written at once
    through its other name, in another directory (fsstress found b2fs
    failing this open with EIO until the kernel looked the name up again)."""
    d = fresh()
    d2 = os.path.join(d, "sub")
    os.mkdir(d2)
    a, b = os.path.join(d, "a"), os.path.join(d2, "b")
    create(a, 0o644, b"first\n")
    if err(os.link, a, b):
        emit("link_other_name_write", False, "link failed")
        return
    time.sleep(1.2)  # past the mount's entry timeout: both names looked up again
    lst(b)
    lst(a)  # the name the file was last found under
    os.unlink(a)
    e = err(write_at, b, b"second\n", os.O_WRONLY | os.O_APPEND)
    want_errno("link_other_name_write", e, 0)
    want("link_other_name_content", read(b) == b"first\nsecond\n" and lst(b).st_nlink == 1,
         "%r, nlink %d" % (read(b), lst(b).st_nlink))


@check
def link_while_removed_name_written():
    """A file open for writing whose name (the one it was opened by) is
    removed while another name stays takes new links meanwhile (b2fs
    refused them with EEXIST until the writer closed: a kill -9 campaign's
    find)."""
    d = fresh()
    f, x, y = (os.path.join(d, n) for n in ("f", "x", "y"))
    create(f, 0o644, os.urandom(100000))
    os.link(f, x)
    fd = os.open(x, os.O_RDWR)
    try:
        os.pwrite(fd, b"abc", 0)
        os.unlink(x)
        e = err(os.link, f, y)
    finally:
        os.close(fd)
    want_errno("link_while_removed_name_written", e, 0)
    want("link_while_removed_name_same", os.path.exists(y) and read(y) == read(f) and
         read(y)[:3] == b"abc", "y %s" % os.path.exists(y))


@check
def link_writer_removed():
    """A writer open under one name of a linked file whose name is then
    removed keeps writing the file the other name shows, through rewrites
    (emptied and refilled: on b2fs an empty frame's commit writes the file
    anew; with compaction at close, that too)."""
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    create(a, 0o644, os.urandom(300000))
    if err(os.link, a, b):
        emit("link_writer_removed", False, "link failed")
        return
    fd = os.open(b, os.O_RDWR)
    try:
        os.unlink(b)
        want("link_writer_removed_nlink", lst(a).st_nlink == 1,
             "st_nlink %d after unlink" % lst(a).st_nlink)
        e = 0
        try:
            os.ftruncate(fd, 0)
            os.fsync(fd)
            want("link_writer_removed_emptied", lst(a).st_size == 0, "size %d" % lst(a).st_size)
            data = os.urandom(120000)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
            last = os.urandom(40000)
            os.pwrite(fd, last, 0)
        except OSError as ex:
            e = ex.errno
        want_errno("link_writer_removed_rewrite", e, 0)
    finally:
        os.close(fd)
    if e == 0:
        want("link_writer_removed_content", read(a) == last + data[40000:],
             "content through the other name")
    want("link_writer_removed_names", sorted(os.listdir(d)) == ["a"] and lst(a).st_nlink == 1,
         "%s, nlink %d" % (sorted(os.listdir(d)), lst(a).st_nlink))
    # the same with the writer's name replaced by a rename
    c = os.path.join(d, "c")
    os.link(a, b)
    create(c, 0o644, b"other")
    fd = os.open(b, os.O_RDWR)
    e = 0
    try:
        os.rename(c, b)
        os.ftruncate(fd, 0)
        os.fsync(fd)
        data = os.urandom(70000)
        os.pwrite(fd, data, 0)
    except OSError as ex:
        e = ex.errno
    finally:
        try:
            os.close(fd)
        except OSError as ex:
            e = e or ex.errno
    want_errno("link_writer_replaced_rewrite", e, 0)
    want("link_writer_replaced_content", e == 0 and read(a) == data and read(b) == b"other" and
         lst(a).st_nlink == 1 and sorted(os.listdir(d)) == ["a", "b"],
         "content or names (nlink %d, %s)" % (lst(a).st_nlink, sorted(os.listdir(d))))


# ---- error cases of each call --------------------------------------------------

@check
def errors():
    d = fresh()
    f = os.path.join(d, "f")
    create(f, 0o644, b"x")
    sub = os.path.join(d, "sub")
    os.mkdir(sub, 0o755)
    full = os.path.join(d, "full")
    os.mkdir(full, 0o755)
    create(os.path.join(full, "in"), 0o644)
    nope = os.path.join(d, "nope")
    # ENOENT
    want_errno("enoent_stat", err(os.stat, nope), errno.ENOENT)
    want_errno("enoent_unlink", err(os.unlink, nope), errno.ENOENT)
    want_errno("enoent_rmdir", err(os.rmdir, nope), errno.ENOENT)
    want_errno("enoent_rename", err(os.rename, nope, os.path.join(d, "n2")), errno.ENOENT)
    want_errno("enoent_chmod", err(os.chmod, nope, 0o644), errno.ENOENT)
    want_errno("enoent_open", err(os.open, nope, os.O_RDONLY), errno.ENOENT)
    want_errno("enoent_creat_in_missing_dir", err(create, os.path.join(nope, "x")), errno.ENOENT)
    want_errno("enoent_mkdir_in_missing_dir", err(os.mkdir, os.path.join(nope, "x")),
               errno.ENOENT)
    # ENOTDIR
    want_errno("enotdir_stat", err(os.stat, os.path.join(f, "x")), errno.ENOTDIR)
    want_errno("enotdir_creat", err(create, os.path.join(f, "x")), errno.ENOTDIR)
    want_errno("enotdir_mkdir", err(os.mkdir, os.path.join(f, "x")), errno.ENOTDIR)
    want_errno("enotdir_rmdir_file", err(os.rmdir, f), errno.ENOTDIR)
    want_errno("enotdir_rename_dir_over_file", err(os.rename, sub, f), errno.ENOTDIR)
    want_errno("enotdir_open_directory_flag", err(os.open, f, os.O_RDONLY | os.O_DIRECTORY),
               errno.ENOTDIR)
    # EISDIR
    want_errno("eisdir_unlink_dir", err(os.unlink, sub), errno.EISDIR)
    want_errno("eisdir_open_write", err(os.open, sub, os.O_WRONLY), errno.EISDIR)
    want_errno("eisdir_rename_file_over_dir", err(os.rename, f, sub), errno.EISDIR)
    # EEXIST
    want_errno("eexist_mkdir", err(os.mkdir, sub), errno.EEXIST)
    want_errno("eexist_mkdir_over_file", err(os.mkdir, f), errno.EEXIST)
    want_errno("eexist_creat_excl", err(create, f), errno.EEXIST)
    want_errno("eexist_symlink", err(os.symlink, "t", f), errno.EEXIST)
    want_errno("eexist_mkfifo", err(os.mkfifo, f), errno.EEXIST)
    # ENOTEMPTY
    want_errno("enotempty_rmdir", err(os.rmdir, full), (errno.ENOTEMPTY, errno.EEXIST))
    want_errno("enotempty_rename_over", err(os.rename, sub, full),
               (errno.ENOTEMPTY, errno.EEXIST))
    # EINVAL: a directory into itself
    want_errno("einval_rename_into_self", err(os.rename, sub, os.path.join(sub, "x")),
               errno.EINVAL)
    # ELOOP
    os.symlink("loop2", os.path.join(d, "loop1"))
    os.symlink("loop1", os.path.join(d, "loop2"))
    want_errno("eloop_stat", err(os.stat, os.path.join(d, "loop1")), errno.ELOOP)
    want_errno("eloop_open", err(os.open, os.path.join(d, "loop1"), os.O_RDONLY), errno.ELOOP)
    want_errno("eloop_nofollow", err(os.open, os.path.join(d, "loop1"),
                                     os.O_RDONLY | os.O_NOFOLLOW), errno.ELOOP)
    # EXDEV: a rename out of the mount
    # (on a plain directory both succeed where /tmp is the same file system)
    out = "/tmp/b2fs-posix-exdev-%d" % os.getpid()
    want_errno("exdev_link_out", err(os.link, f, out), errno.EXDEV)
    want_errno("exdev_rename_out", err(os.rename, f, out), errno.EXDEV)
    for p in (out, ):
        if os.path.lexists(p):
            os.unlink(p)
    # rmdir of a non-empty directory leaves it
    want("rmdir_left", os.path.isdir(full), "a failed rmdir removed the directory")
    want_errno("rmdir_dot", err(os.rmdir, os.path.join(sub, ".")), errno.EINVAL)


@check
def permissions():
    d = fresh(0o755)  # root's, not writable by others
    f = os.path.join(d, "f")
    create(f, 0o644, b"x")
    want_errno("eacces_creat", as_user(lambda: create(os.path.join(d, "u"))), errno.EACCES)
    want_errno("eacces_mkdir", as_user(lambda: os.mkdir(os.path.join(d, "u"))), errno.EACCES)
    want_errno("eacces_unlink", as_user(lambda: os.unlink(f)), errno.EACCES)
    want_errno("eacces_rename", as_user(lambda: os.rename(f, os.path.join(d, "g"))),
               errno.EACCES)
    want_errno("eacces_link", as_user(lambda: os.link(f, os.path.join(d, "g"))),
               (errno.EACCES, errno.EPERM))
    want_errno("eacces_write", as_user(lambda: write_at(f, b"y")), errno.EACCES)
    want_errno("eperm_chmod", as_user(lambda: os.chmod(f, 0o777)), errno.EPERM)
    want_errno("eperm_chown", as_user(lambda: os.chown(f, NOBODY, NOGROUP)), errno.EPERM)
    want_errno("eperm_utimes", as_user(lambda: os.utime(f, (1, 1))), errno.EPERM)
    nx = fresh(0o700)
    create(os.path.join(nx, "g"), 0o644)
    want_errno("eacces_search", as_user(lambda: os.stat(os.path.join(nx, "g"))), errno.EACCES)
    # sticky directory: others' entries cannot be removed or renamed
    st = fresh(0o1777)
    g = os.path.join(st, "rootfile")
    create(g, 0o666, b"r")
    want_errno("sticky_unlink_others", as_user(lambda: os.unlink(g)), (errno.EPERM, errno.EACCES))
    want_errno("sticky_rename_others", as_user(lambda: os.rename(g, os.path.join(st, "m"))),
               (errno.EPERM, errno.EACCES))
    mine = os.path.join(st, "mine")
    want_errno("sticky_own_creat", as_user(lambda: create(mine, 0o644)), 0)
    want("sticky_own_owner", os.path.exists(mine) and lst(mine).st_uid == NOBODY,
         "the user's new file is not his")
    want_errno("sticky_own_unlink", as_user(lambda: os.unlink(mine)), 0)
    want_errno("sticky_rename_over_others",
               as_user(lambda: (create(mine, 0o644), os.rename(mine, g))),
               (errno.EPERM, errno.EACCES))
    # a link made by another user to a file he cannot write (protected_hardlinks)
    h = fresh(0o777)
    want_errno("link_others_file_allowed_or_eperm",
               as_user(lambda: os.link(f, os.path.join(h, "l"))), (0, errno.EPERM))
    # chmod by the owner who is not in the group drops set-group-ID
    own = os.path.join(h, "own")
    create(own, 0o644)
    os.chown(own, NOBODY, 0)
    e = as_user(lambda: os.chmod(own, 0o2755))
    want("chmod_sgid_dropped", e == 0 and stat.S_IMODE(lst(own).st_mode) == 0o755,
         "mode %o (%s)" % (stat.S_IMODE(lst(own).st_mode), ename(e)))


# ---- times --------------------------------------------------------------------

def changed(before, after, fields):
    return all(getattr(after, f) > getattr(before, f) for f in fields)


@check
def times():
    d = fresh()
    f = os.path.join(d, "f")
    later()
    p0 = lst(d)
    create(f, 0o644, b"abc")
    p1 = lst(d)
    want("time_creat_parent", changed(p0, p1, ("st_mtime_ns", "st_ctime_ns")),
         "parent mtime/ctime not updated by creat")
    later()
    s0 = lst(f)
    os.chmod(f, 0o600)
    want("time_chmod_ctime", lst(f).st_ctime_ns > s0.st_ctime_ns, "ctime not updated by chmod")
    want("time_chmod_mtime_kept", lst(f).st_mtime_ns == s0.st_mtime_ns, "mtime changed by chmod")
    later()
    s0 = lst(f)
    os.chown(f, NOBODY, NOGROUP)
    want("time_chown_ctime", lst(f).st_ctime_ns > s0.st_ctime_ns, "ctime not updated by chown")
    later()
    s0, p0 = lst(f), lst(d)
    g = os.path.join(d, "g")
    os.rename(f, g)
    want("time_rename_ctime", lst(g).st_ctime_ns > s0.st_ctime_ns, "ctime not updated by rename")
    want("time_rename_parent", changed(p0, lst(d), ("st_mtime_ns", "st_ctime_ns")),
         "parent times not updated by rename")
    d2 = fresh()
    later()
    p0, q0 = lst(d), lst(d2)
    os.rename(g, os.path.join(d2, "g"))
    want("time_rename_both_parents", changed(p0, lst(d), ("st_mtime_ns",)) and
         changed(q0, lst(d2), ("st_mtime_ns",)), "a parent's mtime not updated")
    later()
    q0 = lst(d2)
    os.unlink(os.path.join(d2, "g"))
    want("time_unlink_parent", changed(q0, lst(d2), ("st_mtime_ns", "st_ctime_ns")),
         "parent times not updated by unlink")
    later()
    p0 = lst(d)
    os.mkdir(os.path.join(d, "sd"))
    want("time_mkdir_parent", changed(p0, lst(d), ("st_mtime_ns",)), "parent mtime by mkdir")
    later()
    p0 = lst(d)
    os.rmdir(os.path.join(d, "sd"))
    want("time_rmdir_parent", changed(p0, lst(d), ("st_mtime_ns",)), "parent mtime by rmdir")
    later()
    p0 = lst(d)
    os.symlink("t", os.path.join(d, "sl"))
    want("time_symlink_parent", changed(p0, lst(d), ("st_mtime_ns",)), "parent mtime by symlink")
    h = os.path.join(d, "h")
    create(h, 0o644, b"abc")
    later()
    s0 = lst(h)
    write_at(h, b"z")
    s1 = lst(h)
    want("time_write_mtime", changed(s0, s1, ("st_mtime_ns", "st_ctime_ns")),
         "mtime/ctime not updated by write")
    later()
    s0 = lst(h)
    os.truncate(h, 1)
    want("time_truncate_mtime", changed(s0, lst(h), ("st_mtime_ns", "st_ctime_ns")),
         "mtime/ctime not updated by truncate")
    # Times change with the data, not later: a file kept open after its
    # last write (b2fs commits it once idle: t_posix.sh mounts with
    # idle_flush=100), then closed, and one closed at once.  Each stat
    # after a wait past the kernel's attribute cache (1 s on b2fs).
    fd = os.open(h, os.O_WRONLY)
    try:
        later()
        os.pwrite(fd, b"w" * 300000, 0)
        s0 = lst(h)
        time.sleep(1.2)
        s1 = lst(h)
    finally:
        os.close(fd)
    time.sleep(1.2)
    s2 = lst(h)
    want("time_idle_open_kept", s1.st_mtime_ns == s0.st_mtime_ns and s2.st_mtime_ns == s0.st_mtime_ns,
         "mtime %d after the write, %d idle, %d closed" % (s0.st_mtime_ns, s1.st_mtime_ns,
                                                           s2.st_mtime_ns))
    os.utime(h, ns=(1000000000, 2000000000))
    s = lst(h)
    want("time_utimes", s.st_atime_ns == 1000000000 and s.st_mtime_ns == 2000000000,
         "utimes gave %d %d" % (s.st_atime_ns, s.st_mtime_ns))


@check
def renames():
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    create(a, 0o644, b"A")
    create(b, 0o644, b"B")
    ino = lst(a).st_ino
    os.rename(a, b)
    want("rename_over_file", read(b) == b"A" and not os.path.exists(a) and lst(b).st_ino == ino,
         "content or inode after rename over a file")
    s = os.path.join(d, "s")
    os.mkdir(s)
    e = os.path.join(d, "e")
    os.mkdir(e)
    want_errno("rename_dir_over_empty_dir", err(os.rename, s, e), 0)
    want("rename_dir_gone", not os.path.exists(s) and os.path.isdir(e), "dirs after rename")
    want_errno("rename_same_name", err(os.rename, b, b), 0)
    want("rename_same_name_kept", read(b) == b"A", "file lost by rename to itself")
    os.mkfifo(os.path.join(d, "fifo"))
    want_errno("rename_fifo_over_file", err(os.rename, os.path.join(d, "fifo"), b), 0)
    want("rename_fifo_over_file_kind", stat.S_ISFIFO(lst(b).st_mode), "not a fifo")
    os.symlink("t", os.path.join(d, "sl"))
    os.rename(os.path.join(d, "sl"), os.path.join(d, "sl2"))
    want("rename_symlink", os.readlink(os.path.join(d, "sl2")) == "t", "link text")


_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a, b):
    """renameat2(a, b, RENAME_EXCHANGE); raises OSError"""
    if _libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


@check
def exchanges():
    d = fresh()
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    create(a, 0o644, b"first A")
    create(b, 0o600, b"second")
    ia, ib = lst(a).st_ino, lst(b).st_ino
    e = err(exchange, a, b)
    want("exchange_files", e == 0 and read(a) == b"second" and read(b) == b"first A",
         "%s; a %r, b %r" % (ename(e), read(a), read(b)))
    want("exchange_files_inodes", lst(a).st_ino == ib and lst(b).st_ino == ia and
         stat.S_IMODE(lst(a).st_mode) == 0o600, "inodes or modes did not follow")
    # a file open for writing keeps writing to its own file, now the other name
    fd = os.open(a, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b" +1")
    e = err(exchange, a, b)
    os.write(fd, b" +2")
    os.close(fd)
    want("exchange_open_writer", e == 0 and read(b) == b"second +1 +2" and read(a) == b"first A",
         "%s; a %r, b %r" % (ename(e), read(a), read(b)))
    s, t = os.path.join(d, "s"), os.path.join(d, "t")
    os.mkdir(s)
    os.mkdir(t)
    create(os.path.join(s, "in_s"), 0o644, b"s")
    e = err(exchange, s, t)
    want("exchange_dirs", e == 0 and os.path.exists(os.path.join(t, "in_s")) and
         not os.listdir(s), "%s; s %s, t %s" % (ename(e), os.listdir(s), os.listdir(t)))
    want_errno("exchange_enoent", err(exchange, os.path.join(d, "nope"), a), errno.ENOENT)
    e = err(exchange, a, s)
    want("exchange_file_dir", e == 0 and os.path.isdir(a) and read(s) == b"first A",
         "%s" % ename(e))



class Dirent(ctypes.Structure):  # struct dirent of glibc on Linux (64-bit)
    _fields_ = [("d_ino", ctypes.c_uint64), ("d_off", ctypes.c_int64),
                ("d_reclen", ctypes.c_ushort), ("d_type", ctypes.c_ubyte),
                ("d_name", ctypes.c_char * 256)]


def raw_listing(path, stop=None):
    """readdir(3) of path as (name, d_ino) in the order given, dots included;
    with stop, also the rest after telldir at entry stop, then seekdir back
    there and read again: (all, rest, rest again)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.opendir.restype = ctypes.c_void_p
    libc.opendir.argtypes = [ctypes.c_char_p]
    libc.readdir.restype = ctypes.POINTER(Dirent)
    libc.readdir.argtypes = [ctypes.c_void_p]
    libc.telldir.restype = ctypes.c_long
    libc.telldir.argtypes = [ctypes.c_void_p]
    libc.seekdir.argtypes = [ctypes.c_void_p, ctypes.c_long]
    libc.closedir.argtypes = [ctypes.c_void_p]
    d = libc.opendir(path.encode())
    if not d:
        raise OSError(ctypes.get_errno(), "opendir " + path)

    def drain():
        out = []
        while True:
            e = libc.readdir(d)
            if not e:
                return out
            out.append((e.contents.d_name.decode(), e.contents.d_ino))
    try:
        if stop is None:
            return drain()
        head = []
        for _ in range(stop):
            e = libc.readdir(d)
            head.append((e.contents.d_name.decode(), e.contents.d_ino))
        mark = libc.telldir(d)
        rest = drain()
        libc.seekdir(d, mark)
        return head + rest, rest, drain()
    finally:
        libc.closedir(d)


@check
def listing_dots():
    """A listing holds "." and ".." (numbered as the directory and its
    parent) and every name once, over many pages; telldir/seekdir resume
    it where it was."""
    d = fresh()
    names = ["f%03d_%s" % (i, "x" * 60) for i in range(400)]
    for n in names:
        create(os.path.join(d, n), 0o644, b"x")
    os.mkdir(os.path.join(d, "sub"))
    got, rest, again = raw_listing(d, stop=150)
    byname = dict(got)
    want("listing_dots", sorted(n for n, _ in got) == sorted(names + ["sub", ".", ".."]),
         "%d entries, dots %s" % (len(got), [n for n, _ in got if n.startswith(".")]))
    want("listing_dots_numbers", byname.get(".") == lst(d).st_ino and
         byname.get("..") == lst(ROOT).st_ino and
         all(byname.get(n) == lst(os.path.join(d, n)).st_ino for n in names[:20] + ["sub"]),
         "d_ino of . %s (dir %d), .. %s (parent %d)" % (
             byname.get("."), lst(d).st_ino, byname.get(".."), lst(ROOT).st_ino))
    want("listing_seekdir", rest == again and len(rest) == len(got) - 150,
         "%d after telldir, %d after seekdir" % (len(rest), len(again)))
    sub = raw_listing(os.path.join(d, "sub"))
    want("listing_dots_empty_dir", sorted(n for n, _ in sub) == [".", ".."], "%s" % sub)

def main():
    os.umask(0)
    for fn in CHECKS:
        if ONLY and ONLY not in fn.__name__:
            continue
        try:
            fn()
        except Exception as ex:  # a check that cannot go on
            emit("%s_ran" % fn.__name__, False, "%s: %s" % (type(ex).__name__, ex))


main()
