"""life_lib.py - what the differential exercisers (npy_life.py,
tree_life.py) share: one call made on the mount and on a plain
directory, and a write at an offset."""
import os


def both(roots, fn):
    """fn(root) for each root: [None or errno, ...]."""
    out = []
    for root in roots:
        try:
            fn(root)
            out.append(None)
        except OSError as e:
            out.append(e.errno)
    return out


def pwrite(path, data, off, flags=os.O_WRONLY):
    fd = os.open(path, flags)
    try:
        os.pwrite(fd, data, off)
    finally:
        os.close(fd)
