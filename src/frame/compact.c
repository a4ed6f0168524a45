/*
 * compact.c - rewriting a frame without dead bytes, and measuring them.
 *
 * Contiguous: the staged frame (header, live chunks in index order, index,
 * trailer) is written to a temporary file beside the frame, synced, renamed
 * over it and the directory synced; the open b2_frame then reads the new
 * file.  A frame file with other hard links is rewritten in place instead,
 * through a redo file (replace_in_place), so that every name keeps it.  Commit uses the same path when the header changes size or the
 * frame becomes empty.  Sparse: commit, then delete every chunk file the
 * index does not reference (leftovers of interrupted writers included).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/fileio.h"
#include "common/util.h"
#include "frame/frame_impl.h"

#define COPY_BUF ((size_t)4 << 20)

/* Buffered sequential writer into the temporary file. */
typedef struct seqw {
  int fd;
  int64_t pos;     /* file position of buf[0] */
  uint8_t *buf;
  size_t len;
} seqw;

static int seq_flush(seqw *s) {
  if (!s->len) return 0;
  int rc = b2_io_pwrite(s->fd, s->buf, s->len, s->pos);
  s->pos += (int64_t)s->len;
  s->len = 0;
  return rc;
}

/* Make room for n bytes in the buffer (flushing); returns where. */
static int seq_room(seqw *s, size_t n, uint8_t **at) {
  if (s->len + n > COPY_BUF) {
    int rc = seq_flush(s);
    if (rc < 0) return rc;
  }
  *at = NULL;
  if (n <= COPY_BUF) *at = s->buf + s->len;
  return 0;
}

static int seq_put(seqw *s, const void *p, size_t n) {
  uint8_t *at;
  int rc = seq_room(s, n, &at);
  if (rc < 0) return rc;
  if (at) {
    memcpy(at, p, n);
    s->len += n;
    return 0;
  }
  rc = b2_io_pwrite(s->fd, p, n, s->pos);
  s->pos += (int64_t)n;
  return rc;
}

/* Copy the live chunks into s (after the header), filling the new index. */
static int copy_chunks(b2_frame *f, seqw *s, int64_t hl, int64_t *noff) {
  b2_chunkbuf big = {.p = NULL};
  int rc = 0;
  for (int64_t i = 0; i < f->info.nchunks && !rc; i++) {
    int64_t e = f->offsets[i];
    if (e < 0) {
      noff[i] = e;
      continue;
    }
    size_t cs = (size_t)f->w->csize[i];
    noff[i] = s->pos + (int64_t)s->len - hl;
    uint8_t *at;
    rc = seq_room(s, cs, &at);
    if (rc < 0) break;
    if (at) {
      rc = b2_io_pread(f->fd, at, cs, f->data_pos + e);
      if (!rc) s->len += cs;
    } else {
      if (big.cap < cs) {
        free(big.p);
        big.p = malloc(cs);
        big.cap = big.p ? cs : 0;
      }
      rc = big.p ? b2_io_pread(f->fd, big.p, cs, f->data_pos + e)
                 : b2_fail(B2_E_NOMEM, "out of memory");
      if (!rc) rc = seq_put(s, big.p, cs);
    }
    if (rc < 0) rc = b2_context(rc, "chunk %lld", (long long)i);
  }
  free(big.p);
  return rc;
}

/* Whether `base` in dirfd is still the file being written: something
 * renamed or replaced behind our back must not be overwritten by the
 * rewrite (the frame itself, moved, keeps its committed state). */
static int still_ours(const b2_frame *f, int dirfd, const char *base) {
  struct stat a, b;
  if (fstat(f->fd, &a) != 0)
    return b2_fail(b2_from_errno(errno), "stat of the frame: %s", strerror(errno));
  if (fstatat(dirfd, base, &b, AT_SYMLINK_NOFOLLOW) != 0 || a.st_dev != b.st_dev ||
      a.st_ino != b.st_ino)
    return b2_fail(B2_E_BUSY, "%s is no longer the frame being written (moved or replaced "
                   "by another program): not replacing it", f->path);
  return 0;
}

/* Copy the n bytes of `from` over the start of `to`, cut `to` there and
 * sync it. */
