/*
 * lock.c - sharing frames with other processes through the reference
 * library's `.b2lock` sidecar (c-blosc2 3.2+, python-blosc2 with
 * locking=True or BLOSC_LOCKING=1).
 *
 * The sidecar is `<file>.b2lock` beside a contiguous frame and `.b2lock`
 * inside a sparse frame's directory.  Access is serialised with flock on
 * it: shared while a process reads a frame's header, index and chunks,
 * exclusive while it changes the frame.  Bytes 8-15 hold a generation
 * counter (host byte order, little-endian here; a short file reads as 0)
 * that every exclusive locker bumps when it takes the lock, so a reader
 * notices another process's changes through the counter even when size
 * and times stay the same.
 *
 * b2fs takes part when the sidecar exists (b2_frame_set_locking AUTO, the
 * default; also when BLOSC_LOCKING is set to anything but "" or "0" the
 * sidecar is created as the reference library does) or always (ON:
 * created when missing), never with OFF.  A read-only frame:
 *   - is loaded (header, trailer, index) under the shared lock, and
 *     remembers the counter it saw;
 *   - reads each stored chunk under the shared lock and checks the counter
 *     first: another value means the bytes may have moved (the reference
 *     library rewrites frames in place), and the read fails with
 *     B2_E_STALE, for the caller to open the frame again.
 * A writable frame holds the exclusive lock from b2_frame_open_rw (before
 * it checks the frame did not change since it was loaded, trims what lies
 * past the committed end, and stages chunks there) until it is closed,
 * and bumps the counter then and at every commit and compaction.  Taking
 * it only around commits is not enough: another writer appending between
 * two commits (the reference library writes its new chunk where the index
 * was, then a new index and trailer past the old end) would meet the
 * chunks staged past that end.  Other lockers wait for the session.
 * Between commits others read and lock as usual.
 *
 * flock belongs to the open file description, so the shared lock of a
 * read-only frame is taken once for all its threads (a count under a
 * mutex) and released by the last of them.  It conflicts with this
 * process's own exclusive lock too (another description): readers of a
 * frame this process is writing skip the lock instead (b2fs's own writer
 * never moves committed bytes), and they never block on it, so a reader
 * (a pool worker, a FUSE thread the writer's client waits for) cannot
 * stall the write session it waits behind: the shared lock is tried
 * without blocking and, while another process holds the exclusive one,
 * tried again every millisecond.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "frame/frame_impl.h"

struct b2_frame_lk {
  int fd;              /* the sidecar */
  dev_t dev;           /* its identity, for the registry of exclusive locks */
  ino_t ino;
  pthread_mutex_t mu;  /* `shared` */
  int shared;          /* threads inside a shared section */
  uint64_t gen;        /* counter of the state this frame describes */
  int writer;          /* a writable frame: holds the exclusive lock */
};

static atomic_int locking_mode = B2_LOCKING_AUTO;

/* Sidecars this process holds exclusively (frames open for writing). */
static pthread_mutex_t held_mu = PTHREAD_MUTEX_INITIALIZER;
static struct held_id {
  dev_t dev;
  ino_t ino;
} *held;
static int nheld, held_cap;

static int held_here(const b2_frame_lk *lk) {
  pthread_mutex_lock(&held_mu);
  int yes = 0;
  for (int k = 0; k < nheld && !yes; k++) yes = held[k].dev == lk->dev && held[k].ino == lk->ino;
  pthread_mutex_unlock(&held_mu);
  return yes;
}

/* Register (on) or forget a sidecar held exclusively; registering can
 * fail only for memory (then the write session is refused: readers of
 * this process would otherwise wait for it). */
static int set_held(const b2_frame_lk *lk, int on) {
  pthread_mutex_lock(&held_mu);
  if (on && nheld == held_cap) {
    int nc = held_cap ? held_cap * 2 : 16;
    struct held_id *nh = realloc(held, (size_t)nc * sizeof *nh);
    if (!nh) {
      pthread_mutex_unlock(&held_mu);
      return b2_fail(B2_E_NOMEM, "out of memory for the lock registry");
    }
    held = nh;
    held_cap = nc;
  }
  if (on) {
    held[nheld].dev = lk->dev;
    held[nheld].ino = lk->ino;
    nheld++;
  } else {
    for (int k = 0; k < nheld; k++)
      if (held[k].dev == lk->dev && held[k].ino == lk->ino) {
        held[k] = held[--nheld];
        break;
      }
  }
  pthread_mutex_unlock(&held_mu);
  return 0;
}

