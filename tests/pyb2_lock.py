"""pyb2_lock.py - frames shared between python-blosc2 and b2fs under the
reference library's `.b2lock` locking, for tests/t_pyb2_lock.sh.

Every state k a writer commits is recognisable: an int64 array (or a byte
stream) whose every item is k, of a size that depends on k.  A reader checks
that each piece it gets is whole: every item of a page (4 KiB, one FUSE
request) or of a chunk holds one value, and that value is a state that was
or is being written.  At the end, after the attribute timeout, the reader
sees exactly the last state.

  pyb2_lock.py pywrite PATH SECONDS DONEFILE
      python-blosc2 (locking=True) appends to, updates and resizes the array
      at PATH (created first), one state per holding_lock() bracket; writes
      the last k to DONEFILE when done
  pyb2_lock.py npywrite NPY SECONDS DONEFILE
      numpy.save of state k through a mount, again and again
  pyb2_lock.py pyarrayread FRAME SECONDS DONEFILE
      python-blosc2 (locking=True) reads that array whole under
      holding_lock(): one state each time, then the last one
  pyb2_lock.py pyschunk PATH SECONDS DONEFILE
      python-blosc2 (locking=True) updates, appends and deletes chunks of an
      SChunk at PATH, one state per holding_lock() bracket
  pyb2_lock.py schunkread FILE SECONDS DONEFILE TIMEOUT TAG
      plainread of that SChunk's logical view through a mount
  pyb2_lock.py mountclash FILE SECONDS DONEFILE
      writes through a mount to the SChunk pyschunk changes meanwhile: each
      commit lands or gets EBUSY, nothing else
  pyb2_lock.py checkschunk FRAME
      afterwards python-blosc2 opens the frame and every chunk is whole
  pyb2_lock.py mountread NPY SECONDS DONEFILE TIMEOUT SIDECAR
      reads the array's .npy view at NPY through a mount: random pages (each
      one read request) and whole numpy.load()s (several reads: under a
      shared flock of the frame's SIDECAR in SOURCE, as the reference
      library's readers lock) until DONEFILE appears, then the last state
  pyb2_lock.py mountwrite FILE SECONDS DONEFILE
      writes states of a plain file through a mount (open, write, truncate,
      close: one commit each); the last k to DONEFILE
  pyb2_lock.py holdlock FRAME SECONDS HELD RELEASED
      python-blosc2 (locking=True) makes an SChunk at FRAME, then holds its
      exclusive lock (holding_lock()) for SECONDS: HELD appears once it is
      held, RELEASED once it is let go
  pyb2_lock.py pyread FRAME SECONDS DONEFILE
      python-blosc2 (locking=True) reads the frame b2fs writes, whole under
      holding_lock() and chunk by chunk, until DONEFILE appears, then
      checks the last state
  pyb2_lock.py plainread FILE SECONDS DONEFILE TIMEOUT TAG
      pages of a plain file another mount writes (mountwrite): each page
      one state; after the writer and TIMEOUT, exactly the last state
  pyb2_lock.py busy FIRST SECOND LOG FRAME
      FIRST open for writing, SECOND (the same frame through another mount)
      gets EBUSY, and LOG (that mount's daemon) holds one line naming FRAME
      and the holder
  pyb2_lock.py npyread NPY SECONDS DONEFILE TIMEOUT SIDECAR TAG
      mountread under another test name (a second mount of one SOURCE)

Prints "ok NAME" / "not ok NAME: why" lines with counts.
"""
import os
import random
import sys
import time

import numpy as np

PAGE = 4096


def size_of(k):
    """items of state k (grows, shrinks, and keeps its size at times)"""
    return 3000 + (k * 7919) % 60000 if k % 4 else 3000 + ((k - 1) * 7919) % 60000


def nbytes_of(k):
    return 10000 + (k * 104729) % 3000000


SCHUNK_CHUNK = 40000


def schunk_nbytes_of(k):
    """bytes of state k of the SChunk python-blosc2 appends to"""
    return SCHUNK_CHUNK * (1 + (k * 13) % 24)


def wait_for(path):
    """until the writer has made its file (at most a minute)"""
    end = time.time() + 60
    while not os.path.exists(path) and time.time() < end:
        time.sleep(0.05)


def reader_loop(path, seconds, donefile, body):
    """body() again and again until the writer's DONEFILE appears (at most
    SECONDS + 60 s after PATH does): the writer's last k, or None"""
    wait_for(path)
    end = time.time() + seconds + 60
    while time.time() < end:
        final = done_k(donefile)
        if final is not None:
            return final
        body()
    return None


