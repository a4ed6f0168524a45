/* fileio.c - write-side I/O wrappers with errno mapping, and (only with
 * -DB2_FAULT_INJECTION) the fault and recorder hooks (see fileio.h). */
#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/openat2.h>
#endif

#include <pthread.h>

#include "b2_error.h"
#include "common/pool.h"
#include "common/util.h"

/* ---- fault injection and recording (test flavour only) ------------------ */
#ifdef B2_FAULT_INJECTION
#include <pthread.h>

static pthread_mutex_t fi_mu = PTHREAD_MUTEX_INITIALIZER;
static int fi_env_done;
static int fi_op = -1;
static long fi_nth;
static int fi_err;
static int fi_fired;
static long fi_count[B2_IO_NOPS];
static b2_io_recorder fi_rec;
static void *fi_rec_ctx;

static const char *const op_names[B2_IO_NOPS] = {
    "open", "pwrite", "fsync", "fdatasync", "rename",
    "link", "unlink", "ftruncate", "mkdir"};

/* B2FS_FAULT=op:nth:ERR */
static void fi_env_locked(void) {
  if (fi_env_done) return;
  fi_env_done = 1;
  const char *e = getenv("B2FS_FAULT");
  if (!e || !*e) return;
  char op[32], err[32];
  long nth;
  if (sscanf(e, "%31[a-z]:%ld:%31s", op, &nth, err) != 3) return;
  for (int k = 0; k < B2_IO_NOPS; k++) {
    if (strcmp(op, op_names[k]) != 0) continue;
    fi_op = k;
    fi_nth = nth;
    fi_err = strcmp(err, "ENOSPC") == 0   ? ENOSPC
             : strcmp(err, "SHORT") == 0  ? B2_IO_SHORT
                                          : EIO;
  }
}

void b2_io_fault_set(int op, long nth, int err) {
  pthread_mutex_lock(&fi_mu);
  fi_env_done = 1;
  fi_op = nth > 0 ? op : -1;
  fi_nth = nth;
  fi_err = err;
  fi_fired = 0;
  memset(fi_count, 0, sizeof fi_count);
  pthread_mutex_unlock(&fi_mu);
}

long b2_io_count(int op) {
  pthread_mutex_lock(&fi_mu);
  long n = op >= 0 && op < B2_IO_NOPS ? fi_count[op] : 0;
  pthread_mutex_unlock(&fi_mu);
  return n;
}

void b2_io_count_reset(void) {
  pthread_mutex_lock(&fi_mu);
  memset(fi_count, 0, sizeof fi_count);
  pthread_mutex_unlock(&fi_mu);
}

int b2_io_fault_fired(void) {
  pthread_mutex_lock(&fi_mu);
  int f = fi_fired;
  pthread_mutex_unlock(&fi_mu);
  return f;
}

void b2_io_record(b2_io_recorder fn, void *ctx) {
  pthread_mutex_lock(&fi_mu);
  fi_rec = fn;
  fi_rec_ctx = ctx;
  pthread_mutex_unlock(&fi_mu);
}

/* Count a call of op; returns the errno to fake (or B2_IO_SHORT), else 0. */
static int fi_check(int op) {
  pthread_mutex_lock(&fi_mu);
  fi_env_locked();
  long n = ++fi_count[op];
  int err = 0;
  if (op == fi_op && n == fi_nth) {
    err = fi_err;
    fi_fired = 1;
  }
  pthread_mutex_unlock(&fi_mu);
  return err;
}

static void fi_emit(const b2_io_event *ev) {
  pthread_mutex_lock(&fi_mu);
  b2_io_recorder fn = fi_rec;
  void *ctx = fi_rec_ctx;
  pthread_mutex_unlock(&fi_mu);
  if (fn) fn(ctx, ev);
}

#define FAULT(op) fi_check(op)
/* Event with every descriptor -1 except those given. */
static b2_io_event fi_event(int op) {
  b2_io_event ev;
  memset(&ev, 0, sizeof ev);
  ev.op = op;
  ev.fd = ev.dirfd = ev.dirfd2 = -1;
  return ev;
}
#define EMIT(OP, ...)                         \
  do {                                        \
    b2_io_event ev_ = fi_event(OP);           \
    __VA_ARGS__;                              \
    fi_emit(&ev_);                            \
  } while (0)
