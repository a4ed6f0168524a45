"""store_life_check.py STORE.b2d GROUP SHADOW - after tree_life.py ran in
the group GROUP of a DictStore through the mount (its "store" mode), what
python-blosc2 finds under /GROUP must be the shadow's files: each file
REL a value of key /GROUP/REL holding its bytes (an SChunk: a new file
that is no .npy, or a .npy whose bytes make no array, kept as they are),
an empty NAME.npy the empty frame of key /GROUP/NAME (an array yet to be
written) or, once kept as bytes, of /GROUP/NAME.npy, and no other value;
and each file of the group's directory carries the suffix python-blosc2
gives its kind (NAME.b2nd, NAME.b2f: no warning when it opens the store).
Prints "ok" or what differs."""
import os
import sys

import blosc2

store, group, shadow = sys.argv[1], sys.argv[2].strip("/"), sys.argv[3]


def schunk_bytes(v):
    out = b"".join(v.decompress_chunk(i) for i in range(v.nchunks))
    return out[:v.nbytes]


want = {}
for dp, _, fns in os.walk(shadow):
    for n in fns:
        full = os.path.join(dp, n)
        rel = os.path.relpath(full, shadow)
        with open(full, "rb") as f:
            data = f.read()
        want[f"/{group}/{rel}"] = data

bad = []
for dp, _, fns in os.walk(os.path.join(store, group)):
    for n in fns:
        if not n.endswith((".b2nd", ".b2f")):
            bad.append(f"{os.path.join(dp, n)}: no suffix python-blosc2 gives")

with blosc2.DictStore(store, mode="r") as d:
    have = {k for k in d.keys() if k.startswith(f"/{group}/")}
    for k in [k for k in want if k.endswith(".npy") and not want[k]]:
        if k[:-4] in have and k not in have:  # an empty array's frame
            want[k[:-4]] = want.pop(k)
    for k in sorted(have - set(want)):
        bad.append(f"{k}: in the store, not in the shadow")
    for k in sorted(set(want) - have):
        bad.append(f"{k}: in the shadow, not in the store")
    for k in sorted(have & set(want)):
        v = d[k]
        if not isinstance(v, blosc2.SChunk) or isinstance(v, blosc2.NDArray):
            bad.append(f"{k}: a {type(v).__name__}, not an SChunk")
        elif schunk_bytes(v) != want[k]:
            bad.append(f"{k}: {v.nbytes} bytes differ from the shadow's {len(want[k])}")
print("ok" if not bad else "; ".join(bad[:5]))
