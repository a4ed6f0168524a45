#!/usr/bin/python3
"""tree_life.py MNT SHADOW SEED NOPS [sparse|store] - a tree of plain files through the
mount against a plain directory: the same random operations on both
(files created, overwritten, written at offsets, appended to and
truncated; renames of files and directories, over others and with
RENAME_NOREPLACE / RENAME_EXCHANGE; hard links, symbolic links, unlink,
mkdir, rmdir, chmod, utimensat, user attributes; and descriptors held
open across them: written, read, truncated, fsynced, given space and
holes (fallocate), copied between (copy_file_range) and written through
shared mappings, after their names moved or went), with names that
look like the frames SOURCE holds (NAME.b2frame, NAME.b2nd,
NAME.b2frame.b2frame, NAME.npy) among them.  After each operation the
call must have had the same outcome on both, and the two trees must hold
the same names with the same kind, permissions, size, link count, link
target, bytes and user attributes.  Differences documented (README,
POSIX behaviour) are allowed: RENAME_EXCHANGE of a file and a directory or symbolic link,
or of a .npy name's array and another file, is EINVAL on the mount
(their source names are of two kinds), and a new .npy file still open
for writing renamed to another name is EXDEV (it is an array in SOURCE
until its close decides), as is a link of such a file or of an empty
.npy to another name; the shadow then does not do it either.
With "sparse" (a mount with layout=sparse, where a file is a directory
in SOURCE), two more, also documented: files show no execute bits and
cannot be hard-linked (EPERM: the shadow then removes the link it
made), and a directory's link count counts its files as subdirectories
(more than a plain directory gives: find(1)'s leaf optimisation stays
safe); the shadow is compared without those.  With "store" (MNT a group
of a .b2d store on the mount, where each file is a value), the store's
documented limits: no hard or symbolic links (not made), no
RENAME_EXCHANGE (EINVAL), a rename between a .npy name and another is
EXDEV (an array's name is NAME.npy, an SChunk's any other), and group
link counts are not compared; tests/store_life_check.py then asks
python-blosc2.  Prints "ok" or what differs, with the last operations
(replay with the same seed)."""
import ctypes
import hashlib
import mmap
import os
import random
import stat
import sys

import life_lib

mnt, shadow, seed, nops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
sparse = sys.argv[5:] == ["sparse"]
store = sys.argv[5:] == ["store"]
if os.stat(mnt).st_dev == os.stat(shadow).st_dev:
    sys.exit(f"{mnt} is not mounted (it is on the file system of {shadow})")
r = random.Random(seed)
DIRS = ["", "d", "d/e", "f"]
NAMES = ["a", "b.txt", "c.b2frame", "x.b2nd", "y.b2frame.b2frame", "h.npy", "d", "e", ".t"]
libc = ctypes.CDLL(None, use_errno=True)
NOREPLACE, EXCHANGE = 1, 2
AT_FDCWD = -100


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def path():
    """Half the time an entry the tree has, else a name in one of its
    directories (maybe taken)."""
    ents, dirs = [], [""]
    for dp, dns, fns in os.walk(shadow):
        rel = os.path.relpath(dp, shadow)
        rel = "" if rel == "." else rel
        ents += [os.path.join(rel, n) for n in dns + fns]
        dirs += [os.path.join(rel, n) for n in dns]
    if ents and r.random() < 0.5:
        return r.choice(ents)
    return os.path.join(r.choice(dirs + DIRS), r.choice(NAMES)).lstrip("/")


