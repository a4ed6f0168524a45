"""mount_ex_npy.py - random writes through the .npy views of b2nd arrays
against a NumPy shadow (run by tests/t_mount_npy.sh).

  mount_ex_npy.py DIR SEED OPS [check]

For each of several arrays (dtypes of 1 to 16 bytes, a structured one and
300-byte void items (stored with typesize 1),
1-D to 4-D, chunk and block shapes that leave uneven edges, blocks that do
not divide chunks) created in DIR with user.b2.chunkshape/blockshape and
numpy.save, OPS random operations: slice assignments through a writable
memmap (numpy.load mmap_mode="r+", flushed), pwrite of random bytes at
random item offsets, reads of random byte ranges (header included) with
pread, numpy.load of the whole array, resizes by whole rows.  Every read is
compared with the shadow.  The shadows are saved next to DIR's parent as
NAME.shadow.npy; with `check`, only compares DIR's arrays with them (after
a remount).  Exit 1 on the first difference.
"""
import os
import sys

import numpy as np

CONFIGS = [
    ("a1", "<f8", (1000,), "300", "70"),
    ("a2", "<i2", (97, 131), "20,50", "7,13"),
    ("a3", "|u1", (33, 17, 9), "10,5,9", "3,5,4"),
    ("a4", ">c16", (13, 11), "5,11", "2,11"),
    ("a5", "<u4", (6, 7, 8, 5), "4,3,8,5", "4,2,3,5"),
    ("a6", [("x", "<f4"), ("y", "|u1"), ("z", ">i8", (2,))], (300,), "64", "16"),
    ("a7", "|V300", (41, 3), "16,3", "5,2"),
]


def fail(msg):
    sys.exit(f"mount_ex_npy: {msg}")


def shadow_path(d, name):
    return f"{os.path.dirname(d.rstrip('/'))}/{name}.shadow.npy"


def whole(path, shadow, what):
    got = np.load(path)
    if got.dtype != shadow.dtype or got.shape != shadow.shape or got.tobytes() != shadow.tobytes():
        fail(f"{path}: {what}: numpy.load differs from the shadow (shape {got.shape} vs {shadow.shape})")


def rand_box(rng, shape):
    sl = []
    for n in shape:
        a = int(rng.integers(0, n))
        b = int(rng.integers(a + 1, n + 1))
        sl.append(slice(a, b))
    return tuple(sl)


def exercise(d, seed, ops):
    rng = np.random.default_rng(seed)
    for name, dt, shape, cs, bs in CONFIGS:
        dt = np.dtype(dt)
        path = f"{d}/{name}.npy"
        shadow = np.frombuffer(rng.bytes(dt.itemsize * int(np.prod(shape))), dtype=dt).reshape(shape).copy()
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        os.setxattr(path, "user.b2.chunkshape", cs.encode())
        os.setxattr(path, "user.b2.blockshape", bs.encode())
        with os.fdopen(fd, "wb") as f:
            np.save(f, shadow)
        whole(path, shadow, "after creation")
        for k in range(ops):
            r = rng.integers(0, 100)
            hdr = os.path.getsize(path) - shadow.nbytes
            if r < 30:                                   # memmap slice write
                m = np.load(path, mmap_mode="r+")
                box = rand_box(rng, shadow.shape) if shadow.ndim else ()
                vals = np.frombuffer(rng.bytes(shadow[box].nbytes), dtype=dt).reshape(shadow[box].shape)
                m[box] = vals
                shadow[box] = vals
                m.flush()
                del m
            elif r < 55 and shadow.nbytes:               # pwrite at any item byte
                off = int(rng.integers(0, shadow.nbytes))
                n = int(rng.integers(1, min(shadow.nbytes - off, 200000) + 1))
                data = rng.bytes(n)
                fd = os.open(path, os.O_WRONLY)
                if os.pwrite(fd, data, hdr + off) != n:
                    fail(f"{path}: short pwrite")
                os.close(fd)
                flat = shadow.reshape(-1).view(np.uint8)
                flat[off:off + n] = np.frombuffer(data, dtype=np.uint8)
            elif r < 85:                                  # pread of any range
                size = hdr + shadow.nbytes
                off = int(rng.integers(0, size))
                n = int(rng.integers(1, size - off + 1))
                with open(path, "rb") as f:
                    head = f.read(hdr)
                    f.seek(off)
                    got = f.read(n)
                want = (head + shadow.tobytes())[off:off + n]
                if got != want:
                    fail(f"{path}: op {k}: pread({n} at {off}) differs")
            elif r < 92:
                whole(path, shadow, f"op {k}")
            elif shadow.ndim:                             # whole rows added or cut
                rows = max(1, shadow.shape[0] + int(rng.integers(-shadow.shape[0] // 2, shadow.shape[0] // 2 + 2)))
                rowb = shadow.nbytes // shadow.shape[0]
                os.truncate(path, hdr + rows * rowb)
                grown = np.zeros((rows,) + shadow.shape[1:], dtype=dt)
                keep = min(rows, shadow.shape[0])
                grown[:keep] = shadow[:keep]
                shadow = grown
                if os.path.getsize(path) != hdr + shadow.nbytes:
                    fail(f"{path}: size after a resize to {rows} rows")
        whole(path, shadow, "at the end")
        np.save(shadow_path(d, name), shadow)


def check(d):
    for name, *_ in CONFIGS:
        whole(f"{d}/{name}.npy", np.load(shadow_path(d, name)), "after a remount")


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[4] == "check":
        check(sys.argv[1])
    else:
        exercise(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
