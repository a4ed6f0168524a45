#!/usr/bin/python3
"""mount_check.py - content checks of a b2fs mount, for tests/t_mount.sh.

  mount_check.py manifest MNT MANIFEST [MAX_BYTES]
      every manifest line: sha256 of the mounted file (logical view), or for
      a b2nd array the .npy view: data after the header == corder_sha256,
      numpy.load shape/dtype (also with mmap_mode='r')
  mount_check.py listing SRC MNT
      every directory of SRC is listed under MNT with frames renamed (and
      shown as regular files) and everything else unchanged
  mount_check.py xattrs MNT FIXTURES B2F
      the user.b2.* attributes of every manifest frame agree with
      `b2f info --json` (names of metalayers included)
  mount_check.py conc MNT SECONDS PATH:SHA256 ...
      8 threads read random ranges of the given frames for SECONDS; every
      byte is compared with the frame's whole content (checked against SHA256,
      or only read once sequentially when SHA256 is "-")

Prints one "ok NAME" / "not ok NAME: why" / "skip NAME: why" line per check.
"""
import ast
import hashlib
import os
import random
import sys
import threading
import time


def shown(path):
    """Name under the mount of a fixture path (no collisions in fixtures)."""
    d, b = os.path.split(path)
    if b.endswith(".b2nd"):
        b = b[:-5] + ".npy"
    else:
        for s in (".b2frame", ".b2f", ".b2"):
            if b.endswith(s) and len(b) > len(s):
                b = b[: -len(s)]
                break
    return os.path.join(d, b)


def starts_like_frame(path):
    """b2_frame_starts_like: bytes 0-1 9e|9d a8, or bytes 2-9 b"b2frame\\0"."""
    with open(path, "rb") as f:
        h = f.read(10)
    return (len(h) >= 2 and h[0] in (0x9D, 0x9E) and h[1] == 0xA8) or h[2:10] == b"b2frame\0"


def is_frame(src_dir, name):
    if shown(name) == name:
        return False
    p = os.path.join(src_dir, name)
    if os.path.islink(p):
        return False
    if os.path.isfile(p):
        return starts_like_frame(p)
    idx = os.path.join(p, "chunks.b2frame")
    return os.path.isdir(p) and os.path.isfile(idx) and not os.path.islink(idx) \
        and starts_like_frame(idx)


def cmd_listing(src, mnt):
    problems = []
    ndirs = 0
    for dirpath, dirnames, filenames in os.walk(src):
        rel = os.path.relpath(dirpath, src)
        entries = dirnames + filenames
        frames = {n for n in entries if is_frame(dirpath, n)}
        dirnames[:] = [d for d in dirnames if d not in frames]
        want = {}
        for n in entries:
            want[shown(n) if n in frames else n] = "file" if n in frames or \
                os.path.isfile(os.path.join(dirpath, n)) else "dir" if \
                os.path.isdir(os.path.join(dirpath, n)) else "other"
        mdir = os.path.normpath(os.path.join(mnt, rel))
        try:
            got = sorted(os.listdir(mdir))
        except OSError as e:
            problems.append("%s: %s" % (rel, e))
            continue
        ndirs += 1
        if got != sorted(want):
            problems.append("%s: listed but not wanted %s, wanted but not listed %s" % (
                rel, sorted(set(got) - set(want)), sorted(set(want) - set(got))))
            continue
        for n, kind in want.items():
            p = os.path.join(mdir, n)
            k = "dir" if os.path.isdir(p) else "file" if os.path.isfile(p) else "other"
            if k != kind:
                problems.append("%s/%s: a %s, want a %s" % (rel, n, k, kind))
    if problems:
        print("not ok readdir_names: %s" % "; ".join(problems[:3]))
    else:
        print("ok readdir_names")
        sys.stderr.write("  %d directories listed as expected\n" % ndirs)
    return 0


def sha_file(path, skip=0):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        f.seek(skip)
        while True:
            blk = f.read(1 << 20)
            if not blk:
                break
            h.update(blk)
    return h.hexdigest()