void b2_frame_set_locking(int mode) { atomic_store(&locking_mode, mode); }

/* The effective mode: AUTO turns into ON when BLOSC_LOCKING asks for it. */
static int effective_mode(void) {
  int m = atomic_load(&locking_mode);
  if (m == B2_LOCKING_AUTO) {
    const char *e = getenv("BLOSC_LOCKING");
    if (e && *e && strcmp(e, "0") != 0) m = B2_LOCKING_ON;
  }
  return m;
}

/* The frame file's real path: paths of the form /proc/self/fd/N (how the
 * daemon opens frames) name a descriptor, not a place for a sidecar.
 * B2_E_NOENT (no detail) when no name leads to that file any more. */
static int real_path(const char *path, char *out, size_t cap) {
  if (strncmp(path, "/proc/self/fd/", 14) != 0) {
    if (strlen(path) >= cap) return b2_fail(B2_E_LIMIT, "path too long for a lock file");
    strcpy(out, path);
    return 0;
  }
  ssize_t n = readlink(path, out, cap - 1);
  if ((n < 0 && errno == ENAMETOOLONG) || (n >= 0 && (size_t)n >= cap - 1))
    return b2_fail(B2_E_NAMETOOLONG, "%s: the frame's path is too long to find its lock file", path);
  if (n < 0)
    return b2_fail(B2_E_IO, "cannot resolve %s for its lock file", path);
  out[n] = 0;
  /* The name must still lead to the file: one removed meanwhile reads as
   * "PATH (deleted)", and no other program can open it to lock it. */
  struct stat a, b;
  if (stat(path, &a) == 0 &&
      (lstat(out, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino))
    return B2_E_NOENT;
  return 0;
}

/* Open the sidecar of the frame at `path` (a file, or with dirfd >= 0 a
 * sparse frame's directory): fd, or B2_E_NOENT when it does not exist and
 * `create` is 0. */
static int open_sidecar(const char *path, int dirfd, int create, int home, const char *hname) {
  int flags = O_RDWR | O_NONBLOCK | (create ? O_CREAT : 0);
  char p[PATH_MAX];
  int fd;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (dirfd >= 0) {
      fd = openat(dirfd, B2_FRAME_LOCK_FILE, flags | O_NOFOLLOW | O_CLOEXEC, 0666);
    } else if (home >= 0) { /* opened at a directory and name */
      if ((size_t)snprintf(p, sizeof p, "%s" B2_FRAME_LOCK_SUFFIX, hname) >= sizeof p)
        return b2_fail(B2_E_NAMETOOLONG, "lock file: name too long");
      fd = openat(home, p, flags | O_NOFOLLOW | O_CLOEXEC, 0666);
    } else {
      int rc = real_path(path, p, sizeof p - sizeof B2_FRAME_LOCK_SUFFIX);
      if (rc < 0) return rc;
      strcat(p, B2_FRAME_LOCK_SUFFIX);
      fd = b2_io_open_path(p, flags | O_CLOEXEC, 0666);
    }
    if (fd >= 0) return fd;
    if (errno == ENOENT && !create) return B2_E_NOENT;
    if (errno != EACCES && errno != EROFS) break;
    flags = O_RDONLY | O_NONBLOCK; /* a reader may lock what it cannot write */
  }
  return b2_fail(b2_from_errno(errno), "lock file: %s", strerror(errno));
}

static int do_flock(int fd, int op) {
  while (flock(fd, op) != 0) {
    if (errno == EINTR) continue;
    return b2_fail(b2_from_errno(errno), "lock file: flock: %s", strerror(errno));
  }
  return 0;
}

static uint64_t read_gen(int fd) {
  uint8_t b[8];
  uint64_t g = 0;
  if (pread(fd, b, sizeof b, 8) == (ssize_t)sizeof b) memcpy(&g, b, sizeof g);
  return g;
}

/* A write session's exclusive lock handed by a frame being remade to the
 * next frame this thread opens at the same sidecar (b2_frame_lk_hand_over):
 * no other locker gets in between. */
static _Thread_local b2_frame_lk *handed;

static void lk_release(b2_frame_lk *lk) {
  if (lk->writer) (void)set_held(lk, 0);
  close(lk->fd); /* releases what this description holds */
  pthread_mutex_destroy(&lk->mu);
  free(lk);
}