def done_k(donefile):
    try:
        return int(open(donefile).read())
    except (OSError, ValueError):
        return None


def cmd_pywrite(path, seconds, donefile):
    import blosc2

    arr = blosc2.asarray(np.zeros(size_of(0), np.int64), urlpath=path, mode="w",
                         chunks=(4096,), blocks=(1024,), locking=True)
    k = 0
    end = time.time() + seconds
    while time.time() < end:
        k += 1
        with arr.holding_lock():
            n = size_of(k)
            if arr.shape[0] != n:
                arr.resize((n,))
            arr[:] = np.full(n, k, np.int64)
        time.sleep(random.random() * 0.01)
    open(donefile + ".tmp", "w").write(str(k))
    os.rename(donefile + ".tmp", donefile)
    print("ok pywrite: %d states committed" % k)


def cmd_pyschunk(path, seconds, donefile):
    """python-blosc2 (locking=True) updates, appends and deletes chunks of an
    SChunk: state k is schunk_nbytes_of(k) bytes of k % 251, one
    holding_lock() bracket each"""
    import blosc2

    s = blosc2.SChunk(chunksize=SCHUNK_CHUNK, urlpath=path, mode="w", locking=True)
    k = 0
    end = time.time() + seconds
    while time.time() < end:
        k += 1
        n = schunk_nbytes_of(k) // SCHUNK_CHUNK
        data = bytes([k % 251]) * SCHUNK_CHUNK
        with s.holding_lock():
            for i in range(min(n, s.nchunks)):
                s.update_data(i, data, copy=True)
            while s.nchunks < n:
                s.append_data(data)
            while s.nchunks > n:
                s.delete_chunk(s.nchunks - 1)
        time.sleep(random.random() * 0.01)
    open(donefile + ".tmp", "w").write(str(k))
    os.rename(donefile + ".tmp", donefile)
    print("ok pyschunk: %d states committed (updates, appends, deletes)" % k)


def check_items(items, maxk, what):
    """items all equal one k in [0, maxk]; None, or why not"""
    if len(items) == 0:
        return None
    k = int(items[0])
    if not (items == k).all():
        vals = sorted(set(int(x) for x in items))[:5]
        return "%s mixes values %s" % (what, vals)
    if k < 0 or (maxk is not None and k > maxk):
        return "%s holds %d, never written" % (what, k)
    return None


def npy_header_len(head):
    if head[:6] != b"\x93NUMPY":
        return None
    if head[6] == 1:
        return 10 + int.from_bytes(head[8:10], "little")
    return 12 + int.from_bytes(head[8:12], "little")