def npy_dtype(s):
    import numpy as np
    return np.dtype(ast.literal_eval(s)) if s.startswith("[") else np.dtype(s)


def npy_data_offset(mpath):
    """Offset of the data in a .npy file, from its header length field."""
    with open(mpath, "rb") as f:
        head = f.read(12)
    if head[:6] != b"\x93NUMPY":
        raise ValueError("no .npy magic")
    if head[6] == 1:
        return 10 + int.from_bytes(head[8:10], "little")
    return 12 + int.from_bytes(head[8:12], "little")


def check_npy(mpath, shape, dtype, corder):
    try:
        import numpy as np
        from numpy.lib import format as npf
    except ImportError:  # no numpy: the data bytes only
        got = sha_file(mpath, npy_data_offset(mpath))
        sys.stderr.write("  numpy missing: %s checked without it\n" % mpath)
        return None if got == corder else "data after header sha256 %s != %s" % (got, corder)
    with open(mpath, "rb") as f:
        major, _ = npf.read_magic(f)
        if major == 1:
            hshape, fortran, hdtype = npf.read_array_header_1_0(f)
        else:
            hshape, fortran, hdtype = npf.read_array_header_2_0(f)
        hlen = f.tell()
    want_shape = tuple(int(x) for x in shape.split("x"))
    want_dtype = npy_dtype(dtype)
    nitems = 1
    for d in want_shape:
        nitems *= d
    # The header carries the metalayer's dtype as written, even where it
    # disagrees with the frame's typesize (the reference example: '|u1' over
    # 4-byte items); the data after it are still the stored items in C order.
    if fortran:
        return "header says fortran order"
    if tuple(hshape) != want_shape:
        return "header shape %s != %s" % (hshape, want_shape)
    if hdtype != want_dtype:
        return "header dtype %s != %s" % (hdtype, want_dtype)
    with open(mpath, "rb") as f:
        f.seek(hlen)
        data = f.read()
    got = hashlib.sha256(data).hexdigest()
    if got != corder:
        return "data after header sha256 %s != %s" % (got, corder)
    # numpy reads nitems items of the header's dtype: all the data, or a
    # prefix of it where the dtype is narrower than the stored items.
    want_len = nitems * want_dtype.itemsize
    for mm in (None, "r"):
        a = np.load(mpath, mmap_mode=mm)
        if a.shape != want_shape or a.dtype != want_dtype:
            return "numpy.load(mmap_mode=%s) gives %s %s" % (mm, a.shape, a.dtype)
        if np.ascontiguousarray(a).tobytes() != data[:want_len]:
            return "numpy.load(mmap_mode=%s) data differs" % mm
        del a
    return None


def cmd_manifest(mnt, manifest, max_bytes):
    fails = 0
    for line in open(manifest):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        path, nbytes, sha = f[0], int(f[1]), f[3]
        name = "content_" + path
        mpath = os.path.join(mnt, shown(path))
        try:
            if len(f) > 6 and f[4] != "-":
                why = check_npy(mpath, f[4], f[5], f[6])
            else:
                size = os.stat(mpath).st_size
                if size != nbytes:
                    why = "size %d != %d" % (size, nbytes)
                elif nbytes > max_bytes:
                    sys.stderr.write("  %s: size checked, %d bytes not read whole"
                                     " (B2FS_TEST_BIG=1 reads it)\n" % (path, nbytes))
                    continue
                else:
                    got = sha_file(mpath)
                    why = None if got == sha else "sha256 %s != %s" % (got, sha)
        except Exception as e:  # an I/O error is a failure, not a crash
            why = "%s: %s" % (type(e).__name__, e)
        if why:
            fails += 1
            print("not ok %s: %s" % (name, why))
        else:
            print("ok %s" % name)
        sys.stdout.flush()
    return 0


