"""pyb2_old.py - frames from older python-blosc2 releases (2.x, 3.x), which
users' archives are full of, and frames b2fs writes opened by them.

usage:
  pyb2_old.py make DIR         the release writes arrays (dtypes; each codec
                               under each filter; sparse; resized, with
                               vlmeta; two save_tensor files), an SChunk,
                               and (3.x) its stores;
                               DIR/arrays.txt and DIR/stores.txt list them
  pyb2_old.py npy DIR ROOT     each array's ROOT/NAME.npy (b2f cat --npy
                               output, or the mount) equals the release's
                               own read: dtype, shape, bytes; ROOT/s is the
                               SChunk's bytes; through a mount, each store
                               value listed equals the release's read
  pyb2_old.py write MNT        numpy writes arrays and a plain file into a
                               b2fs mount
  pyb2_old.py open SRC         the release opens what `write` left in SRC:
                               the same items, dtype and bytes

Each check prints "ok NAME" or "not ok NAME: why".
"""
import os
import sys

import blosc2
import numpy as np

V = blosc2.__version__
MAJOR = int(V.split(".")[0])


def ok(name):
    print("ok old%s:%s" % (V, name))


def notok(name, why):
    print("not ok old%s:%s: %s" % (V, name, why))


def same(tag, got, want):
    why = []
    if got.dtype != want.dtype:
        why.append("dtype %r, python-blosc2 %r" % (got.dtype, want.dtype))
    if got.shape != want.shape:
        why.append("shape %r, python-blosc2 %r" % (got.shape, want.shape))
    if got.tobytes() != want.tobytes():
        why.append("bytes differ")
    if why:
        notok(tag, "; ".join(why))
    else:
        ok(tag)


DTYPES = ["i1", "<i2", ">i4", "<u8", "<f4", ">f8", "?", "<c16", "S5", "<U3", "<M8[s]"]


def cmd_make(d):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(1)
    names = []

    def save(name, arr, **kw):
        blosc2.asarray(arr, urlpath=os.path.join(d, name), mode="w", **kw)
        names.append(name)

    for i, dt in enumerate(DTYPES):
        if dt[-1].isdigit() and dt.lstrip("<>")[0] in "SU":
            a = rng.choice(np.array(["ab", "cde", "", "xyzzy"]), size=(37, 53)).astype(dt)
        else:
            a = rng.integers(0, 100, (37, 53)).astype(dt)
        save("dtype%d.b2nd" % i, a, chunks=(10, 20), blocks=(5, 7))
    codecs = [blosc2.Codec.BLOSCLZ, blosc2.Codec.LZ4, blosc2.Codec.LZ4HC, blosc2.Codec.ZLIB,
              blosc2.Codec.ZSTD]
    filters = [blosc2.Filter.SHUFFLE, blosc2.Filter.BITSHUFFLE, blosc2.Filter.DELTA,
               blosc2.Filter.NOFILTER]
    field = np.cumsum(rng.normal(size=(64, 65, 7)), axis=0)
    for c in codecs:
        for f in filters:
            save("c_%s_%s.b2nd" % (c.name, f.name), field, chunks=(20, 30, 7), blocks=(8, 8, 7),
                 cparams={"codec": c, "filters": [f], "clevel": 5})
    save("sparse.b2nd", np.arange(100000, dtype="<f8"), chunks=(7000,), blocks=(1000,),
         contiguous=False)
    save("struct.b2nd", np.zeros(50, dtype=[("x", "<f4"), ("y", ">i8"), ("s", "S3")]))
    save("default.b2nd", field)  # the release's own chunk and block choice
    # save_tensor's SChunks (items in C order, __pack_tensor__ vlmeta) under
    # .b2nd names: the mount's NAME.npy, as `b2f cat --npy`
    for i, a in enumerate([field, np.zeros(50, dtype=[("x", "<f4"), ("y", ">i8"), ("s", "S3")])]):
        blosc2.save_tensor(a, os.path.join(d, "tensor%d.b2nd" % i), chunksize=50_000, mode="w")
        names.append("tensor%d.b2nd" % i)
    b = blosc2.asarray(np.arange(1000.0), urlpath=os.path.join(d, "resized.b2nd"), mode="w",
                       chunks=(300,))
    b.resize((1500,))
    b[1000:] = 7
    b.schunk.vlmeta["note"] = "resized"
    names.append("resized.b2nd")
    s = blosc2.SChunk(chunksize=10000, urlpath=os.path.join(d, "s.b2frame"), mode="w",
                      cparams={"typesize": 4})
    for k in range(40):  # 2.x appends whole chunks only
        s.append_data(np.arange(2500 * k, 2500 * k + 2500, dtype="<i4"))
    with open(os.path.join(d, "arrays.txt"), "w") as fh:
        fh.write("\n".join(names) + "\n")
    stores = []
    if hasattr(blosc2, "TreeStore"):
        with blosc2.TreeStore(os.path.join(d, "t.b2z"), mode="w") as ts:
            ts["/a/b"] = np.arange(10, dtype="<i4")
            ts["/a/big"] = rng.normal(size=(40, 50))
            ts["/g/h/i"] = np.arange(7, dtype=">u2")
        stores += [("TreeStore", "t.b2z", k, "t/" + k[1:] + ".npy")
                   for k in ("/a/b", "/a/big", "/g/h/i")]
        with blosc2.DictStore(os.path.join(d, "dd.b2d"), mode="w") as ds:
            ds["/x"] = np.arange(5.0)
            ds["/y"] = rng.normal(size=(100, 100))
        stores += [("DictStore", "dd.b2d", k, "dd/" + k[1:] + ".npy") for k in ("/x", "/y")]
        es = blosc2.EmbedStore(urlpath=os.path.join(d, "e.b2e"), mode="w")
        es["/p"] = np.arange(20, dtype="<i2")
        es["/q"] = np.ones((3, 4))
        stores += [("EmbedStore", "e.b2e", k, "e/" + k[1:] + ".npy") for k in ("/p", "/q")]
    with open(os.path.join(d, "stores.txt"), "w") as fh:
        fh.write("".join("\t".join(s) + "\n" for s in stores))