static int copy_over(int from, int to, int64_t n) {
  uint8_t *buf = malloc(COPY_BUF);
  if (!buf) return b2_fail(B2_E_NOMEM, "out of memory");
  int rc = 0;
  for (int64_t at = 0; at < n && !rc;) {
    size_t k = (size_t)B2_MIN((int64_t)COPY_BUF, n - at);
    rc = b2_io_pread(from, buf, k, at);
    if (!rc) rc = b2_io_pwrite(to, buf, k, at);
    at += (int64_t)k;
  }
  free(buf);
  if (!rc) rc = b2_io_ftruncate(to, n);
  if (!rc) rc = b2_io_fsync(to);
  return rc;
}

/* The new content of a frame that has other hard links, complete and
 * synced in `tmp` (open at tfd, fsize bytes), replaces the old content in
 * place: a new file renamed over one name would split the link.  tmp is
 * renamed to the redo name first (directory synced), then copied over the
 * frame file, which is synced, and the redo file is removed.  A crash
 * during the copy leaves the redo file: b2_frame_redo() copies it again
 * before anyone writes or (through the mount) reads the frame. */
static int replace_in_place(b2_frame *f, int dirfd, const char *base, const char *tmp,
                            int tfd, int64_t fsize) {
  char redo[NAME_MAX + 1];
  if (b2_frame_temp_name(base, B2_FRAME_REDO_SUFFIX, redo, sizeof redo) < 0)
    return b2_fail(B2_E_LIMIT, "file name too long for a redo file");
  int rc = b2_io_renameat(dirfd, tmp, dirfd, redo, 0);
  if (!rc) rc = b2_io_fsync(dirfd);
  if (rc < 0) {
    (void)b2_io_unlinkat(dirfd, redo, 0); /* the old content is intact */
    return rc;
  }
  rc = copy_over(tfd, f->fd, fsize);
  if (rc < 0) return rc; /* the redo file stays: the copy must be done */
  b2_frame_csum_seal_fd(f, f->fd); /* before the redo file goes: a crash keeps the time */
  (void)b2_io_unlinkat(dirfd, redo, 0);
  return b2_io_fsync(dirfd);
}