void b2_frame_lk_hand_over(b2_frame *from) {
  b2_frame_lk_drop_handed();
  if (from->lk && from->lk->writer) {
    handed = from->lk;
    from->lk = NULL;
  }
}

void b2_frame_lk_drop_handed(void) {
  if (handed) lk_release(handed);
  handed = NULL;
}

static int attach(b2_frame *f, const char *path, b2_frame_lk *h);

int b2_frame_lk_attach(b2_frame *f, const char *path) {
  b2_frame_lk *h = handed;
  handed = NULL;
  int rc = attach(f, path, h);
  if (h && f->lk != h) lk_release(h); /* another sidecar, or none: let go */
  return rc;
}

static int attach(b2_frame *f, const char *path, b2_frame_lk *h) {
  int mode = effective_mode();
  if (mode == B2_LOCKING_OFF || f->base != 0) return 0;
  int fd = open_sidecar(path, f->dirfd, mode == B2_LOCKING_ON, f->home_dir, f->home_name);
  if (fd == B2_E_NOENT) return 0;
  /* A reader through /proc/self/fd/N past PATH_MAX cannot find a sidecar
   * by name: read unlocked unless locking is asked for (writers open such
   * frames at their directory and name, and find theirs). */
  if (fd == B2_E_NAMETOOLONG && mode != B2_LOCKING_ON) return 0;
  if (fd < 0) return b2_context(fd, "%s", path);
  struct stat hs;
  if (h && fstat(fd, &hs) == 0 && hs.st_dev == h->dev && hs.st_ino == h->ino) {
    close(fd); /* the session's lock, held all along */
    f->lk = h;
    return 0;
  }
  b2_frame_lk *lk = calloc(1, sizeof *lk);
  if (!lk) {
    close(fd);
    return b2_fail(B2_E_NOMEM, "out of memory");
  }
  lk->fd = fd;
  struct stat st;
  if (fstat(fd, &st) == 0) {
    lk->dev = st.st_dev;
    lk->ino = st.st_ino;
  }
  pthread_mutex_init(&lk->mu, NULL);
  f->lk = lk;
  return 0;
}

void b2_frame_lk_free(b2_frame *f) {
  if (!f->lk) return;
  lk_release(f->lk);
  f->lk = NULL;
}

/* The shared lock without ever blocking on this process's own exclusive
 * lock: 1 taken, 0 skipped (this process writes the frame), or an error. */
