/*
 * wstate.c - writable frames: opening for writing (what can be kept valid,
 * the advisory lock, the expanded index and per-chunk sizes), the writer
 * state's lifetime, and swapping the staged header or trailer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/fileio.h"
#include "common/util.h"
#include "frame/frame_impl.h"

/* A sparse frame whose chunk file numbers reach past this many times its
 * chunk count (plus a margin) is not opened for writing: the writer keeps
 * a table over the numbers in use. */
#define NUM_SPREAD 4
/* w_init: the frame changed between parsing and locking (retry). */
#define NUM_MARGIN 65536

void b2_sframe_name(int64_t num, char name[32]) {
  snprintf(name, 32, "%08X.chunk", (unsigned)num);
}

void b2_frame_params_default(b2_frame_params *p) {
  memset(p, 0, sizeof *p);
  p->layout = B2_LAYOUT_CONTIGUOUS;
  b2_cparams_default(&p->cparams);
  p->chunksize = 1 << 20;
}

int b2_frame_writable(const b2_frame *f) { return f && f->w; }

int b2_frame_dirty(const b2_frame *f) {
  if (!f || !f->w) return 0;
  pthread_mutex_lock(&f->w->wmu);
  int d = f->w->dirty;
  pthread_mutex_unlock(&f->w->wmu);
  return d;
}

int b2_frame_info_copy(const b2_frame *f, b2_frame_info *out) {
  if (!f || !out) return b2_fail(B2_E_INVAL, "frame info: missing argument");
  b2_frame_rdlock(f);
  *out = f->info;
  b2_frame_rdunlock(f);
  return 0;
}

int b2_frame_w_retire(b2_frame *f, void *p) {
  b2_frame_w *w = f->w;
  if (!p) return 0;
  if (w->nretired == w->retired_cap) {
    int ncap = w->retired_cap ? 2 * w->retired_cap : 8;
    void **r = realloc(w->retired, (size_t)ncap * sizeof *r);
    if (!r) {
      /* Keep the pointer alive rather than risk a reader's use after
       * free: leak it. */
      return 0;
    }
    w->retired = r;
    w->retired_cap = ncap;
  }
  w->retired[w->nretired++] = p;
  return 0;
}

int b2_frame_w_reserve(b2_frame *f, int64_t n) {
  b2_frame_w *w = f->w;
  if (n <= w->cap) return 0;
  if (n > B2_FRAME_MAX_CHUNKS)
    return b2_fail(B2_E_LIMIT, "%lld chunks exceed the limit of %lld",
                   (long long)n, (long long)B2_FRAME_MAX_CHUNKS);
  int64_t ncap = w->cap ? w->cap : 16;
  while (ncap < n) ncap *= 2;
  if (ncap > B2_FRAME_MAX_CHUNKS) ncap = B2_FRAME_MAX_CHUNKS;
  /* Readers may be looking at the tables being moved. */
  pthread_rwlock_wrlock(&w->lock);
  int rc = 0;
  int64_t *o = realloc(f->offsets, (size_t)ncap * sizeof *o);
  if (o) f->offsets = o;
  int32_t *c = o ? realloc(w->csize, (size_t)ncap * sizeof *c) : NULL;
  if (c) w->csize = c;
  if (!o || !c)
    rc = b2_fail(B2_E_NOMEM, "out of memory for %lld entries",
                 (long long)ncap);
  if (!rc) rc = b2_frame_csum_reserve(f, ncap);
  if (!rc) w->cap = ncap;
  pthread_rwlock_unlock(&w->lock);
  return rc;
}

int b2_frame_meta_blobs(const b2_frame *f, int vl, b2_blob *out, int max) {
  int n = vl ? f->info.nvlmeta : f->info.nmeta;
  const b2_frame_meta *m = vl ? f->vlmeta : f->meta;
  const uint8_t *region = vl ? f->trailer : f->header;
  if (n > max)
    return b2_fail(B2_E_LIMIT, "%d %smetalayers (at most %d)", n,
                   vl ? "vl" : "", max);
  for (int k = 0; k < n; k++) {
    out[k].name = m[k].name;
    out[k].data = region + m[k].pos;
    out[k].len = m[k].len;
  }
  return n;
}

int b2_frame_w_set_header(b2_frame *f, uint8_t *buf, size_t len) {
  b2_frame_meta *m;
  int n;
  int rc = b2_frame_parse_metalayers(buf, len, B2_FH_FIXED, B2_FRAME_MAX_META,
                                     &m, &n);
  if (rc < 0) {
    free(buf);
    return b2_context(rc, "new header");
  }
  b2_frame_w_retire(f, f->header);
  b2_frame_w_retire(f, f->meta);
  f->header = buf;
  f->meta = m;
  f->info.nmeta = n;
  f->info.header_size = (int32_t)len;
  return 0;
}