int b2_frame_redo(int dirfd, const char *base) {
  char name[NAME_MAX + 1];
  if (b2_frame_temp_name(base, B2_FRAME_REDO_SUFFIX, name, sizeof name) < 0) return 0;
  struct stat rst;
  if (fstatat(dirfd, name, &rst, AT_SYMLINK_NOFOLLOW) != 0) return 0; /* none */
  int rfd = b2_io_openat(dirfd, name, O_RDONLY | O_NOFOLLOW, 0);
  if (rfd < 0) return rfd;
  int ffd = openat(dirfd, base, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat rs, fs;
  int rc = 0;
  if (ffd < 0) {
    /* Every name of the frame is gone: nothing to repair. */
    if (errno != ENOENT) rc = b2_fail(b2_from_errno(errno), "%s: %s", base, strerror(errno));
  } else if (flock(ffd, LOCK_EX | LOCK_NB) != 0) {
    rc = 1; /* a writer has it: its own rewrite is under way */
  } else if (fstat(rfd, &rs) != 0 || fstat(ffd, &fs) != 0 || !S_ISREG(fs.st_mode)) {
    rc = b2_fail(B2_E_IO, "%s: cannot stat for the redo", base);
  } else {
    rc = copy_over(rfd, ffd, (int64_t)rs.st_size);
    /* The redo file's time is the one its checksum table vouches for. */
    struct timespec t[2] = {{0, UTIME_OMIT}, rs.st_mtim};
    if (rc == 0) (void)futimens(ffd, t);
  }
  if (ffd >= 0) close(ffd);
  b2_io_close(rfd);
  if (rc == 0) {
    rc = b2_io_unlinkat(dirfd, name, 0);
    /* dirfd may be an O_PATH descriptor, which cannot be synced. */
    int sfd = rc ? -1 : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (!rc) rc = sfd >= 0 ? b2_io_fsync(sfd) : b2_fail(b2_from_errno(errno), "directory: %s", strerror(errno));
    if (sfd >= 0) close(sfd);
  }
  return rc < 0 ? b2_context(rc, "redo of %s", base) : rc;
}

static int rewrite(b2_frame *f);

int b2_frame_rewrite(b2_frame *f) {
  int rc = b2_frame_lk_commit_begin(f); /* other lockers wait, then see the change */
  if (rc < 0) return rc;
  rc = rewrite(f);
  if (rc == 0) b2_frame_csum_seal(f); /* the time its checksums vouch for */
  b2_frame_lk_commit_end(f);
  return rc;
}

static int rewrite(b2_frame *f) {
  b2_frame_w *w = f->w;
  const char *base;
  int dirfd = b2_frame_w_home(f, &base);
  if (dirfd < 0) return dirfd;
  char tmp[NAME_MAX + 1];
  if (b2_frame_temp_name(base, B2_FRAME_TEMP_SUFFIX, tmp, sizeof tmp) < 0) {
    b2_io_close(dirfd);
    return b2_fail(B2_E_LIMIT, "file name too long for a temporary file");
  }
  struct stat st;
  int fst = fstat(f->fd, &st);
  mode_t mode = fst == 0 ? (st.st_mode & 07777) : 0644;
  int linked = fst == 0 && st.st_nlink > 1;
  int64_t n = f->info.nchunks, hl = f->info.header_size;
  int64_t *noff = malloc((size_t)w->cap * sizeof *noff);
  seqw s = {-1, 0, malloc(COPY_BUF), 0};
  uint8_t *h = NULL, *it = NULL;
  size_t ilen = 0, total = 0;
  int rc = noff && s.buf ? 0 : b2_fail(B2_E_NOMEM, "out of memory");
  if (!rc) {
    s.fd = b2_frame_make_temp(dirfd, tmp, 0, mode); /* held until renamed */
    if (s.fd < 0) rc = s.fd;
  }
  if (!rc) rc = seq_put(&s, f->header, (size_t)hl); /* sizes patched below */
  if (!rc) rc = copy_chunks(f, &s, hl, noff);
  int64_t ipos = s.pos + (int64_t)s.len;
  if (!rc && n > 0) rc = b2_frame_build_index(noff, n, &it, &ilen);
  if (!rc && it) rc = seq_put(&s, it, ilen);
  if (!rc) rc = seq_put(&s, f->trailer, f->trailer_len);
  total = ilen + f->trailer_len;
  int64_t fsize = ipos + (int64_t)total;
  if (!rc) rc = seq_flush(&s);
  if (!rc) {
    h = malloc((size_t)hl);
    if (!h) rc = b2_fail(B2_E_NOMEM, "out of memory");
  }
  if (!rc) {
    memcpy(h, f->header, (size_t)hl);
    b2_frame_patch_sizes(h, fsize, f->info.nbytes, ipos - hl,
                         f->info.chunksize, f->info.nvlmeta > 0);
    rc = b2_io_pwrite(s.fd, h, B2_FH_FIXED, 0);
  }
  if (!rc) rc = b2_io_fsync(s.fd);
  /* The time its table vouches for before it takes the frame's name (or
   * becomes the redo file a crash leaves). */
  if (!rc) b2_frame_csum_seal_fd(f, s.fd);
  free(it);
  free(s.buf);
  if (!rc && linked) {
    /* Readers of this b2_frame wait while the file changes under them. */
    pthread_rwlock_wrlock(&w->lock);
    rc = replace_in_place(f, dirfd, base, tmp, s.fd, fsize);
    if (rc < 0) pthread_rwlock_unlock(&w->lock);
    b2_io_close(s.fd);
    s.fd = -1;
    b2_io_close(dirfd);
    if (rc < 0) {
      free(noff);
      free(h);
      return b2_context(rc, "rewrite in place of %s (hard-linked)", f->path);
    }
  } else {
    if (!rc) rc = still_ours(f, dirfd, base);
    if (!rc) rc = b2_io_renameat(dirfd, tmp, dirfd, base, 0);
    if (rc < 0) {
      if (s.fd >= 0) {
        b2_io_close(s.fd);
        (void)b2_io_unlinkat(dirfd, tmp, 0);
      }
      b2_io_close(dirfd);
      free(noff);
      free(h);
      return b2_context(rc, "rewrite of %s", f->path);
    }
    /* The new file has the frame's name now; even if syncing the directory
     * fails, this b2_frame follows it. */
    rc = b2_io_fsync(dirfd);
    b2_io_close(dirfd);
    pthread_rwlock_wrlock(&w->lock);
  }
  int old = linked ? -1 : f->fd;
  if (!linked) f->fd = s.fd;
  free(f->offsets);
  f->offsets = noff;
  memcpy(f->header, h, B2_FH_FIXED);
  f->info.frame_size = fsize;
  f->info.cbytes = ipos - hl;
  f->file_size = fsize;
  f->data_pos = hl;
  f->index_pos = ipos;
  f->index_cbytes = (int32_t)ilen;
  f->trailer_pos = ipos + (int64_t)ilen;
  w->append_pos = f->data_end = fsize;
  pthread_rwlock_unlock(&w->lock);
  if (old >= 0) b2_io_close(old);
  if (rc < 0) {
    free(h);
    return b2_context(rc, "rewrite of %s: directory", f->path);
  }
  b2_frame_w_committed(f, h, fsize);
  return 0;
}

int b2_frame_sweep_sparse(b2_frame *f) {
  b2_frame_w *w = f->w;
  int fd = dup(f->dirfd);
  if (fd < 0) return b2_fail(b2_from_errno(errno), "dup: %s", strerror(errno));
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return b2_fail(b2_from_errno(errno), "opendir: %s", strerror(errno));
  }
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    const char *nm = de->d_name;
    if (strcmp(nm, B2_FRAME_SPARSE_INDEX ".tmp") == 0) {
      (void)b2_io_unlinkat(f->dirfd, nm, 0);
      continue;
    }
    unsigned num;
    char tail[16];
    if (strlen(nm) != 14 || sscanf(nm, "%8X%15s", &num, tail) != 2 ||
        strcmp(tail, ".chunk") != 0)
      continue;
    char canon[32];
    b2_sframe_name(num, canon);
    if (strcmp(canon, nm) != 0) continue;
    if ((int64_t)num < w->ncap && (w->cbit[num] || w->sref[num])) continue;
    (void)b2_io_unlinkat(f->dirfd, nm, 0);
  }
  closedir(d);
  return 0;
}