def data(n):
    k = r.random()
    if k < 0.3:
        return r.randbytes(n)
    if k < 0.5:
        return bytes(n)
    blk = r.randbytes(r.randint(1, 64))
    return (blk * (n // len(blk) + 1))[:n]


def size_of(p):
    try:
        return os.lstat(os.path.join(shadow, p)).st_size
    except OSError:
        return 0


def is_file(p):
    """Whether the shadow's p is a regular file (None: absent)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(shadow, p)).st_mode)
    except OSError:
        return None


def npy_array(p, q):
    """Is p, to be renamed or linked to q, a .npy file that is an array in
    SOURCE (moved to a name that is no .npy name: EXDEV while so)?  Here,
    where the bytes written make no array: "open" while a descriptor has
    it open for writing (a new file, an array until its close decides),
    "empty" for an empty one (an empty array frame)."""
    if not p.endswith(".npy") or q.endswith(".npy") or not is_file(p):
        return None
    st = os.lstat(os.path.join(shadow, p))
    if any(os.fstat(h[1]).st_ino == st.st_ino for h in held):
        return "open"
    return "empty" if st.st_size == 0 else None


def both(fn):
    return life_lib.both((mnt, shadow), fn)


def create(p, b):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, b)
    finally:
        os.close(fd)


def tree(root):
    """{relative path: (kind, permissions, size, links, target or digest)}"""
    out = {}
    for dp, dns, fns in os.walk(root):
        for n in dns + fns:
            full = os.path.join(dp, n)
            st = os.lstat(full)
            rel = os.path.relpath(full, root)
            if stat.S_ISLNK(st.st_mode):
                what = os.readlink(full)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()[:16]
            else:
                what = ""
            mode, links = stat.S_IMODE(st.st_mode), st.st_nlink
            if sparse and stat.S_ISREG(st.st_mode):
                mode &= ~0o111
            if (sparse or store) and stat.S_ISDIR(st.st_mode):
                links = 0
            out[rel] = (stat.S_IFMT(st.st_mode), mode,
                        st.st_size if not stat.S_ISDIR(st.st_mode) else 0, links, what)
    return out


def copy_range(src, dst, n, off, to):
    """copy_file_range of n bytes (fewer at the source's end): None or errno."""
    try:
        while n > 0:
            k = os.copy_file_range(src, dst, n, off, to)
            if k == 0:
                break
            n, off, to = n - k, off + k, to + k
        return None
    except OSError as e:
        return e.errno


KEEP_SIZE, PUNCH = 1, 3  # FALLOC_FL_KEEP_SIZE, | FALLOC_FL_PUNCH_HOLE


def fallocate(fd, mode, off, n):
    if libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(n)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


held = []  # [mount fd, shadow fd, path at open]
log = []


def fail(why):
    print(f"seed {seed}: {log[-1]}: {why}; before: {log[-8:-1]}")
    for fm, fs, _ in held:
        os.close(fm)
        os.close(fs)
    sys.exit(1)


OPS = ["create", "create", "pwrite", "append", "trunc", "rename", "rename", "noreplace",
       "exchange", "link", "symlink", "unlink", "mkdir", "rmdir", "chmod", "utime", "xattr",
       "rmxattr", "open", "fdwrite", "fdwrite", "fdread", "fdtrunc", "fdsync", "fdpunch",
       "fdalloc", "fdcopy", "fdmmap", "close"]
if store:  # no links in a store
    OPS = [o for o in OPS if o not in ("link", "symlink")]
for i in range(nops):
    op = r.choice(OPS)
    p, q = path(), path()
    what = p
    extra = None
    if op == "create":
        b = data(r.choice([0, 1, 100, 4096, 70000, 300000]))
        what = f"{p} {len(b)}"
        res = both(lambda root: create(os.path.join(root, p), b))
    elif op == "pwrite":
        b = data(r.randint(1, 90000))
        off = r.randint(0, size_of(p) + 70000)
        what = f"{p} {off}+{len(b)}"
        res = both(lambda root: life_lib.pwrite(os.path.join(root, p), b, off))
    elif op == "append":
        b = data(r.randint(1, 5000))
        what = f"{p} {len(b)}"
        res = both(lambda root: life_lib.pwrite(os.path.join(root, p), b, 0, os.O_WRONLY | os.O_APPEND))
    elif op == "trunc":
        n = r.randint(0, size_of(p) + 100000)
        what = f"{p} {n}"
        res = both(lambda root: os.truncate(os.path.join(root, p), n))
    elif op in ("rename", "noreplace", "exchange"):
        if op == "rename" and r.random() < 0.3:
            q = os.path.join(os.path.dirname(p), r.choice(NAMES)).lstrip("/")
        flags = {"rename": 0, "noreplace": NOREPLACE, "exchange": EXCHANGE}[op]
        what = f"{p} {q}"
        # documented: no exchange of entries of two kinds in SOURCE (a file
        # and anything else; under a .npy name an array, NAME.b2nd, and a
        # plain frame), no rename of a new .npy file open for writing (still
        # an array in SOURCE until its close) to another name (EXDEV)
        mixed = op == "exchange" and (len({is_file(p), is_file(q)} - {None}) == 2 or
                                      p.endswith(".npy") or q.endswith(".npy") or store)
        writing = op != "exchange" and npy_array(p, q) == "open"
        # in a store, an array is NAME.npy, an SChunk any other name (EXDEV)
        writing = writing or (store and op != "exchange" and is_file(p) and
                              p.endswith(".npy") != q.endswith(".npy"))
        def ren(root):
            renameat2(os.path.join(root, p), os.path.join(root, q), flags)
        res = life_lib.both((mnt,), ren)
        res += [18] if writing and res == [18] else life_lib.both((shadow,), ren)
        if mixed and res == [22, None]:  # undo the shadow's exchange
            renameat2(os.path.join(shadow, p), os.path.join(shadow, q), EXCHANGE)
            res[1] = 22
    elif op == "link":
        what = f"{p} {q}"
        array = npy_array(p, q)  # documented: no link of an array to another name

        def link(root):
            os.link(os.path.join(root, p), os.path.join(root, q))
        res = life_lib.both((mnt,), link)
        res += [18] if array and res == [18] else life_lib.both((shadow,), link)
        if sparse and res == [1, None]:  # documented: undo the shadow's link
            os.unlink(os.path.join(shadow, q))
            res[1] = 1
    elif op == "symlink":
        t = r.choice(["a", "b.txt", "nowhere/x", "d/e", "x" * 100])  # all inside the tree
        what = f"{t} {p}"
        res = both(lambda root: os.symlink(t, os.path.join(root, p)))
    elif op == "unlink":
        res = both(lambda root: os.unlink(os.path.join(root, p)))
    elif op == "mkdir":
        res = both(lambda root: os.mkdir(os.path.join(root, p)))
    elif op == "rmdir":
        res = both(lambda root: os.rmdir(os.path.join(root, p)))
    elif op == "chmod":
        if os.path.islink(os.path.join(shadow, p)):
            continue  # Linux has no lchmod
        m = r.choice([0o600, 0o644, 0o755, 0o400, 0o700])
        what = f"{p} {m:o}"
        res = both(lambda root: os.chmod(os.path.join(root, p), m))
    elif op == "utime":
        ns = (r.randint(0, 2**40) * 1000 + 123, r.randint(0, 2**40) * 1000 + 456)
        what = f"{p} {ns}"
        res = both(lambda root: os.utime(os.path.join(root, p), ns=ns, follow_symlinks=False))
        if res == [None, None]:
            tm = os.lstat(os.path.join(mnt, p)).st_mtime_ns
            extra = None if tm == ns[1] else f"mtime {tm} on the mount, {ns[1]} set"
    elif op in ("xattr", "rmxattr"):
        k = "user.t" + r.choice("ab")
        v = r.randbytes(r.choice([0, 5, 300]))
        what = f"{p} {k}"
        res = both(lambda root: os.setxattr(os.path.join(root, p), k, v, follow_symlinks=False)
                   if op == "xattr" else os.removexattr(os.path.join(root, p), k,
                                                        follow_symlinks=False))
    elif op == "open":
        flags = r.choice([os.O_RDWR, os.O_RDWR | os.O_APPEND, os.O_RDWR | os.O_CREAT])
        what = f"{p} {flags:o}"
        fds = []
        res = both(lambda root: fds.append(os.open(os.path.join(root, p), flags, 0o644)))
        if len(fds) == 2:
            same = [[k for k, h in enumerate(held) if os.fstat(h[j]).st_ino == os.fstat(fds[j]).st_ino]
                    for j in (0, 1)]
            if same[0] != same[1]:
                extra = (f"the file opened is that of held descriptors {same[0]} on the mount, "
                         f"{same[1]} on a plain directory")
            held.append([fds[0], fds[1], p])
            if len(held) > 3:
                fm, fs, _ = held.pop(0)
                os.close(fm)
                os.close(fs)
        else:
            for fd in fds:
                os.close(fd)
    elif op.startswith("fd") or op == "close":
        if not held:
            continue
        h = r.choice(held)
        fm, fs, hp = h
        what = hp
        if op == "fdwrite":
            b = data(r.randint(1, 90000))
            off = r.randint(0, os.fstat(fs).st_size + 70000)
            what = f"{hp} {off}+{len(b)}"
            res = [None, None]
            for fd in (fm, fs):
                os.pwrite(fd, b, off)
        elif op == "fdread":
            off, n = r.randint(0, os.fstat(fs).st_size + 10), r.randint(1, 200000)
            what = f"{hp} {off}+{n}"
            res = [None, None]
            bm, bs = os.pread(fm, n, off), os.pread(fs, n, off)
            if bm != bs:
                extra = f"read {len(bm)} bytes on the mount, {len(bs)} on a plain directory"
        elif op == "fdtrunc":
            n = r.randint(0, os.fstat(fs).st_size + 100000)
            what = f"{hp} {n}"
            res = [None, None]
            for fd in (fm, fs):
                os.ftruncate(fd, n)
        elif op == "fdsync":
            res = [None, None]
            for fd in (fm, fs):
                os.fsync(fd)
        elif op in ("fdpunch", "fdalloc"):
            off, n = r.randint(0, os.fstat(fs).st_size + 10000), r.randint(1, 200000)
            mode = PUNCH if op == "fdpunch" else r.choice([0, KEEP_SIZE])
            what = f"{hp} {off}+{n} mode {mode}"
            res = life_lib.both((fm, fs), lambda fd: fallocate(fd, mode, off, n))
        elif op == "fdcopy":  # copy_file_range from another held descriptor
            o = r.choice(held)
            off, n = r.randint(0, os.fstat(o[1]).st_size), r.randint(1, 150000)
            to = r.randint(0, os.fstat(fs).st_size + 5000)
            what = f"{o[2]} {off}+{n} to {hp} {to}"
            res = [copy_range(src, dst, n, off, to) for src, dst in ((o[0], fm), (o[1], fs))]
        elif op == "fdmmap":  # a shared mapping written and flushed
            size = os.fstat(fs).st_size
            if size == 0:
                continue
            off, n = r.randint(0, size - 1), r.randint(1, 20000)
            n = min(n, size - off)
            b = data(n)
            what = f"{hp} {off}+{n}"
            res = [None, None]
            for fd in (fm, fs):
                with mmap.mmap(fd, size) as m:
                    m[off:off + n] = b
                    m.flush()
        else:
            held.remove(h)
            res = [None, None]
            os.close(fm)
            os.close(fs)
        if extra is None and op != "close":
            sm, ss = os.fstat(fm), os.fstat(fs)
            if (sm.st_size, sm.st_nlink) != (ss.st_size, ss.st_nlink):
                extra = (f"descriptor: size {sm.st_size}, links {sm.st_nlink} on the mount, "
                         f"{ss.st_size}, {ss.st_nlink} on a plain directory")
    log.append(f"{i}:{op} {what}")
    if res[0] != res[1]:
        fail(f"errno {res[0]} on the mount, {res[1]} on a plain directory")
    if extra:
        fail(extra)
    tm, ts = tree(mnt), tree(shadow)
    if tm != ts:
        d = sorted(k for k in set(tm) | set(ts) if tm.get(k) != ts.get(k))[:3]
        fail("trees differ: " + "; ".join(f"{k}: {tm.get(k)} on the mount, {ts.get(k)}" for k in d))
for fm, fs, _ in held:
    os.close(fm)
    os.close(fs)
tm, ts = tree(mnt), tree(shadow)
if tm != ts:
    log.append("closed all")
    fail("trees differ after the last close")
print("ok")