int b2_frame_w_set_trailer(b2_frame *f, uint8_t *buf, size_t len) {
  b2_frame_meta *m;
  int n;
  int rc = b2_frame_parse_trailer(buf, len, 0, &m, &n);
  if (rc < 0) {
    free(buf);
    return b2_context(rc, "new trailer");
  }
  /* Readers of the trailer's bytes hold the read lock, so the old bytes
   * can go now; names may be pointed to (b2_frame_vlmeta_name): the old
   * array stays when the names are the same (every commit restages the
   * checksums), else it is retired. */
  free(f->trailer);
  f->trailer = buf;
  f->trailer_len = (uint32_t)len;
  int same = n == f->info.nvlmeta;
  for (int k = 0; k < n && same; k++)
    same = strcmp(m[k].name, f->vlmeta[k].name) == 0;
  if (same && n > 0) {
    for (int k = 0; k < n; k++) { /* the names stay untouched */
      f->vlmeta[k].pos = m[k].pos;
      f->vlmeta[k].len = m[k].len;
    }
    free(m);
    return 0;
  }
  b2_frame_w_retire(f, f->vlmeta);
  f->vlmeta = m;
  f->info.nvlmeta = n;
  return 0;
}

/* Frames the writer refuses. */
static int check_writable(const b2_frame *f) {
  const b2_frame_info *in = &f->info;
  if (in->legacy)
    return b2_fail(B2_E_UNSUPPORTED, "frames of the older layout are "
                   "read-only");
  if (in->varlen_chunks || (in->chunksize <= 0 && in->nbytes > 0))
    return b2_fail(B2_E_UNSUPPORTED, "frames of variable-length chunks are "
                   "read-only");
  if (in->vlblocks)
    return b2_fail(B2_E_UNSUPPORTED, "frames of variable-length blocks are "
                   "read-only");
  if (in->nvlmeta > B2_FRAME_MAX_VLMETA_WRITE)
    return b2_fail(B2_E_UNSUPPORTED, "%d vlmetalayers: the reference writes "
                   "at most %d", in->nvlmeta, B2_FRAME_MAX_VLMETA_WRITE);
  return b2_frame_fixed_ok(f->header, (size_t)in->header_size);
}

/* Stored size of every chunk (contiguous: from its header). */
static int fill_sizes_contiguous(b2_frame *f) {
  for (int64_t i = 0; i < f->info.nchunks; i++) {
    int64_t e = f->offsets[i];
    f->w->csize[i] = 0;
    if (e < 0) continue;
    uint8_t hdr[B2_CHUNK_HEADER_MIN];
    int32_t nb, cb, bs;
    int rc = b2_io_pread(f->fd, hdr, sizeof hdr, f->data_pos + e);
    if (!rc) rc = b2_chunk_sizes(hdr, sizeof hdr, &nb, &cb, &bs);
    if (!rc && (cb < B2_CHUNK_HEADER_MIN || cb > f->data_end - f->data_pos - e))
      rc = b2_fail(B2_E_FORMAT, "cbytes %d overruns the chunks section", cb);
    if (rc < 0) return b2_context(rc, "chunk %lld", (long long)i);
    f->w->csize[i] = cb;
  }
  return 0;
}

/* Sparse: the table of chunk file numbers and the size of each file. */
static int fill_sizes_sparse(b2_frame *f) {
  b2_frame_w *w = f->w;
  int64_t n = f->info.nchunks, maxnum = -1;
  for (int64_t i = 0; i < n; i++)
    if (f->offsets[i] > maxnum) maxnum = f->offsets[i];
  if (maxnum >= NUM_SPREAD * n + NUM_MARGIN)
    return b2_fail(B2_E_UNSUPPORTED, "chunk file number %lld is far beyond "
                   "the %lld chunks", (long long)maxnum, (long long)n);
  w->ncap = B2_MAX(maxnum + 1, 2 * n) + 64;
  w->cbit = calloc((size_t)w->ncap, 1);
  w->sref = calloc((size_t)w->ncap, sizeof *w->sref);
  w->nsize = calloc((size_t)w->ncap, sizeof *w->nsize);
  if (!w->cbit || !w->sref || !w->nsize)
    return b2_fail(B2_E_NOMEM, "out of memory for %lld chunk numbers",
                   (long long)w->ncap);
  for (int64_t i = 0; i < n; i++) {
    int64_t e = f->offsets[i];
    w->csize[i] = 0;
    if (e < 0) continue;
    if (!w->cbit[e]) {
      char name[32];
      struct stat st;
      b2_sframe_name(e, name);
      if (fstatat(f->dirfd, name, &st, 0) != 0)
        return b2_fail(b2_from_errno(errno), "chunk %lld: file %s: %s",
                       (long long)i, name, strerror(errno));
      if (!S_ISREG(st.st_mode) || st.st_size > INT32_MAX ||
          st.st_size < B2_CHUNK_HEADER_MIN)
        return b2_fail(B2_E_FORMAT, "chunk %lld: file %s is not a chunk",
                       (long long)i, name);
      w->nsize[e] = (int32_t)st.st_size;
    }
    w->cbit[e] = 1;
    w->sref[e]++;
    w->csize[i] = w->nsize[e];
  }
  return 0;
}

