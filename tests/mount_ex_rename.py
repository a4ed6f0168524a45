#!/usr/bin/python3
"""mount_ex_rename.py - renames under a file being written, for
tests/t_mount_write.sh.

  mount_ex_rename.py MNT SEED NOPS

One thread writes, truncates (often to zero: the engine then rewrites the
frame into a new file), fsyncs and reads back a file through one open
descriptor, comparing every read with a shadow buffer; another renames the
file's directory back and forth and the file itself away and back; a third
stats and lists both directories.  At the end the file read afresh must
equal the shadow and SOURCE must hold just that one frame.  Prints "ok" or
"bad: why".
"""
import os
import random
import sys
import threading
import time

mnt, seed, nops = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
names = ["dA", "dB"]
os.mkdir(os.path.join(mnt, "dA"))
fd = os.open(os.path.join(mnt, "dA", "x"), os.O_RDWR | os.O_CREAT, 0o644)
shadow = bytearray()
stop = False
errs = []
renames = 0


def writer():
    r = random.Random(seed)
    try:
        for i in range(nops):
            op = r.random()
            if op < 0.6:
                off, n = r.randrange(0, len(shadow) + 1000), r.randrange(1, 50000)
                data = bytes([r.randrange(256)]) * n
                os.pwrite(fd, data, off)
                if off > len(shadow):
                    shadow.extend(b"\0" * (off - len(shadow)))
                shadow[off:off + n] = data
            elif op < 0.7:
                t = r.choice([0, r.randrange(0, len(shadow) + 1)])
                os.ftruncate(fd, t)
                del shadow[t:]
            elif op < 0.8:
                os.fsync(fd)
            else:
                off, n = r.randrange(0, len(shadow) + 1), r.randrange(1, 70000)
                if os.pread(fd, n, off) != bytes(shadow[off:off + n]):
                    errs.append("read mismatch at operation %d" % i)
                    return
    except OSError as e:
        errs.append("writer: %s" % e)


def renamer():
    global renames
    k = 0
    while not stop:
        try:
            os.rename(os.path.join(mnt, names[k % 2]), os.path.join(mnt, names[(k + 1) % 2]))
            k += 1
            if k % 5 == 0:
                d = os.path.join(mnt, names[k % 2])
                os.rename(os.path.join(d, "x"), os.path.join(d, "y"))
                os.rename(os.path.join(d, "y"), os.path.join(d, "x"))
                k += 0
            renames = k
        except OSError as e:
            errs.append("rename: %s" % e)
            return
        time.sleep(0.002)


def statter():
    while not stop:
        for d in names:
            try:
                os.stat(os.path.join(mnt, d, "x"))
                os.listdir(os.path.join(mnt, d))
            except FileNotFoundError:
                pass


threads = [threading.Thread(target=f) for f in (writer, renamer, statter)]
for t in threads:
    t.start()
threads[0].join()
stop = True
for t in threads[1:]:
    t.join()
try:
    os.close(fd)
except OSError as e:
    errs.append("close: %s" % e)
d = [x for x in names if os.path.isdir(os.path.join(mnt, x))]
got = open(os.path.join(mnt, d[0], "x"), "rb").read() if len(d) == 1 else None
if errs:
    print("bad: " + "; ".join(errs[:3]))
elif got != bytes(shadow):
    print("bad: content differs (%s vs %d bytes)" % (None if got is None else len(got), len(shadow)))
else:
    print("ok %d directory renames" % renames)
