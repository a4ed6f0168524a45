"""npy_life.py MNT SHADOW SEED OPS - the life of .npy files through the
mount against a plain directory: the same random operations on both
(numpy.save of several dtypes, Fortran order among them; bytes appended,
inside a row or whole rows; truncates; writes past the end; renames
between .npy names and another; cp; unlink; memmap edits), and after
each one every name must exist in both or neither with the same bytes
and the call the same outcome.  One difference is by design: a .npy
view's header gives the rows its items fill, so a header whose row count
alone differs, that count being the rows the file's bytes fill, is taken
(the shadow follows).  Prints "ok" or what differs, with the last
operations (replay with the same seed)."""
import io
import os
import random
import shutil
import sys

import life_lib
import numpy as np
from numpy.lib import format as fmt

mnt, shadow, seed, nops = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
r = random.Random(seed)
NAMES = ["a.npy", "b.npy", "c.bak", "d.npy"]


def new_array():
    dt = r.choice(["<f8", "<i4", "<u2", "|u1", "<c8"])
    shape = (r.randint(0, 40), r.choice([1, 3, 30]))
    a = (np.arange(int(np.prod(shape))) * r.randint(1, 9)).astype(dt).reshape(shape)
    return np.asfortranarray(a) if r.random() < 0.1 else a


def header(b):
    try:
        f = io.BytesIO(b)
        shape, fortran, dtype = fmt._read_array_header(f, fmt.read_magic(f))
        return shape, fortran, dtype, f.tell()
    except Exception:
        return None


def rows_shown(bm, bs):
    """bm differs from bs only by a header giving the rows bm's bytes fill."""
    hm, hs = header(bm), header(bs)
    if not hm or not hs or len(bm) != len(bs) or hm[3] != hs[3] or bm[hm[3]:] != bs[hs[3]:]:
        return False
    (sm, fm, dm, hl), (ss, fs, ds, _) = hm, hs
    if fm != fs or dm != ds or not sm or sm[1:] != ss[1:]:
        return False
    row = dm.itemsize * int(np.prod(sm[1:]))
    return row > 0 and sm[0] == (len(bm) - hl) // row


def both(fn):
    return life_lib.both((mnt, shadow), fn)


def size(n):
    try:
        return os.path.getsize(os.path.join(shadow, n))
    except OSError:
        return 0


def memmap_edit(path):
    try:
        m = np.load(path, mmap_mode="r+")
    except Exception:  # no array: a plain file's bytes
        raise OSError(22, "no .npy array")
    if m.size:
        m.flat[0] = 7
    m.flush()
    del m


log = []
for i in range(nops):
    n = r.choice(NAMES)
    op = r.choice(["save", "save", "append", "rows", "trunc", "rename", "cp", "unlink", "pwrite",
                   "memmap"])
    m2 = r.choice(NAMES)
    if op == "save":
        a = new_array()
        what = f"{a.dtype}{a.shape}{'F' if not a.flags.c_contiguous else ''}"
        res = both(lambda root: np.save(os.path.join(root, n), a))
    elif op == "append":
        data = bytes([r.randint(0, 255)]) * r.randint(1, 300)
        what = len(data)
        res = both(lambda root: life_lib.pwrite(os.path.join(root, n), data, 0,
                                                os.O_WRONLY | os.O_APPEND))
    elif op == "rows":
        what = 240
        res = both(lambda root: life_lib.pwrite(os.path.join(root, n), b"\x05" * 240, 0,
                                                os.O_WRONLY | os.O_APPEND))
    elif op == "trunc":
        what = r.randint(0, size(n) + 100)
        res = both(lambda root: os.truncate(os.path.join(root, n), what))
    elif op == "rename":
        what = m2
        res = both(lambda root: os.rename(os.path.join(root, n), os.path.join(root, m2)))
    elif op == "cp":
        what = m2
        res = both(lambda root: shutil.copyfile(os.path.join(root, n), os.path.join(root, m2))) \
            if m2 != n else [None, None]
    elif op == "unlink":
        what = ""
        res = both(lambda root: os.unlink(os.path.join(root, n)))
    elif op == "pwrite":
        data = bytes([r.randint(0, 255)]) * r.randint(1, 50)
        what = (r.randint(0, size(n) + 10), len(data))
        res = both(lambda root: life_lib.pwrite(os.path.join(root, n), data, what[0]))
    else:
        what = ""
        res = both(lambda root: memmap_edit(os.path.join(root, n)))
    log.append(f"{i}:{op} {n} {what}")
    if res[0] != res[1]:
        print(f"seed {seed}: {log[-1]}: errno {res[0]} on the mount, {res[1]} on a plain directory;"
              f" before: {log[-6:-1]}")
        sys.exit(1)
    for x in NAMES:
        pm, ps = os.path.join(mnt, x), os.path.join(shadow, x)
        em, es = os.path.exists(pm), os.path.exists(ps)
        if em != es:
            print(f"seed {seed}: {log[-1]}: {x} exists on the mount: {em}, on a plain directory: "
                  f"{es}; before: {log[-6:-1]}")
            sys.exit(1)
        if not em:
            continue
        bm, bs = open(pm, "rb").read(), open(ps, "rb").read()
        if bm != bs and rows_shown(bm, bs):
            open(ps, "wb").write(bm)
        elif bm != bs:
            d = [k for k in range(min(len(bm), len(bs))) if bm[k] != bs[k]][:4]
            print(f"seed {seed}: {log[-1]}: {x} differs: {len(bm)} bytes on the mount, {len(bs)} "
                  f"on a plain directory, first at {d}; before: {log[-6:-1]}")
            sys.exit(1)
print("ok")
