"""pyb2_new.py - new arrays made under the codecs and filters python-blosc2
offers for arrays, as python-blosc2 would make them; for tests/t_pyb2.sh.

Run with the venv's python (python-blosc2 and NumPy from PyPI).

  pyb2_new.py write MNT PACK B2F zfp|nozfp
      each case's array is written with numpy.save into the mount at MNT
      (an empty NAME.npy given user.b2.codec / user.b2.filters first, as
      "zfp_rate:30", "ndcell:4"), and packed by `b2f pack -c .. -f ..`
      into PACK/NAME.b2nd; the xattrs read back as set.  Choices that
      cannot encode their data are refused: a ZFP codec on a file that is
      not an array (EINVAL), on integers (numpy.save fails with EINVAL,
      b2f pack exits 1 naming the codec), after shuffle, trunc_prec
      without its bits; with nozfp (b2fs without libzfp) the ZFP arrays
      cannot be made (numpy.save fails with EINVAL, b2f pack names libzfp)
  pyb2_new.py check SRC PACK zfp|nozfp
      python-blosc2 opens SRC/NAME.b2nd (the mount's source) and
      PACK/NAME.b2nd: codec, codec meta, filters and their meta are those
      set, and the items are, byte for byte, those python-blosc2's own
      asarray gives for the same data, chunks, blocks and parameters (the
      lossless ones the data itself, the ZFP ones within their tolerance)

Prints one "ok NAME" / "not ok NAME: why" line per check.
"""
import errno
import os
import subprocess
import sys

import blosc2
import numpy as np

from pyb2_check import image, notok, ok

C, F = blosc2.Codec, blosc2.Filter


def smooth(shape, dtype, seed):
    """A smooth field with some noise: what ZFP is for."""
    rng = np.random.default_rng(seed)
    grids = np.meshgrid(*[np.linspace(0, 3, n) for n in shape], indexing="ij")
    v = sum(np.sin((i + 1) * g) for i, g in enumerate(grids)) + rng.normal(0, 1e-3, shape)
    return v.astype(dtype)


# name -> (data, codec spec or None, filters spec or None,
#          python-blosc2 cparams, lossless, ZFP)
def cases():
    rng = np.random.default_rng(5)
    return {
        "zfp_rate_f8_3d": (smooth((24, 30, 40), "<f8", 1), "zfp_rate:30", None,
                           dict(codec=C.ZFP_RATE, codec_meta=30, filters=[]), False, True),
        "zfp_acc_f4_2d": (smooth((200, 150), "<f4", 2), "zfp_acc:-8", None,
                          dict(codec=C.ZFP_ACC, codec_meta=256 - 8, filters=[]), False, True),
        "zfp_prec_f8_1d": (smooth((10000,), "<f8", 3), "zfp_prec:20", None,
                           dict(codec=C.ZFP_PREC, codec_meta=20, filters=[]), False, True),
        "zfp_prec_f4_4d": (smooth((8, 9, 10, 11), "<f4", 4), "zfp_prec:12", None,
                           dict(codec=C.ZFP_PREC, codec_meta=12, filters=[]), False, True),
        "ndcell_zfp_f4": (smooth((64, 72), "<f4", 6), "zfp_prec:16", "ndcell:4",
                          dict(codec=C.ZFP_PREC, codec_meta=16, filters=[F.NDCELL],
                               filters_meta=[4]), False, True),
        "ndlz4_u1": (image(rng, 300, 200, "tiles"), "ndlz:4", None,
                     dict(codec=C.NDLZ, codec_meta=4), True, False),
        "ndlz8_u1": (image(rng, 123, 77, "rows"), "ndlz:8", None,
                     dict(codec=C.NDLZ, codec_meta=8), True, False),
        "ndcell_i4_3d": (np.arange(30 * 40 * 50, dtype="<i4").reshape(30, 40, 50) % 1000, None,
                         "ndcell:4", dict(filters=[F.NDCELL], filters_meta=[4]), True, False),
        "ndmean_f8_2d": (smooth((100, 120), "<f8", 7), None, "ndmean:4",
                         dict(filters=[F.NDMEAN], filters_meta=[4]), False, False),
        "trunc_prec_f8": (smooth((5000,), "<f8", 8), None, "trunc_prec:20,shuffle",
                          dict(filters=[F.TRUNC_PREC, F.SHUFFLE], filters_meta=[20, 0]), False,
                          False),
        "int_trunc_i4": (rng.integers(-10**6, 10**6, (300, 40), dtype="<i4"), None, "int_trunc:20",
                         dict(filters=[F.INT_TRUNC], filters_meta=[20]), False, False),
    }


def pack_args(codec, filters):
    a = []
    if codec:
        a += ["-c", codec]
    if filters:
        a += ["-f", filters]
    return a


def expect_errno(tag, want, fn):
    try:
        fn()
    except OSError as e:
        if e.errno == want:
            ok(tag)
        else:
            notok(tag, "errno %s, want %s" % (errno.errorcode.get(e.errno), errno.errorcode[want]))
        return
    notok(tag, "succeeded, want %s" % errno.errorcode[want])