/* Contiguous: a descriptor open for writing on the same file, locked. */
static int reopen_rw(b2_frame *f) {
  int fd = f->home_dir >= 0 ? b2_io_openat(f->home_dir, f->home_name, O_RDWR | O_NOFOLLOW, 0)
                            : b2_io_openat(AT_FDCWD, f->path, O_RDWR, 0);
  if (fd < 0) return fd;
  struct stat a, b;
  if (fstat(fd, &a) != 0 || fstat(f->fd, &b) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino) {
    b2_io_close(fd);
    return b2_fail(B2_E_BUSY, "the file was replaced while being opened");
  }
  b2_io_close(f->fd);
  f->fd = fd;
  return 0;
}

static int lock_fd(int fd) {
  /* A sweep that looked at the file while it was a creation's temporary
   * may hold its lock for a moment longer: a few tries before busy. */
  for (int k = 0; k < 20 && flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK; k++) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char who[128];
    if (errno == EWOULDBLOCK && (b2_frame_lock_holder(fd, who, sizeof who), 1))
      return b2_fail(B2_E_BUSY, "the frame is open for writing elsewhere: %s", who);
    return b2_fail(b2_from_errno(errno), "lock: %s", strerror(errno));
  }
  return 0;
}

/* Whether the files changed between parsing and locking (another writer
 * committed meanwhile): then the parsed state is stale. */
static int changed_since_open(const b2_frame *f) {
  struct stat a, b;
  if (f->info.layout == B2_LAYOUT_SPARSE)
    return fstatat(f->dirfd, B2_FRAME_SPARSE_INDEX, &a, 0) != 0 ||
           fstat(f->fd, &b) != 0 || a.st_ino != b.st_ino ||
           a.st_dev != b.st_dev;
  uint8_t h[B2_FH_FIXED];
  return b2_io_pread(f->fd, h, sizeof h, 0) != 0 ||
         memcmp(h, f->header, sizeof h) != 0;
}

