#!/usr/bin/env python3
"""npy_seeds.py OUTDIR - .npy headers written by NumPy, as fuzz seeds.

Writes OUTDIR/npy/* (a .npy header with a few data bytes, and the bare
descr text) and OUTDIR/b2nd/npy-* (the header behind fuzz_b2nd's odd
selector byte) for many dtypes, shapes and both orders.  Needs numpy;
prints a note and writes nothing without it."""
import io
import os
import sys

try:
    import numpy as np
    from numpy.lib import format as npf
except ImportError:
    print("npy_seeds: numpy is not installed, no .npy seeds", file=sys.stderr)
    sys.exit(0)

out = sys.argv[1]
os.makedirs(os.path.join(out, "npy"), exist_ok=True)
os.makedirs(os.path.join(out, "b2nd"), exist_ok=True)

dtypes = [
    "<f8", "<f4", "<f2", ">f8", "<i2", ">i4", "|u1", "|i1", "<u8", "<c16", "<c8",
    "|b1", "|S10", "<U3", ">U7", "|V12", "<M8[ns]", "<m8[s]", ">M8[D]",
    [("a", "<i4"), ("b", "<f8")],
    [("x", "<f4", (3,)), ("y", [("p", "|u1"), ("q", ">i2", (2, 2))])],
    [(("title", "t"), "<i8"), ("s", "|S5")],
    [("\u00e9t\u00e9", "<f4")],
    np.dtype({"names": ["a", "b"], "formats": ["<i2", "<f8"], "offsets": [0, 8], "itemsize": 24}),
    ("<f8", (2, 3)),
]
shapes = [(), (0,), (5,), (3, 4), (2, 0, 3), (1,) * 8, (7, 1, 2, 3)]

n = 0
for k, dt in enumerate(dtypes):
    dt = np.dtype(dt)
    for s, shape in enumerate(shapes):
        for order in ("C", "F"):
            if order == "F" and len(shape) < 2:
                continue
            for version in ((1, 0), (2, 0), (3, 0)):
                buf = io.BytesIO()
                d = npf.header_data_from_array_1_0(np.zeros(0, dt))
                d["shape"] = shape
                d["fortran_order"] = order == "F"
                try:
                    npf._write_array_header(buf, d, version)
                except ValueError:
                    continue
                h = buf.getvalue() + bytes(range(16))
                name = "dt%02d-s%d-%s-v%d" % (k, s, order, version[0])
                with open(os.path.join(out, "npy", name), "wb") as f:
                    f.write(h)
                if s < 3 and version == (1, 0):
                    with open(os.path.join(out, "b2nd", "npy-" + name), "wb") as f:
                        f.write(b"\x01" + h)
                n += 1
    with open(os.path.join(out, "npy", "descr-%02d" % k), "wb") as f:
        f.write(repr(npf.dtype_to_descr(dt)).encode() if not isinstance(npf.dtype_to_descr(dt), str)
                else npf.dtype_to_descr(dt).encode())
print("npy_seeds: %d headers" % n)
