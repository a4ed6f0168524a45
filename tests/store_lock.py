"""store_lock.py - a python-blosc2 TreeStore changed under locking while
the mount reads it (tests/t_store.sh).

usage: store_lock.py write STORE.b2d SECONDS
         keeps adding values /v{i} = numpy.full(N, i) (embedded: the
         EmbedStore is rewritten in place under its lock), and some as
         files, for SECONDS; prints the count.
       store_lock.py read DIR SECONDS
         lists DIR (the store under the mount) and loads every v*.npy again
         and again for SECONDS: every array must hold its own index.
         Prints "reads=N bad=N errors=N" and fails on any bad read.
"""
import os
import sys
import time

import numpy as np

what, path, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
end = time.time() + secs
N = 3000  # 12 KB of int32: several 8 KiB chunks of the EmbedStore

if what == "write":
    import blosc2

    i = 0
    while time.time() < end:
        with blosc2.TreeStore(path, mode="a", locking=True, threshold=10**6) as ts:
            for _ in range(5):
                ts[f"/v{i}"] = np.full(N, i, dtype="<i4")
                i += 1
            ts.vlmeta["count"] = i
    print(i)
    sys.exit(0)

reads = bad = errors = 0
while time.time() < end:
    try:
        names = [n for n in os.listdir(path) if n.startswith("v") and n.endswith(".npy")]
    except OSError:
        errors += 1
        continue
    for n in names:
        k = int(n[1:-4])
        try:
            a = np.load(os.path.join(path, n))
        except (OSError, ValueError):
            errors += 1
            continue
        reads += 1
        if a.shape != (N,) or not (a == k).all():
            bad += 1
print(f"reads={reads} bad={bad} errors={errors}")
sys.exit(1 if bad or reads == 0 else 0)