int b2_frame_w_init(b2_frame *f) {
  b2_frame_image_drop(f); /* writers change the file under it */
  int rc = check_writable(f);
  if (rc < 0) return rc;
  b2_frame_w *w = calloc(1, sizeof *w);
  if (!w) return b2_fail(B2_E_NOMEM, "out of memory");
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  /* Writers wait for no more than the readers already in (readers never
   * take the lock twice). */
  pthread_rwlockattr_setkind_np(&attr,
                                PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&w->lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  pthread_mutex_init(&w->wmu, NULL);
  f->w = w;

  /* The index as an array of the staged entries. */
  int64_t n = f->info.nchunks;
  int64_t *uni = f->offsets;
  int64_t uval = f->uniform_offset;
  f->offsets = NULL;
  rc = b2_frame_w_reserve(f, B2_MAX(n, 16));
  if (rc < 0) {
    free(uni);
    return rc;
  }
  for (int64_t i = 0; i < n; i++) f->offsets[i] = uni ? uni[i] : uval;
  free(uni);

  if (f->info.layout == B2_LAYOUT_SPARSE) {
    /* Nothing is opened for writing until a put: ask now. */
    if (faccessat(f->dirfd, ".", W_OK, AT_EACCESS) != 0)
      return b2_fail(b2_from_errno(errno), "sparse frame directory: %s",
                     strerror(errno));
    rc = lock_fd(f->dirfd);
    if (!rc) rc = b2_frame_lk_wr_begin(f); /* others' writers wait from here */
    if (!rc && changed_since_open(f)) rc = B2_E_AGAIN_INTERNAL;
    if (!rc) rc = fill_sizes_sparse(f);
    /* Chunk files no committed index uses (an abandoned staged state, as
     * the bytes past a contiguous frame's end): dropped. */
    if (!rc) (void)b2_frame_sweep_sparse(f);
  } else {
    /* Strict paths are canonical already, and must not be re-resolved
     * through links. */
    w->rpath = f->home_dir >= 0 || b2_io_strict_paths() ? strdup(f->path) : realpath(f->path, NULL);
    rc = w->rpath ? reopen_rw(f)
                  : b2_fail(b2_from_errno(errno), "cannot resolve %s: %s",
                            f->path, strerror(errno));
    if (!rc) rc = lock_fd(f->fd);
    if (!rc) rc = b2_frame_lk_wr_begin(f); /* others' writers wait from here */
    if (!rc && changed_since_open(f)) rc = B2_E_AGAIN_INTERNAL;
    if (!rc) rc = fill_sizes_contiguous(f);
    /* Bytes past frame_size belong to no committed frame (an abandoned
     * staged state): drop them. */
    if (!rc && f->file_size > f->info.frame_size) {
      rc = b2_io_ftruncate(f->fd, f->info.frame_size);
      b2_frame_csum_hold(f);
    }
    w->append_pos = f->info.frame_size;
    f->data_end = w->append_pos;
  }
  if (rc < 0) return rc;
  w->c_header_len = (size_t)f->info.header_size;
  w->c_header = malloc(w->c_header_len);
  if (!w->c_header) return b2_fail(B2_E_NOMEM, "out of memory");
  memcpy(w->c_header, f->header, w->c_header_len);
  w->c_frame_size = f->info.frame_size;
  return b2_frame_csum_w_init(f);
}

void b2_frame_w_free(b2_frame *f) {
  b2_frame_w *w = f->w;
  if (!w) return;
  /* Sparse: chunk files written for an abandoned staged state are
   * referenced by no index that may be on disk. */
  if (f->info.layout == B2_LAYOUT_SPARSE && w->sref && f->dirfd >= 0) {
    for (int64_t n = 0; n < w->ncap; n++) {
      if (w->sref[n] && !w->cbit[n]) {
        char name[32];
        b2_sframe_name(n, name);
        (void)b2_io_unlinkat(f->dirfd, name, 0);
      }
    }
  }
  for (int k = 0; k < w->nretired; k++) free(w->retired[k]);
  free(w->retired);
  free(w->csize);
  free(w->cbit);
  free(w->sref);
  free(w->nsize);
  free(w->c_header);
  free(w->rpath);
  pthread_rwlock_destroy(&w->lock);
  pthread_mutex_destroy(&w->wmu);
  free(w);
  f->w = NULL;
}

int b2_frame_w_home(b2_frame *f, const char **base) {
  if (f->home_dir < 0) return b2_io_open_parent(f->w && f->w->rpath ? f->w->rpath : f->path, base);
  *base = f->home_name;
  int fd = fcntl(f->home_dir, F_DUPFD_CLOEXEC, 0);
  return fd >= 0 ? fd : b2_fail(b2_from_errno(errno), "dup: %s", strerror(errno));
}

/* A hard-linked frame whose in-place rewrite a crash interrupted is
 * repaired before it is parsed for writing (b2_frame_redo): entry base of
 * dirfd (-1: the path base). */
static int finish_redo(int dirfd, const char *base) {
  int own = dirfd == -1;
  if (own) {
    dirfd = b2_io_open_parent(base, &base);
    if (dirfd < 0) return 0; /* the open below says why */
  }
  int rc = b2_frame_redo(dirfd, base);
  if (own) b2_io_close(dirfd);
  return rc < 0 ? rc : 0;
}

/* Another writer holds the frame (another daemon over the same files):
 * B2_E_BUSY at once, before the open waits for that session's lock on the
 * sidecar.  lock_fd checks again once the frame is parsed. */
static int busy_now(int dirfd, const char *name) {
  /* A read-only probe: not one of the write-side calls fileio.h wraps
   * (and counts, in the fault-injection flavour). */
  int fd = dirfd == -1 ? b2_io_open_path(name, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0)
                       : openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0; /* the open that follows reports it */
  int rc = lock_fd(fd);
  if (rc == 0) (void)flock(fd, LOCK_UN);
  close(fd);
  return rc == B2_E_BUSY ? rc : 0;
}

int b2_frame_open_rw_in(int dirfd, const char *name, b2_frame **out) {
  if (!out) return b2_fail(B2_E_INVAL, "frame open: no output");
  *out = NULL;
  int brc = name ? busy_now(dirfd, name) : 0;
  if (brc < 0) return brc;
  int rrc = finish_redo(dirfd, name);
  if (rrc < 0) return rrc;
  /* Parse, lock, and check nobody committed in between (else again). */
  for (int attempt = 0;; attempt++) {
    b2_frame *f;
    int rc = b2_frame_open_in(dirfd, name, NULL, NULL, &f);
    if (rc < 0) return rc;
    rc = b2_frame_w_init(f);
    if (rc == 0) {
      *out = f;
      return 0;
    }
    b2_frame_close(f);
    if (rc != B2_E_AGAIN_INTERNAL) return rc;
    if (attempt == 3)
      return b2_fail(B2_E_BUSY, "the frame keeps changing while opened");
  }
}

int b2_frame_open_rw(const char *path, b2_frame **out) { return b2_frame_open_rw_in(-1, path, out); }

int b2_frame_open_rw_at(int dirfd, const char *name, b2_frame **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "frame open: no directory");
  return b2_frame_open_rw_in(dirfd, name, out);
}