int b2_frame_compact(b2_frame *f) {
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  /* Compaction reads every chunk anyway: checksums not known yet are
   * computed now. */
  rc = b2_frame_csum_fill(f, -1);
  if (rc < 0) {
    /* out of memory */
  } else if (f->info.layout == B2_LAYOUT_SPARSE) {
    rc = b2_frame_commit_locked(f);
    if (!rc) rc = b2_frame_sweep_sparse(f);
  } else {
    /* Nothing staged: the same content, so the same time, which the new
     * file's table vouches for (a caller keeping the times, as `cp -p`
     * would, keeps the table in use). */
    if (!f->w->dirty) b2_frame_csum_keep_time(f);
    rc = b2_frame_w_check_fixups(f);
    if (!rc) rc = b2_frame_w_restage(f); /* copies only checked chunks */
    if (!rc) rc = b2_frame_csum_stage(f);
    if (!rc) rc = b2_frame_rewrite(f);
    f->csum.has_at = 0;
    if (rc < 0) f->w->sync_failed = 1;
  }
  b2_frame_w_end(f);
  return rc;
}

int b2_frame_compact_path(const char *path) {
  b2_frame *f;
  int rc = b2_frame_open_rw(path, &f);
  if (rc < 0) return rc;
  rc = b2_frame_compact(f);
  b2_frame_close(f);
  return rc;
}

static int cmp_span(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

int64_t b2_frame_dead_bytes(b2_frame *f, int64_t *stored) {
  if (stored) *stored = 0;
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  b2_frame_w *w = f->w;
  int64_t dead = 0, all = 0;
  if (f->info.layout == B2_LAYOUT_SPARSE) {
    for (int64_t n = 0; n < w->ncap; n++) {
      if (!w->cbit[n]) continue;
      all += w->nsize[n];
      if (!w->sref[n]) dead += w->nsize[n];
    }
    b2_frame_w_end(f);
    if (stored) *stored = all;
    return dead;
  }
  /* Bytes of [header end, written end) covered by no staged chunk, less
   * the committed index and trailer (live until the next commit). */
  int64_t n = f->info.nchunks, m = 0;
  int64_t *span = malloc(((size_t)n + 1) * 2 * sizeof *span);
  if (!span) {
    b2_frame_w_end(f);
    return b2_fail(B2_E_NOMEM, "out of memory");
  }
  for (int64_t i = 0; i < n; i++) {
    if (f->offsets[i] < 0) continue;
    span[2 * m] = f->offsets[i];
    span[2 * m + 1] = f->offsets[i] + w->csize[i];
    m++;
  }
  qsort(span, (size_t)m, 2 * sizeof *span, cmp_span);
  int64_t covered = 0, end = 0;
  for (int64_t k = 0; k < m; k++) {
    int64_t a = B2_MAX(span[2 * k], end), b = span[2 * k + 1];
    if (b > a) covered += b - a;
    if (b > end) end = b;
  }
  free(span);
  all = w->append_pos - f->data_pos; /* dead bytes included */
  dead = all - covered - (w->c_frame_size - f->index_pos);
  b2_frame_w_end(f);
  if (stored) *stored = all;
  return dead < 0 ? 0 : dead;
}
