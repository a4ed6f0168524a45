"""pyb2_check.py - python-blosc2 interoperability checks, for tests/t_pyb2.sh.

Run with the venv's python (python-blosc2 and NumPy from PyPI).

  pyb2_check.py make DIR
      python-blosc2 writes arrays of every dtype family it stores (plain,
      byte-swapped, bool, bytes, unicode, datetime/timedelta, complex, void,
      structured packed/aligned/padded/nested/sub-array/titled), contiguous
      and sparse, resized, with vlmeta; DIR/arrays.txt lists them
  pyb2_check.py npy DIR ROOT [B2F]
      every array NAME.b2nd of DIR is read as ROOT/NAME.npy with numpy.load
      and compared with python-blosc2's own blosc2.open(...)[...]: dtype
      (descr, names, offsets, itemsize) and bytes; with B2F, `b2f info
      --json` and (ROOT a mount) xattr user.b2.dtype give the stored string
  pyb2_check.py objects DIR
      python-blosc2 objects that are not data: a lazy expression and a lazy
      UDF saved, ObjectArrays (contiguous, sparse), a BatchArray, a ListArray
      and a Proxy cache under frame names, with their operand arrays
  pyb2_check.py objcheck DIR MNT B2F
      each object passes through the mount (MNT shows DIR) raw under its own
      source name, its short name absent; `b2f info --json` and xattr
      user.b2.kind name its kind
  pyb2_check.py cparams DIR zfp|nozfp
      python-blosc2 writes arrays under every codec and filter it offers
      (blosclz, lz4, lz4hc, zlib, zstd, the three ZFP modes on 1-4
      dimensions of float32 and float64; no filter, shuffle, bitshuffle,
      delta, trunc_prec, bytedelta, int_trunc, NDCELL and NDMEAN on 1-4
      dimensions with cells that do not divide the blocks, two filters in a
      row; dictionaries, split modes, clevel 0) and through its
      constructors that store special chunks (zeros, full, NaN, empty,
      arange, linspace), up to 8 dimensions, and NDLZ on 2-D images:
      DIR/arrays.txt lists them, for `npy`, DIR/edits.txt those for
      `editwrite`; with nozfp (a b2fs built without libzfp) the ZFP arrays
      go to DIR/refused.txt instead, each with what its error must say
  pyb2_check.py infocheck DIR B2F
      `b2f info --json` names each array's codec and codec meta as
      python-blosc2's cparams do
  pyb2_check.py refused DIR MNT B2F
      each of DIR/refused.txt: `b2f cat --npy` fails naming the file and the
      unsupported codec or filter; through the mount at MNT its .npy is
      listed and reading it fails with EIO
  pyb2_check.py intwrite MNT / intcheck DIR
      items written with numpy through the mount into DIR's int_trunc array
      (a copy of it kept as filter_int_trunc.b2nd.before) read back in
      python-blosc2 truncated as its own write would store them
  pyb2_check.py editwrite DIR MNT / editcheck DIR
      the middle item of each array DIR/edits.txt lists (ZFP, NDCELL,
      NDMEAN, NDLZ; copies kept as NAME.b2nd.before) written with numpy through
      the mount: python-blosc2 opens the result and finds, item for item,
      its own edit of the copy
  pyb2_check.py schunk SRC MNT
      files written through the mount at MNT (plain, their SOURCE frames in
      SRC) open in blosc2.open as SChunks with the same bytes

Prints one "ok NAME" / "not ok NAME: why" line per check.
"""
import ast
import errno
import io
import json
import os
import subprocess
import sys

import blosc2
import numpy as np


def ok(name):
    print("ok " + name, flush=True)


def notok(name, why):
    print("not ok %s: %s" % (name, why), flush=True)


# name -> dtype; every family python-blosc2 stores, spelled as users do
DTYPES = {
    "i4": np.dtype("<i4"),
    "u2": np.dtype("<u2"),
    "i1": np.dtype("i1"),
    "f8": np.dtype("<f8"),
    "f2": np.dtype("<f2"),
    "be_i4": np.dtype(">i4"),
    "be_f8": np.dtype(">f8"),
    "be_c8": np.dtype(">c8"),
    "bool": np.dtype("?"),
    "bytes": np.dtype("S7"),
    "unicode": np.dtype("<U5"),
    "be_unicode": np.dtype(">U3"),
    "dt_ns": np.dtype("<M8[ns]"),
    "dt_day": np.dtype("M8[D]"),
    "td_s": np.dtype("<m8[s]"),
    "be_td": np.dtype(">m8[10us]"),
    "c16": np.dtype("<c16"),
    "void": np.dtype("V8"),
    "packed": np.dtype([("a", "<i4"), ("b", "<f8")]),
    "aligned": np.dtype([("a", "u1"), ("b", "<f8")], align=True),
    "aligned3": np.dtype([("a", "<i2"), ("b", "<f8"), ("c", "u1")], align=True),
    "padded": np.dtype({"names": ["x"], "formats": ["<i2"], "offsets": [4], "itemsize": 12}),
    "reordered": np.dtype({"names": ["a", "b"], "formats": ["<i4", "<i2"],
                           "offsets": [0, 6], "itemsize": 10}),
    "nested": np.dtype([("outer", [("x", "<f4"), ("y", "<i2")]), ("z", "?")]),
    "nested_padded": np.dtype({"names": ["a", "b"], "formats": [
        "u1", np.dtype({"names": ["x"], "formats": ["<i2"], "offsets": [4], "itemsize": 12})],
        "offsets": [0, 8], "itemsize": 24}),
    "subarray": np.dtype([("a", "<i4", (2, 3)), ("b", "S3")]),
    "subarray1": np.dtype([("v", ">f4", (3,)), ("w", "<U2", 2)]),
    "subarray_padded": np.dtype({"names": ["a", "b"], "formats": ["u1", ("<f8", (2,))],
                                 "offsets": [0, 8], "itemsize": 24}),
    "titled": np.dtype([(("Temperature", "t"), "<f4"), ("u", ">u2")]),
    "names_quoted": np.dtype([("it's", "<i2"), ('say "hi"', "u1"), ("\u00e9t\u00e9", "<f4")]),
    "mixed": np.dtype([("when", "<M8[ms]"), ("ok", "?"), ("name", "S4"), ("z", "<c8"),
                       ("raw", "V3")]),
}