static int shared_lock(b2_frame_lk *lk) {
  for (;;) {
    if (flock(lk->fd, LOCK_SH | LOCK_NB) == 0) return 1;
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK)
      return b2_fail(b2_from_errno(errno), "lock file: flock: %s", strerror(errno));
    if (held_here(lk)) return 0;
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

int b2_frame_lk_rd_begin(const b2_frame *f, int check) {
  b2_frame_lk *lk = f->lk;
  if (!lk || lk->writer) return 0;
  int rc = 0;
  pthread_mutex_lock(&lk->mu);
  if (lk->shared == 0) {
    rc = shared_lock(lk);
    if (rc == 0) { /* our own writer holds it: nothing moves under us */
      if (!check) lk->gen = read_gen(lk->fd); /* the state our writer made */
      pthread_mutex_unlock(&lk->mu);
      return 0;
    }
    if (rc == 1) rc = 0;
  }
  if (rc == 0) {
    lk->shared++;
    uint64_t g = read_gen(lk->fd);
    if (!check) {
      lk->gen = g;
    } else if (g != lk->gen) {
      rc = b2_fail(B2_E_STALE, "changed by another program (lock generation %llu, was %llu)",
                   (unsigned long long)g, (unsigned long long)lk->gen);
    }
  }
  pthread_mutex_unlock(&lk->mu);
  if (rc == B2_E_STALE) b2_frame_lk_rd_end(f, 1);
  return rc == 0 ? 1 : rc;
}

void b2_frame_lk_rd_end(const b2_frame *f, int locked) {
  b2_frame_lk *lk = f->lk;
  if (!lk || locked != 1) return;
  pthread_mutex_lock(&lk->mu);
  if (lk->shared > 0 && --lk->shared == 0) (void)flock(lk->fd, LOCK_UN);
  pthread_mutex_unlock(&lk->mu);
}

/* Bump the counter of sidecar fd (its exclusive lock held): other lockers
 * see a change.  *gen gets the new value. */
static int bump_fd(int fd, uint64_t *gen) {
  uint64_t g = read_gen(fd) + 1;
  uint8_t b[8];
  memcpy(b, &g, sizeof b);
  int rc = b2_io_pwrite(fd, b, sizeof b, 8);
  if (rc < 0) return b2_context(rc, "lock file: generation counter");
  *gen = g;
  return 0;
}

static int bump(b2_frame_lk *lk) { return bump_fd(lk->fd, &lk->gen); }

int b2_frame_lk_wr_begin(b2_frame *f) {
  b2_frame_lk *lk = f->lk;
  if (!lk) return 0;
  if (lk->writer) return bump(lk); /* handed over, held already */
  int rc = do_flock(lk->fd, LOCK_EX);
  if (rc == 0) rc = set_held(lk, 1);
  if (rc < 0) {
    (void)flock(lk->fd, LOCK_UN);
    return rc;
  }
  lk->writer = 1; /* held until the frame is closed */
  return bump(lk);
}

int b2_frame_lk_commit_begin(b2_frame *f) {
  b2_frame_lk *lk = f->lk;
  return lk && lk->writer ? bump(lk) : 0;
}

int b2_frame_lk_moved(const b2_frame *f) {
  return f->lk && read_gen(f->lk->fd) != f->lk->gen;
}

int b2_frame_locked(const b2_frame *f) { return f && f->lk; }

int b2_frame_lock_gen(const char *path, uint64_t *gen) {
  if (!path || !gen) return b2_fail(B2_E_INVAL, "lock generation: missing argument");
  *gen = 0;
  int dirfd = -1;
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
    dirfd = b2_io_open_path(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (dirfd < 0) return b2_fail(b2_from_errno(errno), "%s: %s", path, strerror(errno));
  }
  int fd = open_sidecar(path, dirfd, 0, -1, NULL);
  if (dirfd >= 0) close(dirfd);
  if (fd < 0) return fd;
  *gen = read_gen(fd);
  close(fd);
  return 0;
}

int b2_frame_lock_touch(int dirfd, const char *name) {
  if (effective_mode() == B2_LOCKING_OFF) return 0;
  int fd = open_sidecar(NULL, -1, 0, dirfd, name);
  if (fd == B2_E_NOENT) return 0;
  if (fd < 0) return b2_context(fd, "%s", name);
  uint64_t g;
  int rc = do_flock(fd, LOCK_EX);
  if (rc == 0) rc = bump_fd(fd, &g);
  close(fd); /* releases the lock */
  return rc < 0 ? b2_context(rc, "%s", name) : 0;
}

/* ---- who holds a frame --------------------------------------------------- */

int b2_frame_lock_holder(int fd, char *out, size_t cap) {
  struct stat st;
  if (!out || cap == 0) return B2_E_INVAL;
  snprintf(out, cap, "holder unknown (another host, or no /proc/locks)");
  if (fstat(fd, &st) != 0) return 0;
  char want[64];
  snprintf(want, sizeof want, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
           (unsigned long long)st.st_ino);
  FILE *fp = fopen("/proc/locks", "re");
  if (!fp) return 0;
  char line[256];
  long pid = -1;
  while (fgets(line, sizeof line, fp)) {
    char kind[16], adv[16], mode[16], dev[64];
    long p;
    /* "1: FLOCK  ADVISORY  WRITE 2463 fd:01:1316378 0 EOF"; waiters have "->" */
    if (strstr(line, "->")) continue;
    if (sscanf(line, "%*[^:]: %15s %15s %15s %ld %63s", kind, adv, mode, &p, dev) != 5) continue;
    if (!strcmp(kind, "FLOCK") && !strcmp(mode, "WRITE") && !strcmp(dev, want)) {
      pid = p;
      break;
    }
  }
  fclose(fp);
  if (pid <= 0) return 0;
  char comm[64] = "?", path[64];
  snprintf(path, sizeof path, "/proc/%ld/comm", pid);
  FILE *cf = fopen(path, "re");
  if (cf) {
    if (fgets(comm, sizeof comm, cf)) comm[strcspn(comm, "\n")] = 0;
    fclose(cf);
  }
  snprintf(out, cap, "held by pid %ld (%s) on this host", pid, comm);
  return 1;
}