#else
#define FAULT(op) 0
#define EMIT(OP, ...) ((void)0)
#endif

/* ---- wrappers ----------------------------------------------------------- */

static int fail_errno(int e, const char *what, const char *name) {
  return b2_fail(b2_from_errno(e), "%s %s: %s", what, name ? name : "",
                 strerror(e));
}

int b2_io_openat(int dirfd, const char *name, int flags, mode_t mode) {
  int e = FAULT(B2_IO_OPEN);
  if (e > 0) return fail_errno(e, "open", name);
  int fd;
  do {
    fd = dirfd == AT_FDCWD ? b2_io_open_path(name, flags | O_CLOEXEC, mode)
                           : openat(dirfd, name, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return fail_errno(errno, "open", name);
  EMIT(B2_IO_OPEN, ev_.fd = fd; ev_.dirfd = dirfd; ev_.name = name;
       ev_.flags = flags);
  return fd;
}

int b2_io_pwrite(int fd, const void *buf, size_t n, int64_t off) {
  if (off < 0)
    return b2_fail(B2_E_RANGE, "write at negative offset %lld",
                   (long long)off);
  const uint8_t *p = buf;
  size_t done = 0;
  size_t stop = n; /* a faked short write stops here, then fails */
  int e = FAULT(B2_IO_PWRITE);
  if (e > 0)
    return b2_fail(b2_from_errno(e), "write of %zu bytes at %lld: %s", n,
                   (long long)off, strerror(e));
#ifdef B2_FAULT_INJECTION
  if (e == B2_IO_SHORT) stop = n / 2;
#endif
  while (done < stop) {
    size_t chunk = stop - done;
    if (chunk > (size_t)1 << 30) chunk = (size_t)1 << 30;
    ssize_t w = pwrite(fd, p + done, chunk, (off_t)(off + (int64_t)done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return b2_fail(b2_from_errno(errno), "write of %zu bytes at %lld: %s",
                     n, (long long)(off + (int64_t)done), strerror(errno));
    }
    if (w == 0)
      return b2_fail(B2_E_IO, "write of %zu bytes at %lld made no progress",
                     n, (long long)(off + (int64_t)done));
    done += (size_t)w;
  }
  EMIT(B2_IO_PWRITE, ev_.fd = fd; ev_.off = off; ev_.data = buf;
       ev_.len = done);
  if (done < n)
    return b2_fail(B2_E_NOSPC, "write of %zu bytes at %lld: only %zu "
                   "written (injected)", n, (long long)off, done);
  return 0;
}

int b2_io_fsync(int fd) {
  int e = FAULT(B2_IO_FSYNC);
  if (e > 0) {
    EMIT(B2_IO_FSYNC, ev_.fd = fd; ev_.failed = 1);
    return fail_errno(e, "fsync", NULL);
  }
  int rc;
  do {
    rc = fsync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return fail_errno(errno, "fsync", NULL);
  EMIT(B2_IO_FSYNC, ev_.fd = fd);
  return 0;
}

int b2_io_fdatasync(int fd) {
  int e = FAULT(B2_IO_FDATASYNC);
  if (e > 0) {
    EMIT(B2_IO_FDATASYNC, ev_.fd = fd; ev_.failed = 1);
    return fail_errno(e, "fdatasync", NULL);
  }
  int rc;
  do {
    rc = fdatasync(fd);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return fail_errno(errno, "fdatasync", NULL);
  EMIT(B2_IO_FDATASYNC, ev_.fd = fd);
  return 0;
}

int b2_io_ftruncate(int fd, int64_t len) {
  int e = FAULT(B2_IO_FTRUNCATE);
  if (e > 0) return fail_errno(e, "ftruncate", NULL);
  int rc;
  do {
    rc = ftruncate(fd, (off_t)len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) return fail_errno(errno, "ftruncate", NULL);
  EMIT(B2_IO_FTRUNCATE, ev_.fd = fd; ev_.off = len);
  return 0;
}

static int do_link(int olddir, const char *oldname, int newdir,
                   const char *newname) {
  int e = FAULT(B2_IO_LINK);
  if (e > 0) return fail_errno(e, "link", newname);
  if (linkat(olddir, oldname, newdir, newname, 0) != 0)
    return fail_errno(errno, "link", newname);
  EMIT(B2_IO_LINK, ev_.dirfd = olddir; ev_.name = oldname;
       ev_.dirfd2 = newdir; ev_.name2 = newname);
  return 0;
}

int b2_io_renameat(int olddir, const char *oldname, int newdir,
                   const char *newname, int noreplace) {
  int e = FAULT(B2_IO_RENAME);
  if (e > 0) return fail_errno(e, "rename to", newname);
  int rc;
  if (noreplace) {
    rc = renameat2(olddir, oldname, newdir, newname, RENAME_NOREPLACE);
    if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
      /* No RENAME_NOREPLACE here: a file can still be placed without
       * replacing by linking it, then dropping the old name. */
      struct stat st;
      if (fstatat(olddir, oldname, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISREG(st.st_mode)) {
        rc = do_link(olddir, oldname, newdir, newname);
        if (rc < 0) return rc;
        return b2_io_unlinkat(olddir, oldname, 0);
      }
      if (fstatat(newdir, newname, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return b2_fail(B2_E_EXIST, "rename to %s: it exists", newname);
      rc = renameat(olddir, oldname, newdir, newname);
    }
  } else {
    rc = renameat(olddir, oldname, newdir, newname);
  }
  if (rc != 0) return fail_errno(errno, "rename to", newname);
  EMIT(B2_IO_RENAME, ev_.dirfd = olddir; ev_.name = oldname;
       ev_.dirfd2 = newdir; ev_.name2 = newname);
  return 0;
}

int b2_io_unlinkat(int dirfd, const char *name, int flags) {
  int e = FAULT(B2_IO_UNLINK);
  if (e > 0) return fail_errno(e, "unlink", name);
  if (unlinkat(dirfd, name, flags) != 0) return fail_errno(errno, "unlink",
                                                           name);
  EMIT(B2_IO_UNLINK, ev_.dirfd = dirfd; ev_.name = name; ev_.flags = flags);
  return 0;
}

int b2_io_mkdirat(int dirfd, const char *name, mode_t mode) {
  int e = FAULT(B2_IO_MKDIR);
  if (e > 0) return fail_errno(e, "mkdir", name);
  if (mkdirat(dirfd, name, mode) != 0) return fail_errno(errno, "mkdir",
                                                         name);
  EMIT(B2_IO_MKDIR, ev_.dirfd = dirfd; ev_.name = name);
  return 0;
}

void b2_io_close(int fd) {
  if (fd >= 0) (void)close(fd); /* Linux closes even on EINTR */
}

static atomic_int strict_paths;

void b2_io_set_strict_paths(int on) { atomic_store(&strict_paths, on); }
int b2_io_strict_paths(void) { return atomic_load(&strict_paths); }

int b2_io_open_path(const char *path, int flags, mode_t mode) {
  if (!atomic_load(&strict_paths) || strncmp(path, "/proc/self/fd/", 14) == 0)
    return open(path, flags, mode);
#if defined(__linux__) && defined(SYS_openat2)
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = (uint64_t)flags;
  how.mode = (flags & (O_CREAT | O_TMPFILE)) ? (uint64_t)mode : 0;
  how.resolve = RESOLVE_NO_SYMLINKS;
  long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0 || errno != ENOSYS) return (int)fd;
#endif
  return open(path, flags | O_NOFOLLOW, mode); /* old kernel: last component */
}

int b2_io_open_noatime(int dirfd, const char *name, int flags) {
  for (int k = 0; k < 2; k++) {
    int fl = k == 0 ? flags | O_NOATIME : flags;
    int fd = dirfd < 0 ? b2_io_open_path(name, fl, 0) : openat(dirfd, name, fl);
    if (fd >= 0 || k == 1 || errno != EPERM) return fd;
  }
  return -1;
}

int b2_io_open_parent(const char *path, const char **base) {
  /* Ignore trailing slashes ("dir/" names dir). */
  size_t len = strlen(path);
  while (len > 1 && path[len - 1] == '/') len--;
  const char *slash = NULL;
  for (size_t k = 0; k < len; k++)
    if (path[k] == '/') slash = path + k;
  char dir[PATH_MAX];
  if (!slash) {
    strcpy(dir, ".");
    *base = path;
  } else {
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1; /* "/name" */
    if (n >= sizeof dir)
      return b2_fail(B2_E_LIMIT, "path of %zu bytes is too long", n);
    memcpy(dir, path, n);
    dir[n] = '\0';
    *base = slash + 1;
  }
  int fd = b2_io_open_path(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
  if (fd < 0) return fail_errno(errno, "open directory", dir);
  return fd;
}

/* ---- reads ---------------------------------------------------------------- */

_Atomic long b2_io_par_shared;

struct pread_part {
  int fd;
  uint8_t *buf;
  size_t n;
  int64_t off;
  long linger_us;
  pthread_t caller;    /* the thread that queued it (no linger there) */
  int rc;
  char detail[256];    /* b2_last_detail of a failure, on its thread */
};

static void pread_job(void *arg) {
  struct pread_part *h = arg;
  h->rc = b2_io_pread(h->fd, h->buf, h->n, h->off);
  if (h->rc < 0) snprintf(h->detail, sizeof h->detail, "%s", b2_last_detail());
  if (!pthread_equal(pthread_self(), h->caller)) b2_pool_linger(h->linger_us);
}

int b2_io_pread_par(int fd, void *buf, size_t n, int64_t off, struct b2_pool *pool,
                    long linger_us) {
  if (!pool || n < 2 * B2_IO_PAR_PIECE || off < 0) return b2_io_pread(fd, buf, n, off);
  uint8_t *p = buf;
  size_t done = 0, end = n;
  struct pread_part h = {.fd = fd, .linger_us = linger_us, .caller = pthread_self()};
  b2_pool_group g = B2_POOL_GROUP_INIT;
  int shared = 0, rc = 0;
  /* In pieces until the worker polls; then the rest of this thread's part
   * in one read. */
  while (done < end && rc == 0) {
    size_t left = end - done;
    if (!shared && left >= 2 * B2_IO_PAR_PIECE && b2_pool_polling(pool) > 0) {
      /* The worker's part starts on a page of the file. */
      int64_t at = (off + (int64_t)(done + left / 2)) & ~(int64_t)4095;
      size_t split = (size_t)(at - off);
      if (split > done && split < end) {
        h.buf = p + split;
        h.n = end - split;
        h.off = at;
        shared = b2_pool_try_submit(pool, pread_job, &h, &g) == 0;
        if (shared) {
          end = split;
          atomic_fetch_add(&b2_io_par_shared, 1);
        }
      }
    }
    size_t k = shared ? end - done : B2_MIN(B2_IO_PAR_PIECE, end - done);
    rc = b2_io_pread(fd, p + done, k, off + (int64_t)done);
    done += k;
  }
  if (shared) b2_pool_wait_poll(pool, &g, 300); /* runs it here if no worker took it */
  if (rc < 0) return rc;
  if (shared && h.rc < 0) return b2_fail(h.rc, "%s", h.detail);
  return 0;
}

int b2_io_pread(int fd, void *buf, size_t n, int64_t off) {
  uint8_t *p = buf;
  size_t done = 0;
  if (off < 0) return b2_fail(B2_E_RANGE, "read at negative offset %lld",
                              (long long)off);
  while (done < n) {
    ssize_t got = pread(fd, p + done, n - done, (off_t)(off + (int64_t)done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return b2_fail(b2_from_errno(errno), "read of %zu bytes at %lld: %s", n,
                     (long long)off, strerror(errno));
    }
    if (got == 0)
      return b2_fail(B2_E_TRUNCATED, "file ends at %lld, inside the %zu "
                     "bytes read at %lld", (long long)(off + (int64_t)done), n,
                     (long long)off);
    done += (size_t)got;
  }
  return 0;
}
