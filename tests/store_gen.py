"""store_gen.py - python-blosc2 writes every store form; the expectations
for tests/t_store.sh are written beside them.

usage: store_gen.py SRC EXP
  SRC gets x.b2e (EmbedStore), t.b2d / t.b2z (TreeStore), d.b2d / d.b2z
  (DictStore), o.b2d (objects), each with embedded and external values,
  nested keys, group and leaf attributes and a deleted key (the TreeStores
  also an NDCELL array and an NDLZ one).
  EXP gets, per store NAME: NAME.keys (the keys python-blosc2 lists, sorted
  bytewise) and NAME.tsv (KEY, kind nd/sc/obj, expectation file, the path
  shown under the mount's store directory), with
  the expected bytes in EXP/NAME.N: NDArray values in C order, SChunk
  values their bytes, other objects repr(list(value)).
"""
import dataclasses
import os
import sys

import blosc2
import numpy as np

src, exp = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(5)


@dataclasses.dataclass
class Row:
    x: int = 0
    y: float = 0.0


def fill_tree(ts):
    a = blosc2.asarray(np.arange(10, dtype="<i4"))
    a.vlmeta["leafattr"] = "hi"
    ts["/a/b"] = a  # small: embedded
    ts["/a/c"] = np.arange(100, dtype="<i8").reshape(10, 10)
    ts["/a/big"] = rng.normal(size=(40, 50))  # 16000 bytes: a file
    ts["/s"] = blosc2.SChunk(chunksize=4096, data=b"xyz" * 4000)
    ts["/g/h/i"] = np.arange(7, dtype=">u2")
    ts["/g/tiny"] = blosc2.SChunk(chunksize=64, data=b"tiny")
    rec = np.zeros(30, np.dtype([("a", "u1"), ("b", "<f8")], align=True))
    rec["a"], rec["b"] = np.arange(30), np.arange(30) / 7
    ts["/g/rec"] = rec  # an aligned struct: python-blosc2 stores a dict literal
    # arrays whose chunks need the array's block shape (NDCELL) or carry
    # their own (NDLZ): leaves read where they lie keep them
    ts["/z/ndcell"] = blosc2.asarray(
        np.cumsum(rng.normal(size=(60, 50)), axis=1), chunks=(30, 25), blocks=(10, 12),
        cparams=dict(codec=blosc2.Codec.ZSTD, filters=[blosc2.Filter.NDCELL], filters_meta=[4]))
    ts["/z/ndlz"] = blosc2.asarray(
        (np.arange(64 * 48) % 13).astype(np.uint8).reshape(64, 48), chunks=(32, 48),
        blocks=(32, 24), cparams=dict(codec=blosc2.Codec.NDLZ, codec_meta=4,
                                      filters=[blosc2.Filter.NOFILTER]))
    ts["/dead"] = np.arange(3)
    del ts["/dead"]
    ts.vlmeta["k"] = (1, 2)
    ts.get_subtree("/a").vlmeta["x"] = 1
    ts.get_subtree("/g/h").vlmeta["deep"] = "yes"


def fill_dict(ds):
    ds["/small"] = np.arange(5, dtype="<f8")
    ds["/big"] = np.arange(3000, dtype="<i4").reshape(30, 100)
    ds["/g/h"] = np.arange(3, dtype="<i2")
    ds["/g/sc"] = blosc2.SChunk(chunksize=1000, data=bytes(range(256)) * 20)
    ds["/gone"] = np.arange(4)
    del ds["/gone"]


es = blosc2.EmbedStore(urlpath=f"{src}/x.b2e", mode="w")
es["/a"] = np.arange(10)
es["/b/c"] = np.arange(20, dtype="<f4").reshape(4, 5)
es["/d"] = blosc2.SChunk(chunksize=100, data=b"hello" * 100)
es["/multi"] = np.arange(5000, dtype="<i8")  # spans several 8 KiB chunks
es["/u"] = np.array(["x", "yz", "\u00e9t\u00e9"], dtype="<U3")
del es["/a"]
del es

for ext in ("b2d", "b2z"):
    with blosc2.TreeStore(f"{src}/t.{ext}", mode="w", threshold=1000) as ts:
        fill_tree(ts)
    with blosc2.DictStore(f"{src}/d.{ext}", mode="w", threshold=1000) as ds:
        fill_dict(ds)
table = blosc2.CTable(Row)
table.append(Row(x=1, y=2.5))
table.append(Row(x=3, y=-1.0))
with blosc2.TreeStore(f"{src}/o.b2d", mode="w") as ts:
    oa = blosc2.ObjectArray()
    oa.append({"x": 1})
    oa.append([1, "two"])
    ts["/o"] = oa
    ba = blosc2.BatchArray()
    ba.append([1, 2])
    ts["/b"] = ba
    ts["/n"] = np.arange(4, dtype="<i4")
    ts.vlmeta["root"] = "file carrier"
    ts["/tbl"] = table  # a CTable: python lists one key, its columns below it



def expect(name, opener, raw=None):
    store = opener()
    keys = sorted(store.keys(), key=lambda k: k.encode())
    shown_keys = list(keys)
    if raw:  # the keys inside objects kept as subtrees (CTables): shown, not listed
        roots = [k for k in keys if type(store[k]).__name__ == "CTable"]
        inner = [k for k in raw().keys() if any(k.startswith(r + "/") for r in roots)]
        shown_keys += sorted(inner, key=lambda k: k.encode())
        store_get = raw()
    else:
        store_get = store
    with open(f"{exp}/{name}.keys", "w") as f:
        f.write("".join(k + "\n" for k in keys))
    rows = []
    for n, k in enumerate(shown_keys):
        v = store[k] if k in keys else store_get[k]
        path = f"{exp}/{name}.{n}"
        if isinstance(v, blosc2.NDArray):
            kind, data, shown = "nd", np.ascontiguousarray(v[()]).tobytes(), k + ".npy"
            np.save(path + ".npy", v[()])
        elif type(v).__name__ in ("ObjectArray", "BatchArray"):
            kind, data = "obj", repr(list(v)).encode()
            shown = k + (".b2b" if type(v).__name__ == "BatchArray" else ".b2f")
        elif isinstance(v, blosc2.SChunk):
            kind, data, shown = "sc", bytes(v[:]), k
        else:
            continue  # a group
        with open(path, "wb") as f:
            f.write(data)
        rows.append(f"{k}\t{kind}\t{path}\t{shown}\n")
    with open(f"{exp}/{name}.tsv", "w") as f:
        f.write("".join(rows))
    if hasattr(store, "close"):
        store.close()


expect("x.b2e", lambda: blosc2.EmbedStore(urlpath=f"{src}/x.b2e", mode="r"))
for ext in ("b2d", "b2z"):
    expect(f"t.{ext}", lambda: blosc2.TreeStore(f"{src}/t.{ext}", mode="r"))
    expect(f"d.{ext}", lambda: blosc2.DictStore(f"{src}/d.{ext}", mode="r"))
expect("o.b2d", lambda: blosc2.TreeStore(f"{src}/o.b2d", mode="r"),
       raw=lambda: blosc2.DictStore(f"{src}/o.b2d", mode="r"))