def cmd_write(mnt, pack, b2f, zfp):
    os.makedirs(pack, exist_ok=True)
    for name, (data, codec, filters, _, _, is_zfp) in cases().items():
        tag = "new:" + name
        path = os.path.join(mnt, name + ".npy")
        if is_zfp and not zfp:  # the array cannot be made: the write fails
            open(path, "w").close()
            os.setxattr(path, "user.b2.codec", codec.encode())
            expect_errno(tag + ":nozfp", errno.EINVAL, lambda: np.save(path, data))
            continue
        try:
            open(path, "w").close()
            if codec:
                os.setxattr(path, "user.b2.codec", codec.encode())
            if filters:
                os.setxattr(path, "user.b2.filters", filters.encode())
            np.save(path, data)
            got = (os.getxattr(path, "user.b2.codec").decode(),
                   os.getxattr(path, "user.b2.filters").decode())
            want = (codec or "zstd", filters or ("none" if codec and "zfp" in codec else "shuffle"))
            ok(tag + ":xattr") if got == want else notok(tag + ":xattr", "%r, want %r" % (got, want))
        except OSError as e:
            notok(tag, "writing through the mount: %s" % e)
        src = os.path.join(pack, name + ".npy")
        np.save(src, data)
        r = subprocess.run([b2f, "pack", *pack_args(codec, filters), src,
                            os.path.join(pack, name + ".b2nd")], capture_output=True, text=True)
        os.unlink(src)
        ok(tag + ":pack") if r.returncode == 0 else notok(tag + ":pack", r.stderr.strip())

    # refused: plain files, integers, shuffle before ZFP, a filter without its bits
    plain = os.path.join(mnt, "plain.bin")
    open(plain, "w").close()
    expect_errno("new:refused:plain_zfp", errno.EINVAL,
                 lambda: os.setxattr(plain, "user.b2.codec", b"zfp_rate:30"))
    expect_errno("new:refused:plain_ndcell", errno.EINVAL,
                 lambda: os.setxattr(plain, "user.b2.filters", b"ndcell:4"))
    expect_errno("new:refused:no_bits", errno.EINVAL,
                 lambda: os.setxattr(plain, "user.b2.filters", b"trunc_prec"))
    ints = np.arange(1000, dtype="<i4").reshape(20, 50)
    if zfp:
        bad = os.path.join(mnt, "ints_zfp.npy")
        open(bad, "w").close()
        os.setxattr(bad, "user.b2.codec", b"zfp_rate:30")
        expect_errno("new:refused:int_zfp", errno.EINVAL, lambda: np.save(bad, ints))
    src = os.path.join(pack, "ints.npy")
    np.save(src, ints)
    floats = os.path.join(pack, "floats.npy")
    np.save(floats, ints.astype("<f8"))
    for tag, args, npy, words in [
            ("int_zfp", ["-c", "zfp_rate:30"], src, ["zfp_rate", "float"] if zfp else ["libzfp"]),
            ("int_ndmean", ["-f", "ndmean:4"], src, ["ndmean", "float"]),
            ("shuffle_zfp", ["-c", "zfp_rate:30", "-f", "shuffle"], floats,
             ["zfp_rate", "shuffle"] if zfp else ["libzfp"]),
            ("ndlz_f8", ["-c", "ndlz:4"], floats, ["ndlz", "1-byte"]),
            ("zfp_narrow", ["-c", "zfp_prec:20", "--blockshape", "2,50"], floats,
             ["zfp_prec", "at least 4"] if zfp else ["libzfp"])]:
        out = os.path.join(pack, "refused.b2nd")
        r = subprocess.run([b2f, "pack", *args, npy, out], capture_output=True, text=True)
        good = r.returncode == 1 and all(w in r.stderr for w in words) and not os.path.exists(out)
        ok("new:refused:pack_" + tag) if good else notok(
            "new:refused:pack_" + tag, "exit %d, %r (want 1 and %r)" % (r.returncode, r.stderr, words))
    os.unlink(src)
    os.unlink(floats)


def num(x):
    """an enum member's value, or the int itself"""
    return int(getattr(x, "value", x))


def filters_of(cp):
    return [(num(f), num(m)) for f, m in zip(cp.filters, cp.filters_meta) if num(f) != 0]


def cmd_check(src, pack, zfp):
    for name, (data, _, _, pycp, lossless, is_zfp) in cases().items():
        if is_zfp and not zfp:
            continue
        want_cp = blosc2.CParams(clevel=1, **pycp)
        for where, d in (("mount", src), ("pack", pack)):
            tag = "new:%s:%s" % (name, where)
            try:
                o = blosc2.open(os.path.join(d, name + ".b2nd"))
                cp = o.cparams
                if (num(cp.codec), num(cp.codec_meta), filters_of(cp)) != \
                        (num(want_cp.codec), num(want_cp.codec_meta), filters_of(want_cp)):
                    notok(tag, "codec %s:%d filters %r, want %s:%d %r" % (
                        cp.codec.name, cp.codec_meta, filters_of(cp), want_cp.codec.name,
                        want_cp.codec_meta, filters_of(want_cp)))
                    continue
                got = o[...]
                ref = blosc2.asarray(data, chunks=o.chunks, blocks=o.blocks, cparams=want_cp)[...]
                if got.dtype != ref.dtype or got.tobytes() != ref.tobytes():
                    bad = np.argwhere(got != ref)
                    notok(tag, "%d items differ from python-blosc2's, first at %r" % (
                        len(bad), bad[0].tolist() if len(bad) else None))
                elif lossless and got.tobytes() != data.tobytes():
                    notok(tag, "a lossless array does not hold its data")
                elif is_zfp and not np.allclose(got, data, rtol=0, atol=1e-2):
                    notok(tag, "ZFP off by %g" % float(np.abs(got - data).max()))
                else:
                    ok(tag)
            except Exception as e:  # noqa: BLE001
                notok(tag, "%s: %s" % (type(e).__name__, e))


def main():
    if sys.argv[1] == "write":
        cmd_write(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "zfp")
    elif sys.argv[1] == "check":
        cmd_check(sys.argv[2], sys.argv[3], sys.argv[4] == "zfp")
    else:
        sys.exit("unknown command " + sys.argv[1])


if __name__ == "__main__":
    main()
