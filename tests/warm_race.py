#!/usr/bin/env python3
"""warm_race.py - readers walking a directory of small frames in order (tar,
cat) while its frames are replaced behind the mount; the daemon warms them
ahead and hands the small ones to the page cache (fuse/warm.c).

Every file read while frames are replaced must be one version of it, or the
start of one (the kernel may still hold the size of the version before, for
the attribute timeout): never bytes of two versions.  Once the replacing
stops and the attribute timeout has passed, every file must read as its last
version exactly.

usage: warm_race.py B2F SOURCE_DIR MOUNT_DIR SCRATCH SECONDS SEED
prints "ok NAME" / "not ok NAME: why" lines.
"""
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

B2F, SRC, MNT, SCRATCH = sys.argv[1:5]
SECS, SEED = float(sys.argv[5]), int(sys.argv[6])
NFILES = 40
BIG = {7, 23}  # above the 1 MiB hand-over limit


def size_of(i, k):
    r = random.Random(i * 1000003 + k)
    if i in BIG:
        return (1 << 20) + r.randrange(600000)
    return 1 + r.randrange(400000)


def content(i, k):
    word = ("f%02d:%d:" % (i, k)).encode()
    n = size_of(i, k)
    return (word * (n // len(word) + 1))[:n]


def name(i):
    return "f%02d" % i


def version_of(i, data, prefix=False):
    """The version data is (or, with prefix, begins), or None."""
    head = data[:16].split(b":")
    if len(head) < 3 or head[0] != name(i).encode():
        return None
    try:
        k = int(head[1])
    except ValueError:
        return None
    want = content(i, k)
    return k if data == (want[:len(data)] if prefix else want) else None


def pack(i, k, dest):
    fd, plain = tempfile.mkstemp(dir=SCRATCH)
    os.write(fd, content(i, k))
    os.close(fd)
    tmp = plain + ".b2frame"
    subprocess.run([B2F, "pack", "-c", "lz4", plain, tmp], check=True, stdout=subprocess.DEVNULL)
    os.unlink(plain)
    os.rename(tmp, dest)  # one atomic replacement, as writers of frames do
    changes[0] += 1


latest = {}
bad = []
reads = [0]
changes = [0]
lock = threading.Lock()


def check(i, data, who):
    if version_of(i, data, prefix=True) is None:
        with lock:
            bad.append("%s: %s read %d bytes, no version of it" % (who, name(i), len(data)))
    with lock:
        reads[0] += 1


def tar_reader(stop, n):
    out = tempfile.mkdtemp(dir=SCRATCH)
    while not stop.is_set():
        p1 = subprocess.Popen(["tar", "cf", "-", "-C", MNT, "."], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        subprocess.run(["tar", "xf", "-", "-C", out], stdin=p1.stdout, stderr=subprocess.DEVNULL)
        warned = p1.stderr.read().decode(errors="replace")
        p1.wait()
        for i in range(NFILES):
            path = os.path.join(out, name(i))
            # tar's size came from a stat before the open: a file replaced
            # in between is archived cut or padded, and tar says so.
            if os.path.exists(path) and "./" + name(i) + ":" not in warned:
                with open(path, "rb") as f:
                    check(i, f.read(), "tar%d" % n)
            if os.path.exists(path):
                os.unlink(path)


def cat_reader(stop):
    while not stop.is_set():
        os.listdir(MNT)  # a listing read to its end: the order to warm in
        for i in range(NFILES):
            with open(os.path.join(MNT, name(i)), "rb") as f:
                check(i, f.read(), "cat")


def slow_reader(stop):
    """Holds each file open for a while, reading it in small pieces: its
    version must not change under it (the warming thread may meanwhile
    hand the next version over for the other readers)."""
    while not stop.is_set():
        os.listdir(MNT)
        for i in range(NFILES):
            parts = []
            with open(os.path.join(MNT, name(i)), "rb", buffering=0) as f:
                while True:
                    b = f.read(16384)
                    if not b:
                        break
                    parts.append(b)
                    time.sleep(0.001)
            check(i, b"".join(parts), "slow")
            if stop.is_set():
                return


def changer(stop, rnd):
    k = 1
    while not stop.is_set():
        i = rnd.randrange(NFILES)
        pack(i, k, os.path.join(SRC, name(i) + ".b2frame"))
        latest[i] = k
        k += 1
        time.sleep(rnd.random() * 0.05)


def main():
    rnd = random.Random(SEED)
    for i in range(NFILES):
        pack(i, 0, os.path.join(SRC, name(i) + ".b2frame"))
        latest[i] = 0
    # the daemon sees the first versions (and keeps a listing) before the race
    time.sleep(1.2)
    stop = threading.Event()
    threads = [threading.Thread(target=tar_reader, args=(stop, 0)),
               threading.Thread(target=tar_reader, args=(stop, 1)),
               threading.Thread(target=cat_reader, args=(stop,)),
               threading.Thread(target=slow_reader, args=(stop,)),
               threading.Thread(target=changer, args=(stop, rnd))]
    for t in threads:
        t.start()
    time.sleep(SECS)
    stop.set()
    for t in threads:
        t.join()
    if bad:
        print("not ok warm_race_versions: %d of %d reads: %s" % (len(bad), reads[0], "; ".join(bad[:5])))
    elif reads[0] < NFILES * 4:
        print("not ok warm_race_versions: only %d reads" % reads[0])
    else:
        print("ok warm_race_versions")
    print("  %d files read, %d replacements" % (reads[0], changes[0]), file=sys.stderr)
    # Settled: past the attribute timeout every file reads as its last version,
    # read in order (warmed and handed over again) and read once more.
    time.sleep(1.5)
    stale = []
    for rnd_pass in range(2):
        os.listdir(MNT)
        for i in range(NFILES):
            with open(os.path.join(MNT, name(i)), "rb") as f:
                data = f.read()
            if data != content(i, latest[i]):
                stale.append("%s pass %d: version %s, want %d" % (name(i), rnd_pass, version_of(i, data), latest[i]))
    if stale:
        print("not ok warm_race_settled: %s" % "; ".join(stale[:5]))
    else:
        print("ok warm_race_settled")


main()