def load_locked(npy, sidecar):
    """numpy.load through the mount while holding the reference library's
    shared lock on the frame's sidecar in SOURCE: one consistent state even
    over the several read() calls numpy makes; None when the sidecar is
    missing (python-blosc2's mode="w" removes it with the frame for a
    moment): no finding either way"""
    import fcntl

    try:
        fd = os.open(sidecar, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        return np.load(npy)
    finally:
        os.close(fd)


def cmd_mountread(npy, seconds, donefile, timeout, sidecar, tag="mountread"):
    reads = loads = bad = 0
    why = []
    wait_for(npy)
    wait_for(sidecar)
    end = time.time() + seconds + 60
    final = None
    while time.time() < end:
        final = done_k(donefile)
        if final is not None:
            break
        try:
            fd = os.open(npy, os.O_RDONLY)
        except OSError as e:
            why.append("open: %s" % e)
            bad += 1
            time.sleep(0.05)
            continue
        try:
            head = os.pread(fd, PAGE, 0)
            hl = npy_header_len(head)
            if hl is None:
                raise ValueError("no .npy header in the first page")
            size = os.fstat(fd).st_size
            for _ in range(8):
                page = random.randrange(0, max(1, size // PAGE + 1))
                data = os.pread(fd, PAGE, page * PAGE)
                reads += 1
                start = hl - page * PAGE if page * PAGE < hl else 0
                start += (8 - (page * PAGE + start - hl) % 8) % 8
                body = data[start:]
                body = body[: len(body) // 8 * 8]
                r = check_items(np.frombuffer(body, np.int64), None, "page %d" % page)
                if r:
                    why.append(r)
                    bad += 1
            if random.random() < 0.2:
                a = load_locked(npy, sidecar)
                if a is None:
                    continue
                loads += 1
                r = check_items(a, None, "numpy.load")
                if r is None and a.size and len(a) != size_of(int(a[0])):
                    r = "numpy.load: %d items of state %d (wants %d)" % (
                        len(a), int(a[0]), size_of(int(a[0])))
                if r:
                    why.append(r)
                    bad += 1
        except Exception as e:  # noqa: BLE001 - any failure is a finding
            why.append("%s: %s" % (type(e).__name__, e))
            bad += 1
        finally:
            os.close(fd)
    if final is None:
        print("not ok %s: the writer never finished" % tag)
        return
    time.sleep(timeout + 0.5)
    a = np.load(npy)
    if len(a) != size_of(final) or not (a == final).all():
        why.append("after the writer: %d items, values %s; wants state %d (%d items)" % (
            len(a), sorted(set(a.tolist()))[:3], final, size_of(final)))
        bad += 1
    if bad:
        print("not ok %s: %d bad of %d page reads, %d loads: %s" % (
            tag, bad, reads, loads, "; ".join(why[:4])))
    else:
        print("ok %s: %d page reads, %d numpy.load, all whole states; last state %d seen" % (
            tag, reads, loads, final))


def writer_loop(seconds, donefile, step, tag, what):
    """step(k) for k = 1, 2, ... during SECONDS, then the last k to DONEFILE
    and one result line"""
    k = 0
    end = time.time() + seconds
    bad = []
    while time.time() < end:
        k += 1
        try:
            step(k)
        except OSError as e:
            bad.append("state %d: %s" % (k, e))
        time.sleep(random.random() * 0.01)
    open(donefile + ".tmp", "w").write(str(k))
    os.rename(donefile + ".tmp", donefile)
    if bad:
        print("not ok %s: %s" % (tag, "; ".join(bad[:3])))
    else:
        print("ok %s: %d %s" % (tag, k, what))


def cmd_mountwrite(path, seconds, donefile):
    def step(k):
        data = bytes([k % 251]) * nbytes_of(k)
        with open(path, "r+b" if os.path.exists(path) else "wb") as f:
            f.write(data)
            f.truncate(len(data))

    writer_loop(seconds, donefile, step, "mountwrite", "states committed through the mount")


def cmd_mountclash(path, seconds, donefile):
    """writes through the mount to a frame python-blosc2 changes at the same
    time (pyschunk): each commit either lands or is refused with EBUSY
    (another program changed the frame since it was opened here); any other
    error is a finding.  Then the frame must be whole (checkschunk)."""
    wait_for(path)
    landed = refused = 0
    bad = []
    end = time.time() + seconds
    while time.time() < end and done_k(donefile) is None:
        try:
            with open(path, "r+b") as f:
                f.write(bytes([250]) * SCHUNK_CHUNK)
            landed += 1
        except OSError as e:
            if e.errno == 16:  # EBUSY
                refused += 1
            else:
                bad.append(str(e))
        time.sleep(random.random() * 0.01)
    if bad:
        print("not ok mountclash: %s" % "; ".join(bad[:3]))
    else:
        print("ok mountclash: %d commits landed, %d refused with EBUSY" % (landed, refused))


def cmd_checkschunk(frame):
    """the SChunk after a clash: python-blosc2 opens it, every chunk is one
    value (a state of pyschunk, or b2fs's 250)"""
    import blosc2

    try:
        s = blosc2.open(frame, mode="r", locking=True)
        for i in range(s.nchunks):
            c = np.frombuffer(s.decompress_chunk(i), np.uint8)
            r = check_items(c, None, "chunk %d" % i)
            if r:
                raise ValueError(r)
        print("ok checkschunk: %d chunks, each whole" % s.nchunks)
    except Exception as e:  # noqa: BLE001 - any failure is a finding
        print("not ok checkschunk: %s: %s" % (type(e).__name__, e))


def whole_state(data):
    """why bytes are not exactly one state k (all bytes k % 251, nbytes_of(k)
    of them), or None"""
    if not data:
        return "no bytes"
    v = data[0]
    ks = [k for k in range(v, 100000, 251) if nbytes_of(k) == len(data)]
    if data.count(v) != len(data) or not ks:
        return "%d bytes, values %s: no state" % (len(data), sorted(set(data))[:4])
    return None


def cmd_npywrite(path, seconds, donefile):
    """numpy.save of state k through the mount (a new array each time: the
    .npy view of a b2nd frame b2fs writes)"""
    writer_loop(seconds, donefile, lambda k: np.save(path, np.full(size_of(k), k, np.int64)),
                "npywrite", "arrays saved through the mount")


def cmd_pyarrayread(frame, seconds, donefile):
    """python-blosc2 (locking=True) reads the array b2fs writes, whole under
    holding_lock(): exactly one state, python-blosc2's dtype.  numpy.save
    truncates the .npy view to 0, and b2fs then makes the array anew, a new
    file renamed over the old one: the name must never be missing, and an
    NDArray opened before cannot refresh into it (opened again, counted
    apart)"""
    import blosc2

    n = {"opens": 0, "bad": 0, "absent": 0, "renewed": 0}
    why = []

    def once():
        try:
            a = blosc2.open(frame, mode="r", locking=True)
            with a.holding_lock():
                a.refresh()
                v = a[:]
            n["opens"] += 1
            r = check_items(v, None, "array")
            if r is None and (v.dtype != np.int64 or (v.size and len(v) != size_of(int(v[0])))):
                r = "%d items of %s, state %s" % (len(v), v.dtype, v[:1])
            if r:
                why.append(r)
                n["bad"] += 1
        except FileNotFoundError:
            n["absent"] += 1
        except RuntimeError as e:
            # numpy.save makes a new array, a new file renamed over the old
            # one: an NDArray opened before it cannot refresh into an array
            # of another shape and chunking; it must be opened again (as
            # with python-blosc2's own mode="w" rewrites).
            if "refreshing" not in str(e):
                why.append("%s: %s" % (type(e).__name__, e))
                n["bad"] += 1
            n["renewed"] += 1
        except Exception as e:  # noqa: BLE001 - any failure is a finding
            why.append("%s: %s" % (type(e).__name__, e))
            n["bad"] += 1
            time.sleep(0.01)

    final = reader_loop(frame, seconds, donefile, once)
    if final is None:
        print("not ok pyarrayread: the writer never finished")
        return
    v = blosc2.open(frame, mode="r", locking=True)[:]
    if len(v) != size_of(final) or not (v == final).all():
        why.append("after the writer: %d items, wants state %d" % (len(v), final))
        n["bad"] += 1
    if n["absent"]:
        why.append("the array was missing %d times" % n["absent"])
        n["bad"] += 1
    if n["bad"]:
        print("not ok pyarrayread: %d bad in %d reads: %s" % (n["bad"], n["opens"],
                                                              "; ".join(why[:4])))
    else:
        print("ok pyarrayread: %d whole-array reads under holding_lock, each one state, the "
              "name never missing (%d opened again: made anew); last state %d"
              % (n["opens"], n["renewed"], final))


def cmd_holdlock(frame, seconds, held, released):
    import blosc2

    s = blosc2.SChunk(chunksize=SCHUNK_CHUNK, urlpath=frame, mode="w", locking=True)
    s.append_data(bytes([7]) * SCHUNK_CHUNK)
    with s.holding_lock():
        open(held, "w").close()
        time.sleep(seconds)
    open(released, "w").close()
    print("ok holdlock: held %.1f s" % seconds)


def cmd_pyread(frame, seconds, donefile):
    """python-blosc2 reads with locking: the whole frame in one
    holding_lock() bracket (one state, exactly), and single chunks outside it
    (each chunk whole, read by get_chunk, one locked call; python-blosc2's
    own call sequence, number of chunks then a chunk, is not atomic, so its
    errors there are counted apart)"""
    import blosc2

    n = {"chunks": 0, "opens": 0, "bad": 0, "races": 0}
    why = []

    def once():
        try:
            s = blosc2.open(frame, mode="r", locking=True)
            n["opens"] += 1
        except Exception as e:  # noqa: BLE001 - any failure is a finding
            why.append("open: %s: %s" % (type(e).__name__, e))
            n["bad"] += 1
            return
        try:
            with s.holding_lock():
                data = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
            r = whole_state(data)
            if r:
                why.append("holding_lock read: " + r)
                n["bad"] += 1
        except Exception as e:  # noqa: BLE001
            why.append("holding_lock read: %s: %s" % (type(e).__name__, e))
            n["bad"] += 1
        for i in random.sample(range(s.nchunks), min(3, s.nchunks)):
            try:
                # One locked call, then a decode in memory: decompress_chunk
                # is two (the chunk's size, then its decode into a buffer of
                # that size), and a commit between them gives the old size
                # only partly decoded into (python-blosc2's own race).
                c = np.frombuffer(blosc2.decompress2(s.get_chunk(i)), np.uint8)
            except Exception:  # noqa: BLE001 - the chunk left with a new state
                n["races"] += 1
                continue
            n["chunks"] += 1
            r = check_items(c, None, "chunk %d" % i)
            if r:
                why.append(r)
                n["bad"] += 1

    final = reader_loop(frame, seconds, donefile, once)
    chunks, opens, races = n["chunks"], n["opens"], n["races"]
    bad = n["bad"]
    if final is None:
        print("not ok pyread: the writer never finished")
        return
    s = blosc2.open(frame, mode="r", locking=True)
    data = b"".join(s.decompress_chunk(i) for i in range(s.nchunks))
    if data != bytes([final % 251]) * nbytes_of(final):
        why.append("after the writer: %d bytes, wants state %d (%d bytes)" % (
            len(data), final, nbytes_of(final)))
        bad += 1
    if bad:
        print("not ok pyread: %d bad in %d opens, %d chunks: %s" % (
            bad, opens, chunks, "; ".join(why[:4])))
    else:
        print("ok pyread: %d whole-frame reads under holding_lock, %d single chunks (%d "
              "left behind by python-blosc2's own unlocked sequence), all whole; last state %d"
              % (opens, chunks, races, final))


def cmd_plainread(path, seconds, donefile, timeout, tag, size_of_k=None):
    """pages of a plain file written through another mount: each page one
    state's bytes; after the writer and the attribute timeout, the last
    state exactly"""
    reads = bad = 0
    why = []
    wait_for(path)
    end = time.time() + seconds + 60
    final = None
    while time.time() < end:
        final = done_k(donefile)
        if final is not None:
            break
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                for _ in range(8):
                    page = random.randrange(0, max(1, size // PAGE + 1))
                    data = os.pread(f.fileno(), PAGE, page * PAGE)
                    reads += 1
                    if data and data.count(data[0]) != len(data):
                        why.append("page %d mixes %s" % (page, sorted(set(data))[:4]))
                        bad += 1
        except OSError as e:
            why.append(str(e))
            bad += 1
    if final is None:
        print("not ok %s: the writer never finished" % tag)
        return
    time.sleep(timeout + 0.5)
    data = open(path, "rb").read()
    if data != bytes([final % 251]) * (size_of_k or nbytes_of)(final):
        why.append("after the writer: %d bytes of %s, wants state %d" % (
            len(data), sorted(set(data))[:3], final))
        bad += 1
    if bad:
        print("not ok %s: %d bad of %d page reads: %s" % (tag, bad, reads, "; ".join(why[:4])))
    else:
        print("ok %s: %d page reads, all whole; the last state (%d) seen within the "
              "attribute timeout" % (tag, reads, final))


def cmd_busy(first, second, log, frame):
    """a second writer of a frame, through another mount, gets EBUSY and its
    daemon logs one line naming the frame and the holder"""
    import errno

    a = os.open(first, os.O_WRONLY)
    try:
        os.write(a, b"x")
        try:
            b = os.open(second, os.O_WRONLY)
            os.close(b)
            print("not ok second_writer: the second open for writing succeeded")
            return
        except OSError as e:
            if e.errno != errno.EBUSY:
                print("not ok second_writer: %s (wants EBUSY)" % e)
                return
        time.sleep(0.2)
        lines = [x for x in open(log, errors="replace") if frame in x and "held by pid" in x]
        if len(lines) != 1:
            print("not ok second_writer: EBUSY, but %d log lines naming %s and the holder"
                  % (len(lines), frame))
        else:
            print("ok second_writer: EBUSY; log: %s" % lines[0].strip())
    finally:
        os.close(a)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "pywrite":
        cmd_pywrite(args[0], float(args[1]), args[2])
    elif cmd == "mountread":
        cmd_mountread(args[0], float(args[1]), args[2], float(args[3]), args[4])
    elif cmd == "npyread":
        cmd_mountread(args[0], float(args[1]), args[2], float(args[3]), args[4], tag=args[5])
    elif cmd == "mountwrite":
        cmd_mountwrite(args[0], float(args[1]), args[2])
    elif cmd == "mountclash":
        cmd_mountclash(args[0], float(args[1]), args[2])
    elif cmd == "checkschunk":
        cmd_checkschunk(args[0])
    elif cmd == "plainread":
        cmd_plainread(args[0], float(args[1]), args[2], float(args[3]), args[4])
    elif cmd == "schunkread":
        cmd_plainread(args[0], float(args[1]), args[2], float(args[3]), args[4],
                      schunk_nbytes_of)
    elif cmd == "pyschunk":
        cmd_pyschunk(args[0], float(args[1]), args[2])
    elif cmd == "busy":
        cmd_busy(args[0], args[1], args[2], args[3])
    elif cmd == "npywrite":
        cmd_npywrite(args[0], float(args[1]), args[2])
    elif cmd == "pyarrayread":
        cmd_pyarrayread(args[0], float(args[1]), args[2])
    elif cmd == "holdlock":
        cmd_holdlock(args[0], float(args[1]), args[2], args[3])
    elif cmd == "pyread":
        cmd_pyread(args[0], float(args[1]), args[2])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