def cmd_xattrs(mnt, fix, b2f):
    import json
    import subprocess
    problems = []
    n = 0
    for line in open(os.path.join(fix, "manifest.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        path = line.split("\t")[0]
        try:
            info = json.loads(subprocess.run([b2f, "info", "--json", os.path.join(fix, path)],
                                             capture_output=True, check=True).stdout)
        except Exception as e:
            problems.append("%s: b2f info: %s" % (path, e))
            continue
        m = os.path.join(mnt, shown(path))
        try:
            names = set(os.listxattr(m))
            got = {k[len("user.b2."):]: os.getxattr(m, k) for k in names}
        except OSError as e:
            problems.append("%s: %s" % (path, e))
            continue
        want = {k: str(info[k]).encode() for k in
                ("codec", "clevel", "filters", "typesize", "chunksize", "blocksize",
                 "nchunks", "cbytes", "nbytes")}
        if "shape" in info:
            for k in ("shape", "chunkshape", "blockshape"):
                want[k] = "x".join(str(v) for v in info[k]).encode()
            want["dtype"] = info["dtype"].encode()
        for k, v in want.items():
            if got.get(k) != v:
                problems.append("%s: %s=%r, b2f says %r" % (path, k, got.get(k), v))
        if abs(float(got.get("cratio", b"nan")) - info["ratio"]) > 0.006:
            problems.append("%s: cratio %r vs %r" % (path, got.get("cratio"), info["ratio"]))
        metas = sorted(k[5:] for k in got if k.startswith("meta."))
        vlmetas = sorted(k[7:] for k in got if k.startswith("vlmeta."))
        if metas != sorted(info["metalayers"]) or vlmetas != sorted(info["vlmetalayers"]):
            problems.append("%s: metalayers %s %s vs %s %s" % (
                path, metas, vlmetas, info["metalayers"], info["vlmetalayers"]))
        n += 1
    if problems:
        print("not ok xattr_vs_info: %d problems: %s" % (len(problems), "; ".join(problems[:3])))
    else:
        print("ok xattr_vs_info")
        sys.stderr.write("  attributes of %d frames agree with b2f info\n" % n)
    return 0


def cmd_conc(mnt, seconds, specs):
    files = []
    for spec in specs:
        path, sha = spec.rsplit(":", 1)
        data = open(path, "rb").read()
        if sha != "-" and hashlib.sha256(data).hexdigest() != sha:
            print("not ok concurrent_reads: %s does not match its sha256" % path)
            return 0
        files.append((path, data))
    flags = os.O_RDONLY | getattr(os, "O_DIRECT", 0)
    errors = []
    counts = [0] * 8
    stop = time.time() + seconds

    def worker(k):
        rng = random.Random(1234 + k)
        fds = []
        for path, _ in files:
            try:
                fds.append(os.open(path, flags))  # past the page cache if allowed
            except OSError:
                fds.append(os.open(path, os.O_RDONLY))
        try:
            while time.time() < stop and not errors:
                i = rng.randrange(len(files))
                data = files[i][1]
                off = rng.randrange(len(data))
                n = rng.choice((1, 7, 4096, 65537, 1 << 20, 3 << 20))
                got = os.pread(fds[i], n, off)
                if got != data[off:off + n]:
                    errors.append("%s: %d bytes at %d differ" % (files[i][0], n, off))
                counts[k] += 1
        except OSError as e:
            errors.append("%s" % e)
        finally:
            for fd in fds:
                os.close(fd)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print("not ok concurrent_reads: %s" % errors[0])
    elif sum(counts) < 80:
        print("not ok concurrent_reads: only %d reads done" % sum(counts))
    else:
        print("ok concurrent_reads")
        sys.stderr.write("  %d random reads by 8 threads\n" % sum(counts))
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "manifest":
        lim = int(argv[4]) if len(argv) > 4 else 1 << 62
        return cmd_manifest(argv[2], argv[3], lim)
    if len(argv) == 4 and argv[1] == "listing":
        return cmd_listing(argv[2], argv[3])
    if len(argv) == 5 and argv[1] == "xattrs":
        return cmd_xattrs(argv[2], argv[3], argv[4])
    if len(argv) >= 5 and argv[1] == "conc":
        return cmd_conc(argv[2], float(argv[3]), argv[4:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
