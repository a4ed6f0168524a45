"""crash_npy.py - the array writer and oracle of tests/t_crash.sh.

  crash_npy.py run DIR LOGDIR SEED [MAXOPS]
      DIR is a directory under a b2fs mount.  Without LOGDIR/npy.base it
      first creates DIR/arr.npy (a 2-D '<u2' array with chunk and block
      shapes set through user.b2.*: blocks that do not divide chunks, so
      reads gather and resizes zero padding; chunks that split rows
      for even seeds, unless CRASH_TILES=0) and logs "R" once it is
      committed; with it, it first checks that DIR/arr.npy holds that state
      (the remount check).  Then, until killed, random operations on the
      array's .npy view: writes of up to 124 KiB at any item offset, resizes
      by whole rows (os.ftruncate), fsync, close and reopen, and reads of
      the whole array checked against the model.  Each operation is logged
      to LOGDIR/npy.log before it starts ("B k OP A B") and when it returns
      ("E k"), with unbuffered writes outside the mount; a write's bytes
      come from a seed derived from SEED and k, so the checker regenerates
      them.  The first failing call ends the run: EIO or ENOSPC (the
      fault daemon) are logged as "F errno" and exit 4; MAXOPS (default
      -1: until killed) bounds the operations.

  crash_npy.py check SRCDIR LOGDIR B2F
      SRCDIR is the same directory in SOURCE after the daemon was killed.
      Replays the log: the array (`B2F info` for its shape, `B2F cat
      --c-order` for its items) must equal, as a whole, one state between
      the last acknowledged commit (fsync, close, creation) and the state
      after the operation under way.  Prints "ok ..." or "FAIL ..." lines
      (exit 1 on failure) and writes LOGDIR/npy.base.new for the next
      trial.  A creation the kill interrupted is not checked (its files are
      removed, the next trial creates the array again).
"""
import os
import subprocess
import sys

import numpy as np

COLS, DT, ROWS0 = 1000, np.dtype("<u2"), 200
ROWB = COLS * DT.itemsize
MAXW = 124 << 10
PAGE = 4096  # the kernel's page: where it may split a write


def wdata(seed, k, n):
    return np.random.default_rng([seed, k]).integers(0, 256, n, dtype=np.uint8).tobytes()


def load_base(logdir):
    p = f"{logdir}/npy.base"
    if not os.path.exists(p):
        return None
    return bytearray(open(p, "rb").read())


def run(d, logdir, seed, maxops=-1):
    try:
        run_ops(d, logdir, seed, maxops)
    except OSError as e:
        if e.errno not in (5, 28):
            raise
        os.write(os.open(f"{logdir}/npy.log", os.O_WRONLY | os.O_APPEND), f"F {e.errno}\n".encode())
        sys.exit(4)


