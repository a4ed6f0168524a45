/*
 * fileio.h - the write-side I/O shim of the engine.
 *
 * Every call that changes files (create/open for writing, pwrite, fsync,
 * fdatasync, rename, link, unlink, ftruncate, mkdir) goes through these
 * wrappers.  They retry EINTR and short writes, and turn errno into a
 * B2_E_* code with a one-line detail (the operation and the name or
 * offset).  Reads are not wrapped, except b2_io_pread, which reads
 * exactly n bytes.
 *
 * Built with -DB2_FAULT_INJECTION (a test-only flavour, never a
 * production build), two test hooks exist:
 *   - a fault: the nth call of one operation fails with an errno, or (for
 *     pwrite) writes only the first half of its bytes and then fails with
 *     ENOSPC.  Set with b2_io_fault_set() or the environment variable
 *     B2FS_FAULT=op:nth:ERR (op one of open pwrite fsync fdatasync rename
 *     link unlink ftruncate mkdir; ERR one of EIO ENOSPC SHORT), read at
 *     the first wrapped call;
 *   - a recorder: a callback that sees every write, sync, rename, link,
 *     unlink, truncate and mkdir in order (with the bytes of each write),
 *     for power-loss replay tests.
 */
#ifndef B2_FILEIO_H
#define B2_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Open `name` relative to `dirfd` (AT_FDCWD for a path).  Returns the
 * descriptor or a negative B2_E_* code (EEXIST -> B2_E_EXIST...). */
int b2_io_openat(int dirfd, const char *name, int flags, mode_t mode);

/* Write all n bytes at off (retrying short writes and EINTR). */
int b2_io_pwrite(int fd, const void *buf, size_t n, int64_t off);

/* pread exactly n bytes (retrying short reads and EINTR); B2_E_TRUNCATED
 * if the file ends first, the errno's code on an error. */
int b2_io_pread(int fd, void *buf, size_t n, int64_t off);

/* b2_io_pread of a large read shared with a worker of `pool` woken
 * beforehand (b2_pool_prewake): the read goes in pieces of
 * B2_IO_PAR_PIECE bytes, and once that worker polls for a job, it reads
 * the second half of what is left, then polls on for `linger_us`
 * microseconds for the job the caller queues next (the decode of what was
 * read).  Copying from the page cache goes at one core's pace, so the
 * worker's share comes off the time the read takes.  With pool NULL, or
 * no worker polling before the end, a plain b2_io_pread.  The same
 * results and error codes. */
#define B2_IO_PAR_PIECE ((size_t)64 << 10)
extern _Atomic long b2_io_par_shared; /* reads shared so far (for tests) */
struct b2_pool;
int b2_io_pread_par(int fd, void *buf, size_t n, int64_t off, struct b2_pool *pool,
                    long linger_us);

int b2_io_fsync(int fd);
int b2_io_fdatasync(int fd);
int b2_io_ftruncate(int fd, int64_t len);

/* Rename; with noreplace set it fails with B2_E_EXIST when `newname`
 * exists (renameat2 RENAME_NOREPLACE, or link + unlink for a file on a
 * file system without it). */
int b2_io_renameat(int olddir, const char *oldname, int newdir,
                   const char *newname, int noreplace);
int b2_io_unlinkat(int dirfd, const char *name, int flags);
int b2_io_mkdirat(int dirfd, const char *name, mode_t mode);

/* close() that ignores EINTR; never faulted. */
void b2_io_close(int fd);

/* Open the directory holding `path` (for fsync after a rename); *base
 * gets a pointer to the last component inside path. */
int b2_io_open_parent(const char *path, const char **base);

/* Strict path resolution, for a daemon that hands the engine canonical
 * paths of a tree other users can change: when on, every path the engine
 * resolves (except /proc/self/fd/N magic links, anchored to an inode) must
 * contain no symbolic link, so a directory swapped for a link cannot lead
 * the engine outside the tree (openat2 RESOLVE_NO_SYMLINKS).  Off by
 * default (b2f follows the user's links).  open(2)-like: an fd or -1 with
 * errno. */
void b2_io_set_strict_paths(int on);
int b2_io_strict_paths(void);
int b2_io_open_path(const char *path, int flags, mode_t mode);

/* Open `name` of dirfd (negative: `name` is a path, b2_io_open_path) to look at
 * it, not to read it for a user: with O_NOATIME where the caller may (the
 * file's owner, or CAP_FOWNER), else (EPERM) as any reader.  open(2)-like:
 * an fd or -1 with errno; never faulted. */
int b2_io_open_noatime(int dirfd, const char *name, int flags);

#ifdef B2_FAULT_INJECTION
enum b2_io_op {
  B2_IO_OPEN = 0,
  B2_IO_PWRITE,
  B2_IO_FSYNC,
  B2_IO_FDATASYNC,
  B2_IO_RENAME,
  B2_IO_LINK,
  B2_IO_UNLINK,
  B2_IO_FTRUNCATE,
  B2_IO_MKDIR,
  B2_IO_NOPS
};
/* `err` value that makes a pwrite write half its bytes, then fail. */
#define B2_IO_SHORT (-1)

/* Make the nth (1-based) call of `op` from now on fail with errno `err`
 * (or B2_IO_SHORT).  nth 0 clears the fault.  Resets the call counters of
 * every op. */
void b2_io_fault_set(int op, long nth, int err);
/* Calls of `op` since the last b2_io_fault_set / b2_io_count_reset. */
long b2_io_count(int op);
void b2_io_count_reset(void);
/* Whether the armed fault has fired. */
int b2_io_fault_fired(void);

typedef struct b2_io_event {
  int op;               /* B2_IO_* */
  int fd;               /* pwrite, fsync, fdatasync, ftruncate; open: the
                           new descriptor */
  int dirfd;            /* open, rename (old), link, unlink, mkdir */
  int dirfd2;           /* rename (new) */
  const char *name;     /* open, rename (old), unlink, mkdir */
  const char *name2;    /* rename (new) */
  int64_t off;          /* pwrite offset, ftruncate length */
  const void *data;     /* pwrite bytes */
  size_t len;           /* pwrite length */
  int flags;            /* open flags */
  int failed;           /* fsync, fdatasync: a faked failure (the kernel
                           may then have dropped the file's unsynced
                           writes for good) */
} b2_io_event;
typedef void (*b2_io_recorder)(void *ctx, const b2_io_event *ev);
/* Install (or with NULL remove) the recorder; called after each
 * successful operation, and after each faked failure of a sync, from the
 * calling thread. */
void b2_io_record(b2_io_recorder fn, void *ctx);
#endif

#endif /* B2_FILEIO_H */