def cmd_npy(d, root):
    for name in open(os.path.join(d, "arrays.txt")).read().split():
        tag = "%s:%s" % ("mount" if os.path.ismount(root) else "cat", name)
        try:
            path = os.path.join(d, name)
            want = blosc2.load_tensor(path) if name.startswith("tensor") else blosc2.open(path)[...]
            got = np.load(os.path.join(root, name[: -len(".b2nd")] + ".npy"))
        except Exception as e:  # noqa: BLE001 - any failure is a test result
            notok(tag, "%s: %s" % (type(e).__name__, e))
            continue
        same(tag, got, want)
    want = blosc2.open(os.path.join(d, "s.b2frame"))[:]
    try:
        got = open(os.path.join(root, "s"), "rb").read()
        (ok if got == want else notok)("schunk", *([] if got == want else
                                                   ["%d bytes, want %d" % (len(got), len(want))]))
    except OSError as e:
        notok("schunk", str(e))
    if not os.path.ismount(root):
        return
    for line in open(os.path.join(d, "stores.txt")):
        cls, store, key, shown = line.rstrip("\n").split("\t")
        tag = "store:%s%s" % (store, key)
        try:
            path = os.path.join(d, store)
            s = (blosc2.EmbedStore(urlpath=path, mode="r") if cls == "EmbedStore"
                 else getattr(blosc2, cls)(path, mode="r"))
            same(tag, np.load(os.path.join(root, shown)), s[key][...])
        except Exception as e:  # noqa: BLE001
            notok(tag, "%s: %s" % (type(e).__name__, e))


def written():
    rng = np.random.default_rng(2)
    return {
        "field": np.cumsum(rng.normal(size=(300, 200, 5)), axis=0),
        "ints": np.arange(123457, dtype="<i4"),
        "bytes": rng.integers(0, 256, (64, 3000), dtype=np.uint8),
    }


def cmd_write(mnt):
    for name, a in written().items():
        np.save(os.path.join(mnt, name + ".npy"), a)
    with open(os.path.join(mnt, "plain"), "wb") as fh:
        fh.write(b"hello, old release " * 50000)


def cmd_open(src):
    for name, want in written().items():
        tag = "open:%s.b2nd" % name
        try:
            same(tag, blosc2.open(os.path.join(src, name + ".b2nd"))[...], want)
        except Exception as e:  # noqa: BLE001
            notok(tag, "%s: %s" % (type(e).__name__, e))
    try:
        got = bytes(blosc2.open(os.path.join(src, "plain.b2frame"))[:])
        want = b"hello, old release " * 50000
        (ok if got == want else notok)("open:plain.b2frame", *([] if got == want else ["bytes differ"]))
    except Exception as e:  # noqa: BLE001
        notok("open:plain.b2frame", "%s: %s" % (type(e).__name__, e))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    {"make": cmd_make, "npy": cmd_npy, "write": cmd_write, "open": cmd_open}[cmd](*args)


if __name__ == "__main__":
    main()