def run_ops(d, logdir, seed, maxops):
    log = os.open(f"{logdir}/npy.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    say = lambda s: os.write(log, (s + "\n").encode())
    rng = np.random.default_rng(seed)
    path = f"{d}/arr.npy"
    model = load_base(logdir)
    if model is None:
        say(f"C {seed}")
        os.makedirs(d, exist_ok=True)
        a = np.random.default_rng([seed, 0]).integers(0, 65536, (ROWS0, COLS)).astype(DT)
        fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        # Chunks across whole rows (odd seeds, or CRASH_TILES=0), or tiles
        # that split them (even seeds, the first trial's among them:
        # t_crash.sh's seeds start at a multiple of 1000): a writer then is
        # inside a row of chunks at once, and chunks pushed out of the
        # cache are parked beside the frame (spill.c).  Tiles found a write
        # that lost the rows of a tile it had left and came back to (fixed
        # 28 November, 96803e6).
        split = os.environ.get("CRASH_TILES", "1") == "1" and seed % 2 == 0
        os.setxattr(path, "user.b2.chunkshape", b"16,400" if split else b"16,1000")
        os.setxattr(path, "user.b2.blockshape", b"5,128" if split else b"5,1000")
        with os.fdopen(fd, "wb") as f:
            np.save(f, a)
            f.flush()
            os.fsync(f.fileno())
        model = bytearray(a.tobytes())
        say("R")
    else:
        got = np.load(path)
        if got.dtype != DT or got.tobytes() != bytes(model):
            say("X remount check")
            sys.exit("crash_npy: remount check: the array differs from the accepted state")
        say(f"S {seed}")
    hdr = os.path.getsize(path) - len(model)
    say(f"H {hdr}")
    fd = os.open(path, os.O_RDWR)
    k = 0
    while maxops < 0 or k < maxops:
        k += 1
        r = rng.integers(0, 100)
        n = len(model)
        if r < 55 and n > 0:
            off = int(rng.integers(0, n))
            ln = int(rng.integers(1, min(MAXW, n - off) + 1))
            say(f"B {k} w {off} {ln}")
            data = wdata(seed, k, ln)
            if os.pwrite(fd, data, hdr + off) != ln:  # a short write fails the run
                raise OSError(5, "short write")
            model[off:off + ln] = data
        elif r < 65:
            rows = int(rng.integers(150, 261))
            say(f"B {k} t {rows} 0")
            os.ftruncate(fd, hdr + rows * ROWB)
            model = model[:rows * ROWB] + bytearray(max(0, rows * ROWB - n))
        elif r < 80:
            say(f"B {k} s 0 0")
            os.fsync(fd)
        elif r < 90:
            say(f"B {k} c 0 0")
            os.close(fd)
            fd = os.open(path, os.O_RDWR)
        else:
            say(f"B {k} r 0 0")
            got = os.pread(fd, n + 1, hdr)
            if got != bytes(model):
                # A daemon killed during the read makes the kernel return the
                # pages read until then: a short read, no error.  STATFS
                # always reaches the daemon: if it answers, the daemon was
                # alive all through the read; if not, this read ended at the
                # kill and says nothing (the call fails as any after it).
                os.statvfs(d)
                g = np.frombuffer(got[:len(model)], dtype=np.uint8)
                m = np.frombuffer(bytes(model), dtype=np.uint8)
                bad = np.nonzero(g != m)[0]
                if len(bad):
                    b0, b1 = int(bad[0]), int(bad[-1])
                    rows_ = sorted(set((bad // ROWB).tolist()))
                    cols_ = sorted(set(((bad % ROWB) // 2).tolist()))
                    zeros = int((g[bad] == 0).sum())
                    # a short read: the size the kernel holds now, and
                    # what a second read gives (a failed page read ends a
                    # read early; a short reply lowers the size)
                    again = os.pread(fd, n + 1, hdr)
                    open(f"{logdir}/diag", "w").write(f"len got {len(got)} model {len(model)}; {len(bad)} bytes differ in [{b0},{b1}]; rows {rows_[:3]}..{rows_[-3:]} ({len(rows_)}); cols {cols_[0]}..{cols_[-1]} ({len(cols_)}); zeros in got {zeros}; fstat size then {os.fstat(fd).st_size} (header {hdr}); read again: {len(again)} bytes, {'equal' if again == bytes(model) else 'different'}\n")
                say("X read")
                sys.exit(f"crash_npy: op {k}: a read differs from the model")
        say(f"E {k}")


def apply(state, op, k, a, b, seed):
    s = bytearray(state)
    if op == "w":
        s[a:a + b] = wdata(seed, k, b)
    elif op == "t":
        s = s[:a * ROWB] + bytearray(max(0, a * ROWB - len(s)))
    return s


def check(src, logdir, b2f):
    lines = open(f"{logdir}/npy.log").read().split("\n")
    if not lines or not lines[0]:
        print("ok array: the writer had not started")
        return 0
    seed = int(lines[0].split()[1])
    base = load_base(logdir)
    if lines[0].startswith("C"):
        if "R" not in lines:
            subprocess.run(["rm", "-rf", src])
            print("ok array: creation interrupted (not checked; created again next trial)")
            return 0
        base = bytearray(np.random.default_rng([seed, 0]).integers(0, 65536, (ROWS0, COLS))
                         .astype(DT).tobytes())
    if base is None:
        print("FAIL array: no accepted state to start from")
        return 1
    # A write starting inside a page the kernel has not cached reaches the
    # daemon as two requests, that page's part first (see crash_writer.c):
    # a commit between them leaves the state before it plus that part.
    states, ack, splits, hdr = [bytes(base)], 0, {}, 128
    begun = None

    def split_of(k, a, b):
        piece = PAGE - (hdr + a) % PAGE
        if (hdr + a) % PAGE and b > piece:
            t = bytearray(states[-1])
            t[a:a + piece] = wdata(seed, k, b)[:piece]
            splits[len(states) - 1] = bytes(t)

    for ln in lines:
        f = ln.split()
        if not f:
            continue
        if f[0] == "H":
            hdr = int(f[1])
        elif f[0] == "B":
            begun = (int(f[1]), f[2], int(f[3]), int(f[4]))
        elif f[0] == "E":
            k, op, a, b = begun
            if op == "w":
                split_of(k, a, b)
            if op in "wt":
                states.append(bytes(apply(states[-1], op, k, a, b, seed)))
            if op in "sc":
                ack = len(states) - 1
            begun = None
        elif f[0] == "X":
            print(f"FAIL array: the writer stopped: {ln}")
            return 1
    if begun and begun[1] in "wt":
        k, op, a, b = begun
        if op == "w":
            split_of(k, a, b)
        states.append(bytes(apply(states[-1], op, k, a, b, seed)))
    info = subprocess.run([b2f, "info", f"{src}/arr.b2nd"], capture_output=True, text=True)
    rows = None
    for ln in info.stdout.splitlines():
        if ln.startswith("shape "):
            rows = int(ln.split()[1])
    cat = subprocess.run([b2f, "cat", "--c-order", f"{src}/arr.b2nd"], capture_output=True)
    if info.returncode or cat.returncode or rows is None:
        print(f"FAIL array: b2f info/cat: {info.stderr.strip()} {cat.stderr[:200]!r}")
        return 1
    got = cat.stdout
    if len(got) != rows * ROWB:
        print(f"FAIL array: shape says {rows} rows, the items hold {len(got)} bytes")
        return 1
    for i in range(len(states) - 1, ack - 1, -1):
        if states[i] == got:
            open(f"{logdir}/npy.base.new", "wb").write(got)
            print(f"ok array: state {i} of {len(states) - 1} (last acknowledged {ack}), {rows} rows")
            return 0
    for i in sorted(splits, reverse=True):
        if i >= ack and splits[i] == got:
            open(f"{logdir}/npy.base.new", "wb").write(got)
            print(f"ok array: state {i} and the first page's part of the next write "
                  f"(last acknowledged {ack}), {rows} rows")
            return 0
    older = [i for i in range(ack) if states[i] == got]
    why = f"acknowledged data lost (equals state {older[-1]})" if older else "no state matches"
    print(f"FAIL array: {why}; {rows} rows, states {ack}..{len(states) - 1}")
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]) if len(sys.argv) > 5 else -1)
    else:
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4]))