def values(dt, n, rng):
    """n items of dt with varied bytes (valid for bool and unicode)."""
    if dt.names is None and dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    if dt.names is None and dt.kind == "U":
        chars = dt.itemsize // 4
        words = ["".join(chr(0x41 + int(c)) if c < 40 else chr(0xe9 + int(c))
                         for c in rng.integers(0, 60, chars)) for _ in range(n)]
        return np.array(words, dtype=dt)
    raw = rng.integers(0, 256, n * dt.itemsize, dtype=np.uint8).tobytes()
    a = np.frombuffer(raw, dtype=dt).copy()
    # unicode fields hold valid code points (numpy would refuse others when
    # printing, not when copying: keep them sane all the same)
    if dt.names is not None:
        for name in dt.names:
            sub = dt.fields[name][0]
            base = sub.base if sub.subdtype else sub
            if base.kind == "U":
                a[name] = "ab"[: base.itemsize // 4]
            if base.kind == "b":
                a[name] = True
    return a


def samples(rng):
    """(key, dtype, array) of each of DTYPES: 37 items, or 23 x 11 small ones"""
    for key, dt in DTYPES.items():
        shape = (37,) if dt.itemsize > 16 else (23, 11)
        yield key, dt, values(dt, int(np.prod(shape)), rng).reshape(shape)


def cmd_make(d):
    rng = np.random.default_rng(10)
    os.makedirs(d, exist_ok=True)
    names = []
    for key, dt, a in samples(rng):
        shape = a.shape
        # asarray stores the dtype of the data's descr (padding as named
        # void fields); empty() stores str(dtype) (dict literals): both
        sparse = key in ("f8", "aligned", "nested", "unicode", "padded", "subarray_padded")
        for k in ["a", "e", "s"] if sparse else ["a", "e"]:
            name = "%s_%s.b2nd" % (key, k)
            path = os.path.join(d, name)
            chunks = tuple(max(1, s // 3) for s in shape)
            blocks = tuple(max(1, s // 7) for s in shape)
            if k == "a":
                arr = blosc2.asarray(a, urlpath=path, mode="w")
            else:
                arr = blosc2.empty(shape, dtype=dt, urlpath=path, mode="w", chunks=chunks,
                                   blocks=blocks, contiguous=(k == "e"))
                arr[...] = a
            del arr
            names.append(name)
    # resized (grown then shrunk), with vlmeta
    for key in ("aligned", "be_f8", "subarray"):
        dt = DTYPES[key]
        name = "%s_resized.b2nd" % key
        arr = blosc2.empty((40,), dtype=dt, urlpath=os.path.join(d, name), mode="w",
                           chunks=(16,), blocks=(4,))
        arr[...] = values(dt, 40, rng)
        arr.resize((70,))
        arr[40:70] = values(arr.dtype, 30, rng)
        arr.resize((55,))
        arr.vlmeta["note"] = "resized %s" % key
        arr.vlmeta["n"] = 55
        del arr
        names.append(name)
    # a 0-d array and an empty one
    blosc2.asarray(np.array(3.5, dtype=">f8"), urlpath=os.path.join(d, "scalar.b2nd"), mode="w")
    blosc2.asarray(np.zeros((0, 4), dtype=DTYPES["aligned"]),
                   urlpath=os.path.join(d, "empty_aligned.b2nd"), mode="w")
    names += ["scalar.b2nd", "empty_aligned.b2nd"]
    with open(os.path.join(d, "arrays.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    print("made %d arrays" % len(names), file=sys.stderr)


def fields(dt):
    """names, offsets and formats, recursively, as comparable data"""
    if dt.names is None:
        if dt.subdtype:
            return ("sub", fields(dt.subdtype[0]), dt.subdtype[1])
        return dt.str
    return [(n, dt.fields[n][1], fields(dt.fields[n][0]), dt.fields[n][2:]) for n in dt.names] + \
        [dt.itemsize]


def cmd_npy(d, root, b2f=None):
    names = open(os.path.join(d, "arrays.txt")).read().split()
    mounted = os.path.ismount(root)
    for name in names:
        src = os.path.join(d, name)
        npy = os.path.join(root, name[: -len(".b2nd")] + ".npy")
        tag = "%s:%s" % ("mount" if mounted else "cat", name)
        try:
            b = blosc2.open(src)
            want = b[...]
            stored = b.schunk.meta["b2nd"][-1]
            got = np.load(npy)
        except Exception as e:  # noqa: BLE001 - report any failure as a test result
            notok(tag, "%s: %s" % (type(e).__name__, e))
            continue
        why = []
        if got.dtype != want.dtype:
            why.append("dtype %r, python-blosc2 %r" % (got.dtype, want.dtype))
        if fields(got.dtype) != fields(want.dtype):
            why.append("fields %r, python-blosc2 %r" % (fields(got.dtype), fields(want.dtype)))
        if got.dtype.names is None and want.dtype.names is None and got.dtype.str != want.dtype.str:
            why.append("dtype.str %s, python-blosc2 %s" % (got.dtype.str, want.dtype.str))
        if got.shape != want.shape:
            why.append("shape %r, python-blosc2 %r" % (got.shape, want.shape))
        if got.tobytes() != want.tobytes():
            why.append("bytes differ")
        if b2f:
            info = json.loads(subprocess.run([b2f, "info", "--json", src], capture_output=True,
                                             check=True).stdout)
            if info.get("dtype") != stored:
                why.append("b2f info dtype %r, stored %r" % (info.get("dtype"), stored))
            if mounted:
                x = os.getxattr(npy, "user.b2.dtype").decode()
                if x != stored:
                    why.append("xattr user.b2.dtype %r, stored %r" % (x, stored))
        if why:
            notok(tag, "; ".join(why))
        else:
            ok(tag)


INT_TRUNC_KEEP = 20  # bits of each int32 the int_trunc array keeps
INT_WRITES = (((0, 0), 12345678), ((50, 3), 1023), ((119, 89), -2))


def image(rng, h, w, kind):
    """A 2-D uint8 image: tiles of 8x8 repeated with patches of one value,
    rows repeating every 5 with every 7th different, or random bytes."""
    if kind == "tiles":
        a = np.tile(rng.integers(0, 255, (8, 8), dtype=np.uint8), (h // 8 + 1, w // 8 + 1))[:h, :w]
        for _ in range(20):
            y, x = rng.integers(0, h), rng.integers(0, w)
            a[y:y + rng.integers(1, 20), x:x + rng.integers(1, 20)] = rng.integers(0, 255)
        return a
    if kind == "rows":
        a = rng.integers(0, 255, (5, w), dtype=np.uint8)[np.arange(h) % 5]
        a[::7] = rng.integers(0, 255, (len(a[::7]), w))
        return a
    return rng.integers(0, 255, (h, w), dtype=np.uint8)


def cmd_cparams(d, zfp):
    """Arrays under every codec, filter and constructor python-blosc2 offers."""
    rng = np.random.default_rng(12)
    os.makedirs(d, exist_ok=True)
    C, F = blosc2.Codec, blosc2.Filter
    sig = np.cumsum(rng.normal(size=(120, 90)), axis=1)
    ints = rng.integers(0, 1000, size=(120, 90)).astype(np.int32)
    geo = dict(chunks=(40, 45), blocks=(8, 15))
    made = {}   # name -> (data, cparams)
    for codec in ("BLOSCLZ", "LZ4", "LZ4HC", "ZLIB", "ZSTD"):
        made["codec_" + codec.lower()] = (sig, dict(codec=getattr(C, codec)))
    big = rng.integers(0, 2 ** 31, size=(120, 90)).astype(np.int32)
    for filt, meta, data in (("NOFILTER", 0, sig), ("SHUFFLE", 0, sig), ("BITSHUFFLE", 0, sig),
                             ("DELTA", 0, ints), ("TRUNC_PREC", 23, sig),
                             ("BYTEDELTA", 0, sig), ("INT_TRUNC", INT_TRUNC_KEEP, big)):
        made["filter_" + filt.lower()] = (data, dict(codec=C.ZSTD, filters=[getattr(F, filt)],
                                                     filters_meta=[meta]))
    made["filters_two"] = (sig, dict(codec=C.LZ4, filters=[F.TRUNC_PREC, F.BITSHUFFLE],
                                     filters_meta=[20, 0]))
    made["dict_zstd"] = (ints, dict(codec=C.ZSTD, use_dict=True))
    made["dict_lz4"] = (ints, dict(codec=C.LZ4, use_dict=True))
    made["clevel0"] = (sig, dict(clevel=0))
    made["split_always"] = (sig, dict(splitmode=blosc2.SplitMode.ALWAYS_SPLIT))
    made["split_never"] = (sig, dict(splitmode=blosc2.SplitMode.NEVER_SPLIT))
    names = []
    for name, (a, cp) in made.items():
        blosc2.asarray(a, urlpath=os.path.join(d, name + ".b2nd"), mode="w", cparams=cp, **geo)
        names.append(name + ".b2nd")
    p = lambda n: os.path.join(d, n + ".b2nd")  # noqa: E731
    blosc2.zeros((300, 70), dtype=np.float64, urlpath=p("zeros"), mode="w")
    blosc2.full((300, 70), 3.25, urlpath=p("full"), mode="w")
    blosc2.full((50, 30), np.nan, urlpath=p("nans"), mode="w")
    blosc2.empty((300, 70), dtype=np.float32, urlpath=p("empty"), mode="w")
    blosc2.arange(0, 100000, 1, dtype=np.int64, urlpath=p("arange"), mode="w")
    blosc2.linspace(0, 1, 70000, urlpath=p("linspace"), mode="w")
    blosc2.asarray(rng.normal(size=(3, 4, 2, 5, 3, 2)), urlpath=p("dim6"), mode="w")
    blosc2.asarray(rng.normal(size=(2,) * 8), urlpath=p("dim8"), mode="w")
    names += [n + ".b2nd" for n in ("zeros", "full", "nans", "empty", "arange", "linspace",
                                    "dim6", "dim8")]
    # ZFP (lossy, float arrays of 1-4 dimensions), decoded as python-blosc2
    # decodes them when b2fs has libzfp (zfp), refused saying so when not
    zfp_names, refused = [], []
    geos = (("1d", np.float32, (200,), (100,), (20,)),
            ("2d", np.float64, (60, 50), (30, 25), (8, 12)),
            ("3d", np.float32, (16, 12, 10), (8, 12, 10), (4, 4, 8)),
            ("4d", np.float64, (8, 8, 8, 9), (4, 8, 8, 9), (4, 4, 4, 4)))
    for codec, meta in (("ZFP_ACC", 253), ("ZFP_PREC", 12), ("ZFP_RATE", 40)):
        cp = dict(codec=getattr(C, codec), codec_meta=meta, filters=[F.NOFILTER],
                  splitmode=blosc2.SplitMode.NEVER_SPLIT)
        for g, dt, shape, ch, bl in geos:
            name = "%s_%s" % (codec.lower(), g)
            a = np.cumsum(rng.normal(size=shape), axis=-1).astype(dt)
            blosc2.asarray(a, urlpath=p(name), mode="w", chunks=ch, blocks=bl, cparams=cp)
            zfp_names.append((name, codec.lower()))
        name = codec.lower() + "_defaults"  # python-blosc2's other parameters
        blosc2.asarray(sig, urlpath=p(name), mode="w", cparams=dict(codec=getattr(C, codec)))
        zfp_names.append((name, codec.lower()))
    if zfp:
        names += [n + ".b2nd" for n, _ in zfp_names]
    else:
        refused += ["%s.b2nd\t%s: b2fs was built without libzfp" % (n, c) for n, c in zfp_names]
    # NDCELL and NDMEAN (cells of meta items per side over each block; NDMEAN
    # lossy), blocks not multiples of the cells, cells wider than a block
    edits = [n for n, _ in zfp_names if zfp and not n.endswith("_defaults")]
    nd = (("1d", np.float64, (300,), (100,), (30,), 4),
          ("2d", np.float32, (60, 50), (30, 25), (10, 12), 4),
          ("3d", np.float64, (16, 12, 10), (8, 12, 10), (4, 6, 10), 3),
          ("2dclip", np.float32, (40, 8), (20, 8), (10, 2), 4),
          ("3dodd", np.float32, (9, 9, 9), (9, 9, 9), (5, 7, 9), 4),
          ("4d", np.float64, (6, 6, 6, 6), (6, 6, 6, 6), (3, 6, 6, 6), 2),
          ("i32", np.int32, (40, 40), (20, 20), (10, 10), 4))
    for filt in ("NDCELL", "NDMEAN"):
        for g, dt, shape, ch, bl, meta in nd:
            if filt == "NDMEAN" and dt == np.int32:
                continue  # float items only
            name = "%s_%s" % (filt.lower(), g)
            a = (rng.integers(0, 100, shape).astype(dt) if dt == np.int32
                 else np.cumsum(rng.normal(size=shape), axis=-1).astype(dt))
            blosc2.asarray(a, urlpath=p(name), mode="w", chunks=ch, blocks=bl,
                           cparams=dict(codec=C.ZSTD, filters=[getattr(F, filt)],
                                        filters_meta=[meta]))
            names.append(name + ".b2nd")
            edits.append(name)
    # NDLZ (2-D bytes, cells of 4 or 8): constant, tiled, repeated-row and
    # random images, blocks that are not multiples of the cells
    for kind in ("tiles", "rows", "random"):
        for meta in (4, 8):
            for h, w, ch, bl in ((96, 128, (48, 64), (48, 64)), (90, 75, (45, 75), (30, 37))):
                name = "ndlz_%s_%d_%d" % (kind, meta, bl[1])
                blosc2.asarray(image(rng, h, w, kind), urlpath=p(name), mode="w", chunks=ch,
                               blocks=bl, cparams=dict(codec=C.NDLZ, codec_meta=meta,
                                                       filters=[F.NOFILTER]))
                names.append(name + ".b2nd")
                edits.append(name)
    with open(os.path.join(d, "arrays.txt"), "w") as f:
        f.write("\n".join(names) + "\n")
    with open(os.path.join(d, "edits.txt"), "w") as f:
        f.write("\n".join(edits) + "\n")
    # what b2fs does not decode: name, what its error says
    with open(os.path.join(d, "refused.txt"), "w") as f:
        f.write("\n".join(refused) + "\n")
    print("made %d arrays, %d refused" % (len(names), len(refused)), file=sys.stderr)


def cmd_infocheck(d, b2f):
    """`b2f info --json` gives each array's codec and codec meta as
    python-blosc2's cparams do."""
    for name in open(os.path.join(d, "arrays.txt")).read().split():
        tag = "info_codec:" + name
        try:
            cp = blosc2.open(os.path.join(d, name)).schunk.cparams
            info = json.loads(subprocess.run([b2f, "info", "--json", os.path.join(d, name)],
                                             capture_output=True, check=True).stdout)
            want = (cp.codec.name.lower(), int(cp.codec_meta))
            got = (info.get("codec"), info.get("codec_meta"))
            ok(tag) if got == want else notok(tag, "%r, python-blosc2 %r" % (got, want))
        except Exception as e:  # noqa: BLE001
            notok(tag, "%s: %s" % (type(e).__name__, e))


def cmd_refused(d, mnt, b2f):
    """What b2fs does not decode fails clearly, through b2f and the mount."""
    listed = set(os.listdir(mnt))
    for line in filter(None, open(os.path.join(d, "refused.txt")).read().splitlines()):
        name, why = line.split("\t", 1)
        src = os.path.join(d, name)
        npy = name[: -len(".b2nd")] + ".npy"
        r = subprocess.run([b2f, "cat", "--npy", src], capture_output=True)
        err = r.stderr.decode(errors="replace")
        if r.returncode == 0 or src not in err or why not in err:
            notok("refused_cat:" + name, "rc %d, stderr %r" % (r.returncode, err[:200]))
        else:
            ok("refused_cat:" + name)
        try:
            if npy not in listed:
                raise ValueError("%s not listed" % npy)
            with open(os.path.join(mnt, npy), "rb") as f:
                f.read()
            notok("refused_mount:" + name, "read succeeded")
        except OSError as e:
            if e.errno == 5:
                ok("refused_mount:" + name)
            else:
                notok("refused_mount:" + name, "%s, want EIO" % e)
        except ValueError as e:
            notok("refused_mount:" + name, str(e))


def cmd_intwrite(mnt):
    """Items written through the mount into the int_trunc array (numpy only)."""
    a = np.load(os.path.join(mnt, "filter_int_trunc.npy"), mmap_mode="r+")
    for (i, j), v in INT_WRITES:
        a[i, j] = v
    a.flush()
    del a


def cmd_intcheck(d):
    """python-blosc2 reads them truncated as its own write would have left
    them, every other item unchanged."""
    p = os.path.join(d, "filter_int_trunc.b2nd")
    got = blosc2.open(p)[...]
    want = blosc2.open(p + ".before")[...]
    mask = np.int32(-(1 << (32 - INT_TRUNC_KEEP)))
    for (i, j), v in INT_WRITES:
        want[i, j] = np.int32(v) & mask
    same = got.dtype == want.dtype and got.tobytes() == want.tobytes()
    ok("int_trunc_write") if same else notok(
        "int_trunc_write", "items %r, want %r" % ([int(got[i, j]) for (i, j), _ in INT_WRITES],
                                                  [int(want[i, j]) for (i, j), _ in INT_WRITES]))


def mid(shape):
    return tuple(n // 2 for n in shape)


def cmd_editwrite(d, mnt):
    """The middle item of each array of DIR/edits.txt written with numpy
    through the mount (a mapped file: its pages go back whole)."""
    for name in open(os.path.join(d, "edits.txt")).read().split():
        a = np.load(os.path.join(mnt, name + ".npy"), mmap_mode="r+")
        a[mid(a.shape)] = 42 if a.dtype.kind == "i" else 42.5
        a.flush()
        del a


def cmd_editcheck(d):
    """python-blosc2 opens each array written and finds, item for item, its
    own edit of the copy kept before: the chunk written encoded again from
    its decoded values and the item (padding kept as decoded), the chunks
    whose bytes came back unchanged left as they were (NDLZ: our own encoder's
    stream, the same items)."""
    for name in open(os.path.join(d, "edits.txt")).read().split():
        tag = "edit:" + name
        try:
            p = os.path.join(d, name + ".b2nd")
            ref = p + ".py.b2nd"
            with open(p + ".before", "rb") as f, open(ref, "wb") as g:
                g.write(f.read())
            r = blosc2.open(ref, mode="a")
            r[mid(r.shape)] = 42 if r.dtype.kind == "i" else 42.5
            del r
            want = blosc2.open(ref)[...]
            got = blosc2.open(p)[...]
            if got.dtype != want.dtype or got.shape != want.shape or \
                    got.tobytes() != want.tobytes():
                bad = np.argwhere(got != want)
                notok(tag, "%d items differ from python-blosc2's edit, first %r: %r, want %r" % (
                    len(bad), bad[0].tolist() if len(bad) else None,
                    got[tuple(bad[0])] if len(bad) else None,
                    want[tuple(bad[0])] if len(bad) else None))
            else:
                ok(tag)
        except Exception as e:  # noqa: BLE001
            notok(tag, "%s: %s" % (type(e).__name__, e))


def cmd_schunk(src, mnt):
    rng = np.random.default_rng(11)
    cases = {"plain_small": rng.bytes(1000), "plain_multi": rng.bytes(3 * 1024 * 1024 + 17),
             "plain_text": b"hello python-blosc2\n" * 50000, "plain_empty": b""}
    # typesize 1 set on the empty file (README): python-blosc2 slices it whole
    cases["plain_bytes"] = cases["plain_multi"]
    for name, data in cases.items():
        with open(os.path.join(mnt, name), "wb") as f:
            if name == "plain_bytes":
                os.setxattr(f.fileno(), "user.b2.typesize", b"1")
            f.write(data)
    os.sync()
    for name, data in cases.items():
        cands = [p for p in os.listdir(src) if p == name or p.startswith(name + ".")]
        if len(cands) != 1:
            notok("schunk:" + name, "SOURCE holds %r" % cands)
            continue
        try:
            s = blosc2.open(os.path.join(src, cands[0]))
            kind = type(s).__name__
            # s[:] gives whole items of typesize; the chunks hold every byte
            got = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
            items = s[:] if s.nbytes >= s.typesize else b""
            if bytes(items) != data[: len(data) // s.typesize * s.typesize]:
                notok("schunk:" + name, "SChunk[:] differs")
                continue
            if name == "plain_bytes" and (s.typesize != 1 or bytes(items) != data):
                notok("schunk:" + name, "typesize %d, SChunk[:] %d of %d bytes" % (
                    s.typesize, len(items), len(data)))
                continue
        except Exception as e:  # noqa: BLE001
            notok("schunk:" + name, "%s: %s" % (type(e).__name__, e))
            continue
        if kind != "SChunk":
            notok("schunk:" + name, "opens as %s" % kind)
        elif bytes(got) != data or s.nbytes != len(data):
            notok("schunk:" + name, "bytes differ (%d of %d)" % (s.nbytes, len(data)))
        else:
            ok("schunk:" + name)


# source name -> kind b2fs names (b2_frame_kind_name); contiguous unless the
# name says "sparse"
OBJECTS = {
    "expr.b2nd": "lazyexpr",
    "udf.b2nd": "lazyarray",
    "objs.b2f": "objectarray",
    "objs_sparse.b2f": "objectarray",
    "batches.b2f": "batcharray",
    "lists.b2frame": "listarray",
    "proxy.b2nd": "proxy",
}


def cmd_objects(d):
    """python-blosc2 objects that are not data, beside two operand arrays"""
    os.makedirs(d, exist_ok=True)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    a = blosc2.asarray(np.arange(1000.0), urlpath=p("a.b2nd"), mode="w")
    b = blosc2.asarray(np.arange(1000.0) * 2, urlpath=p("b.b2nd"), mode="w")
    (a + b).save(p("expr.b2nd"))

    def plus1(inputs, output, offset):
        output[:] = inputs[0] + 1

    blosc2.lazyudf(plus1, (a,), dtype=a.dtype, shape=a.shape).save(urlpath=p("udf.b2nd"))
    o = blosc2.ObjectArray(storage=blosc2.Storage(urlpath=p("objs.b2f"), mode="w"))
    o.append({"x": 1})
    o.append("two")
    o = blosc2.ObjectArray(storage=blosc2.Storage(urlpath=p("objs_sparse.b2f"), mode="w",
                                                  contiguous=False))
    o.append([1, 2, 3])
    ba = blosc2.BatchArray(urlpath=p("batches.b2f"), mode="w", contiguous=True)
    ba.append([1, 2])
    ba.append([3])
    la = blosc2.ListArray(item_spec=blosc2.int64(), urlpath=p("lists.b2frame"), mode="w")
    la.append([1, 2])
    px = blosc2.Proxy(a, urlpath=p("proxy.b2nd"), mode="w")
    px[0:10]
    del o, ba, la, px


def tree_bytes(path):
    """a file's bytes, or a directory's files and their bytes"""
    if os.path.isdir(path):
        return {n: open(os.path.join(path, n), "rb").read() for n in sorted(os.listdir(path))}
    return open(path, "rb").read()


def stem(name):
    for suf, short in ((".b2nd", ".npy"), (".b2frame", ""), (".b2f", "")):
        if name.endswith(suf):
            return name[: -len(suf)] + short
    return name


def cmd_objcheck(d, mnt, b2f):
    listed = set(os.listdir(mnt))
    for name, kind in OBJECTS.items():
        tag = "object:" + name
        src, shown = os.path.join(d, name), os.path.join(mnt, name)
        why = []
        info = json.loads(subprocess.run([b2f, "info", "--json", src], capture_output=True,
                                         check=True).stdout)
        if info.get("kind") != kind:
            why.append("b2f info kind %r, want %r" % (info.get("kind"), kind))
        if name not in listed or stem(name) in listed:
            why.append("listed as %r" % sorted(n for n in listed if n.startswith(stem(name)[:3])))
        elif os.path.exists(os.path.join(mnt, stem(name))):
            why.append("the short name %s resolves" % stem(name))
        else:
            if tree_bytes(shown) != tree_bytes(src):
                why.append("not the raw frame")
            try:
                x = os.getxattr(shown, "user.b2.kind").decode()
            except OSError as e:
                x = str(e)
            if x != kind:
                why.append("xattr user.b2.kind %r" % x)
            if "user.b2.kind" not in os.listxattr(shown):
                why.append("user.b2.kind not listed")
        if why:
            notok(tag, "; ".join(why))
        else:
            ok(tag)
    # the operands stay arrays, and name their kind
    for name in ("a.npy", "b.npy"):
        try:
            got = np.load(os.path.join(mnt, name))
            x = os.getxattr(os.path.join(mnt, name), "user.b2.kind").decode()
            if x != "ndarray" or got.shape != (1000,):
                raise ValueError("kind %r shape %r" % (x, got.shape))
            ok("object_operand:" + name)
        except Exception as e:  # noqa: BLE001
            notok("object_operand:" + name, str(e))


# python-blosc2's save_tensor / save_array files: an SChunk of the items in
# C order, with (kind, shape, dtype) in the vlmetalayer __pack_tensor__
TENSOR_SKIP = ("void",)  # dtype.descr [('', '|V8')]: no field, no .npy descr


def cmd_tensors(d):
    rng = np.random.default_rng(12)
    os.makedirs(d, exist_ok=True)
    names = []
    for key, _, a in samples(rng):
        name = "t_%s.b2frame" % key
        blosc2.save_tensor(a, os.path.join(d, name), mode="w")
        names.append(name)
    big = rng.normal(size=(300, 200, 7))
    blosc2.save_array(big, os.path.join(d, "t_big.b2frame"), chunksize=100_000, mode="w")
    blosc2.save_tensor(np.zeros((0, 3), dtype="<i2"), os.path.join(d, "t_empty.b2frame"), mode="w")
    names += ["t_big.b2frame", "t_empty.b2frame"]
    # under a .b2nd name the mount shows it as NAME.npy
    blosc2.save_tensor(big.astype(">f4"), os.path.join(d, "tn.b2nd"), chunksize=65_536, mode="w")
    names.append("tn.b2nd")
    with open(os.path.join(d, "tensors.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


def cmd_tensorcheck(d, mnt, b2f):
    for name in open(os.path.join(d, "tensors.txt")).read().split():
        src = os.path.join(d, name)
        key = name.split(".")[0]
        tag = "tensor:" + name
        why = []
        try:
            want = blosc2.load_tensor(src)
            sc = blosc2.open(src)
            items = b"".join(sc.decompress_chunk(i) for i in range(sc.nchunks))
            out = subprocess.run([b2f, "cat", "--npy", src], capture_output=True)
            expect_npy = key[2:] not in TENSOR_SKIP
            if not expect_npy:
                if out.returncode == 0:
                    why.append("b2f cat --npy made a .npy of it")
            else:
                got = np.load(io.BytesIO(out.stdout))
                if got.dtype != want.dtype or fields(got.dtype) != fields(want.dtype):
                    why.append("cat dtype %r, python-blosc2 %r" % (got.dtype, want.dtype))
                # numpy.load leaves padding bytes undefined: the file's own
                if got.shape != want.shape or out.stdout[len(out.stdout) - len(items):] != items:
                    why.append("cat shape %r or bytes differ" % (got.shape,))
            info = json.loads(subprocess.run([b2f, "info", "--json", src], capture_output=True,
                                             check=True).stdout)
            if expect_npy and info.get("shape") != list(want.shape):
                why.append("b2f info shape %r" % info.get("shape"))
            if name.endswith(".b2nd"):
                shown = os.path.join(mnt, key + ".npy")
                got = np.load(shown)
                if got.dtype != want.dtype or got.shape != want.shape or \
                        open(shown, "rb").read()[-len(items):] != items:
                    why.append("the mount's %s.npy differs" % key)
                m = np.load(shown, mmap_mode="r")
                if m[-1].tobytes() != want[-1].tobytes():
                    why.append("a mapping of %s.npy differs" % key)
                try:
                    open(shown, "r+b").close()
                    why.append("%s.npy opens for writing" % key)
                except PermissionError:
                    pass
            else:
                shown = os.path.join(mnt, key)
                if open(shown, "rb").read() != items:
                    why.append("the mount's %s is not the items in C order" % key)
                if expect_npy:
                    x = os.getxattr(shown, "user.b2.shape").decode()
                    if x != "x".join(str(n) for n in want.shape):
                        why.append("xattr user.b2.shape %r" % x)
                    dt = os.getxattr(shown, "user.b2.dtype").decode()
                    if np.dtype(ast.literal_eval(dt) if dt[0] in "[{" else dt) != want.dtype:
                        why.append("xattr user.b2.dtype %r" % dt)
        except Exception as e:  # noqa: BLE001
            why.append("%s: %s" % (type(e).__name__, e))
        if why:
            notok(tag, "; ".join(why))
        else:
            ok(tag)


def special_kinds(schunk):
    """Each chunk's special kind as its header says (1 zeros, 4 uninit...)"""
    return [(bytes(schunk.get_lazychunk(i))[31] >> 4) & 7 for i in range(schunk.nchunks)]


def cmd_holes(d):
    """python-blosc2 arrays and an SChunk partly made of zero chunks"""
    os.makedirs(d, exist_ok=True)
    p = lambda n: os.path.join(d, n)  # noqa: E731
    s = blosc2.SChunk(chunksize=80000, urlpath=p("sc.b2frame"), mode="w",
                      cparams=blosc2.CParams(typesize=8))
    s.fill_special(50000, blosc2.SpecialValue.ZERO)
    s.update_data(2, np.arange(10000, dtype="i8").tobytes(), True)
    z = blosc2.zeros((50, 60, 70), dtype="f8", chunks=(20, 25, 30), blocks=(10, 10, 10),
                     urlpath=p("z3.b2nd"), mode="w")
    z[0:20, 25:50, 30:60] = 1
    z[45, 59, 69] = 7
    e = blosc2.empty((1000, 3000), dtype="i4", chunks=(100, 3000), blocks=(50, 3000),
                     urlpath=p("e2.b2nd"), mode="w")
    e[300:400] = 5
    blosc2.zeros((300, 200), dtype="u2", chunks=(100, 64), urlpath=p("zs.b2nd"), mode="w",
                 contiguous=False)[150, 70] = 3
    blosc2.zeros((2000, 1000), dtype="u1", urlpath=p("all.b2nd"), mode="w")


def data_runs(fd, size):
    """The data ranges lseek's SEEK_DATA and SEEK_HOLE give, merged."""
    out, pos = [], 0
    while pos < size:
        try:
            dpos = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            break
        hpos = os.lseek(fd, dpos, os.SEEK_HOLE)
        if hpos <= dpos:
            raise ValueError("SEEK_HOLE from %d gave %d" % (dpos, hpos))
        out.append((dpos, hpos))
        pos = hpos
    return out


def runs_of(mask, base, unit):
    """Ranges (base + unit * i) of the False runs of mask (data), merged."""
    out = []
    m = np.concatenate(([True], np.asarray(mask, bool), [True]))
    starts = np.flatnonzero(m[:-1] & ~m[1:])
    ends = np.flatnonzero(~m[:-1] & m[1:])
    for s0, e0 in zip(starts, ends):
        out.append((base + int(s0) * unit, base + int(e0) * unit))
    return out


def cmd_holecheck(d, mnt, b2f):
    """SEEK_DATA/SEEK_HOLE through the mount: the holes are exactly the
    items of the chunks python-blosc2 stored as zeros (the .npy header and
    every other chunk data), they read as zeros, and cp (through the
    mount) and b2f unpack (of the frame) make sparse copies equal to it."""
    for name in ("sc.b2frame", "z3.b2nd", "e2.b2nd", "zs.b2nd", "all.b2nd"):
        o = blosc2.open(os.path.join(d, name))
        if name.endswith(".b2frame"):
            shown, sch = os.path.join(mnt, name[: -len(".b2frame")]), o
            kinds = special_kinds(sch)
            mask = np.repeat([k in (1, 4) for k in kinds], sch.chunksize)[: sch.nbytes]
            want = runs_of(mask, 0, 1)
        else:
            shown, sch = os.path.join(mnt, name[: -len(".b2nd")] + ".npy"), o.schunk
            kinds = special_kinds(sch)
            grid = [-(-n // c) for n, c in zip(o.shape, o.chunks)]
            idx = np.zeros(o.shape, dtype=np.int64)
            for ax, (n, c) in enumerate(zip(o.shape, o.chunks)):
                sh = [1] * len(o.shape)
                sh[ax] = n
                idx = idx * grid[ax] + (np.arange(n) // c).reshape(sh)
            hole = np.array([k in (1, 4) for k in kinds])[idx].ravel()
            hdr = os.stat(shown).st_size - o.size * o.dtype.itemsize
            want = [(0, hdr)] + runs_of(hole, hdr, o.dtype.itemsize)
            if len(want) > 1 and want[1][0] == hdr:  # header and first items: one run
                want[0:2] = [(0, want[1][1])]
        try:
            fd = os.open(shown, os.O_RDONLY)
            size = os.fstat(fd).st_size
            got = data_runs(fd, size)
            body = os.pread(fd, size, 0)
            os.close(fd)
        except Exception as e:  # noqa: BLE001
            notok("holes:" + name, "%s: %s" % (type(e).__name__, e))
            continue
        zeros_ok = all(not any(body[a:b]) for a, b in
                       zip([0] + [h for _, h in got], [dd for dd, _ in got] + [size]))
        nh = sum(1 for k in kinds if k in (1, 4))
        if got != want or not zeros_ok or nh in (0, len(kinds)) and name != "all.b2nd":
            notok("holes:" + name, "data %s, want %s (%d of %d chunks zeros), holes zeros %s" % (
                got[:4], want[:4], nh, len(kinds), zeros_ok))
            continue
        hole_bytes, bad = size - sum(b - a for a, b in got), []
        cp = os.path.join(d, "copy.bin")
        view = "--raw" if name.endswith(".b2frame") else "--npy"
        for how, cmd in (("cp", ["cp", shown, cp]),
                         ("b2f unpack", [b2f, "unpack", view, os.path.join(d, name), cp])):
            r = subprocess.run(cmd, capture_output=True)
            same = r.returncode == 0 and open(cp, "rb").read() == body
            blocks = os.stat(cp).st_blocks * 512 if r.returncode == 0 else -1
            if os.path.exists(cp):
                os.unlink(cp)
            if not same or blocks > size - hole_bytes + (1 << 20):
                bad.append("%s: status %d, equal %s, %d bytes allocated for %d of data" % (
                    how, r.returncode, same, blocks, size - hole_bytes))
        if bad:
            notok("holes:" + name, "; ".join(bad))
        else:
            ok("holes:" + name)

def main():
    cmd = sys.argv[1]
    if cmd == "make":
        cmd_make(sys.argv[2])
    elif cmd == "npy":
        cmd_npy(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None)
    elif cmd == "objects":
        cmd_objects(sys.argv[2])
    elif cmd == "objcheck":
        cmd_objcheck(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "cparams":
        cmd_cparams(sys.argv[2], sys.argv[3] == "zfp")
    elif cmd == "intwrite":
        cmd_intwrite(sys.argv[2])
    elif cmd == "intcheck":
        cmd_intcheck(sys.argv[2])
    elif cmd == "editwrite":
        cmd_editwrite(sys.argv[2], sys.argv[3])
    elif cmd == "editcheck":
        cmd_editcheck(sys.argv[2])
    elif cmd == "infocheck":
        cmd_infocheck(sys.argv[2], sys.argv[3])
    elif cmd == "refused":
        cmd_refused(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "tensors":
        cmd_tensors(sys.argv[2])
    elif cmd == "tensorcheck":
        cmd_tensorcheck(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "holes":
        cmd_holes(sys.argv[2])
    elif cmd == "holecheck":
        cmd_holecheck(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "schunk":
        cmd_schunk(sys.argv[2], sys.argv[3])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
