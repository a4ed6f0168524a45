/*
 * frame.c - open and close frames, and the logical geometry of their
 * chunks.  Opening reads the header, the trailer and the index, checking
 * every size against the real file before it is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/util.h"
#include "common/fileio.h"
#include "frame/frame_impl.h"

/* Enough for the fixed part of any header (the reference writes 87). */
#define HEADER_PREFIX 512

/* fstat of fd, just opened (closed when that fails); `what` names it. */
static int stat_opened(int fd, struct stat *st, const char *what) {
  if (fd < 0) return b2_fail(b2_from_errno(errno), "cannot open%s: %s", what, strerror(errno));
  if (fstat(fd, st) == 0) return 0;
  int e = errno;
  close(fd);
  return b2_fail(b2_from_errno(e), "cannot stat%s: %s", what, strerror(e));
}

/* fd, of status st, as the frame's file (replacing one it had). */
static int use_file(b2_frame *f, int fd, const struct stat *st) {
  if (f->fd >= 0) close(f->fd);
  f->fd = fd;
  if (!S_ISREG(st->st_mode))
    return b2_fail(B2_E_FORMAT, "not a regular file or a directory");
  f->file_size = (int64_t)st->st_size;
  f->st = *st;
  f->st_valid = 1;
  return 0;
}

/* Open one of the frame's files for reading (dirfd -1: name is a path); a
 * probe's leave the access time alone where permitted. */
static int open_ro(const b2_frame *f, int dirfd, const char *name, int flags) {
  if (f->noatime) return b2_io_open_noatime(dirfd, name, flags);
  return dirfd < 0 ? b2_io_open_path(name, flags, 0) : openat(dirfd, name, flags);
}

/* Open a sparse frame's index, chunks.b2frame in f->dirfd, as its file
 * (again, when the one it has may have been replaced: each commit renames
 * a new index over it and then removes the chunk files only the old one
 * named). */
static int open_index(b2_frame *f) {
  struct stat st;
  int fd = open_ro(f, f->dirfd, B2_FRAME_SPARSE_INDEX, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  int rc = stat_opened(fd, &st, " sparse frame's " B2_FRAME_SPARSE_INDEX);
  return rc < 0 ? rc : use_file(f, fd, &st);
}

/* Open `path`: a regular file, or a directory holding chunks.b2frame.
 * O_NONBLOCK keeps a FIFO in its place from blocking the open; it has no
 * effect on the regular files that pass the checks. */
static int open_files(b2_frame *f, const char *path) {
  int fd = f->home_dir >= 0
               ? open_ro(f, f->home_dir, f->home_name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW)
               : open_ro(f, -1, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  int rc = stat_opened(fd, &st, "");
  if (rc < 0) return rc;
  if (S_ISDIR(st.st_mode)) {
    f->dirfd = fd;
    f->info.layout = B2_LAYOUT_SPARSE;
    rc = open_index(f);
    if (rc == B2_E_NOENT)
      return b2_fail(rc, "a directory without " B2_FRAME_SPARSE_INDEX ", so no sparse frame");
    return rc;
  }
  return use_file(f, fd, &st);
}

/* Read and parse the header, metalayers included. */
static int load_header(b2_frame *f, b2_frame_header *h) {
  if (f->file_size == 0)
    return b2_fail(B2_E_FORMAT, "empty file, not a frame");
  uint8_t pre[HEADER_PREFIX];
  size_t n = f->file_size < HEADER_PREFIX ? (size_t)f->file_size
                                          : HEADER_PREFIX;
  int rc = b2_frame_fpread(f, f->fd, pre, n, f->base, 0);
  if (rc < 0) return b2_context(rc, "frame header");
  rc = b2_frame_parse_header(pre, n, h);
  if (rc == B2_E_TRUNCATED && (int64_t)n == f->file_size)
    return b2_context(rc, "file of %lld bytes", (long long)f->file_size);
  if (rc < 0) return rc;
  if (h->frame_size > (uint64_t)f->file_size)
    return b2_fail(B2_E_TRUNCATED, "frame header: frame_size %llu exceeds "
                   "the file's %lld bytes", (unsigned long long)h->frame_size,
                   (long long)f->file_size);
  if ((uint64_t)h->header_size + B2_FRAME_TRAILER_MIN > h->frame_size)
    return b2_fail(B2_E_FORMAT, "frame header: header_size %lld leaves no "
                   "room for a trailer in frame_size %llu",
                   (long long)h->header_size,
                   (unsigned long long)h->frame_size);
  int want = f->info.layout == B2_LAYOUT_SPARSE ? B2_FRAME_TYPE_SPARSE
                                                : B2_FRAME_TYPE_CONTIGUOUS;
  if (h->frame_type != want)
    return b2_fail(B2_E_FORMAT, "frame header: frame type %d, but the path "
                   "is a %s", h->frame_type,
                   want == B2_FRAME_TYPE_SPARSE ? "directory" : "file");
  /* header_size <= frame_size <= file size: the allocation is bounded by
   * the real file. */
  f->header = malloc((size_t)h->header_size);
  if (!f->header) return b2_fail(B2_E_NOMEM, "out of memory for the header");
  if ((int64_t)n >= h->header_size)
    memcpy(f->header, pre, (size_t)h->header_size); /* read already */
  else
    rc = b2_frame_fpread(f, f->fd, f->header, (size_t)h->header_size, f->base, 0);
  if (rc < 0) return b2_context(rc, "frame header");
  rc = b2_frame_parse_header(f->header, (size_t)h->header_size, h);
  if (rc < 0) return rc;
  rc = b2_frame_parse_metalayers(f->header, (size_t)h->header_size,
                                 h->meta_pos, B2_FRAME_MAX_META, &f->meta,
                                 &f->info.nmeta);
  if (rc < 0) return b2_context(rc, "frame header: metalayers");
  return 0;
}

/* Find, read and parse the trailer. */
static int load_trailer(b2_frame *f, const b2_frame_header *h) {
  uint8_t tail[B2_FRAME_TRAILER_MIN];
  int64_t fsize = (int64_t)h->frame_size;
  int rc = b2_frame_fpread(f, f->fd, tail, sizeof tail,
                           f->base + fsize - B2_FRAME_TRAILER_MIN, 0);
  if (rc < 0) return b2_context(rc, "trailer");
  uint32_t tlen;
  rc = b2_frame_trailer_len(tail, &tlen);
  if (rc < 0) return rc;
  if (tlen < B2_FRAME_TRAILER_MIN || tlen > fsize - h->header_size)
    return b2_fail(B2_E_FORMAT, "trailer: length %u is not within [%d, %lld] "
                   "(frame_size %lld, header_size %lld)", tlen,
                   B2_FRAME_TRAILER_MIN, (long long)(fsize - h->header_size),
                   (long long)fsize, (long long)h->header_size);
  f->trailer_len = tlen;
  f->trailer_pos = fsize - tlen;
  f->trailer = malloc(tlen);
  if (!f->trailer) return b2_fail(B2_E_NOMEM, "out of memory for the trailer");
  rc = b2_frame_fpread(f, f->fd, f->trailer, tlen, f->base + f->trailer_pos, 0);
  if (rc < 0) return b2_context(rc, "trailer");
  return b2_frame_parse_trailer(f->trailer, tlen, h->legacy, &f->vlmeta,
                                &f->info.nvlmeta);
}

static void fill_info(b2_frame *f, const b2_frame_header *h) {
  b2_frame_info *in = &f->info;
  in->legacy = h->legacy;
  in->format_version = h->version;
  in->varlen_chunks = h->chunksize == 0;
  in->vlblocks = !h->legacy && (h->general_flags & B2_FRAME_FLAG_VLBLOCKS);
  in->nbytes = h->nbytes;
  in->cbytes = h->cbytes;
  in->frame_size = (int64_t)h->frame_size;
  in->header_size = (int32_t)h->header_size;
  in->chunksize = (int32_t)h->chunksize;
  in->blocksize = (int32_t)h->blocksize;
  in->typesize = (int32_t)h->typesize;
  in->codec = h->codec;
  in->codec_meta = h->codec_meta;
  in->clevel = h->clevel;
  in->splitmode = h->splitmode;
  memcpy(in->filters, h->filters, sizeof in->filters);
  memcpy(in->filters_meta, h->filters_meta, sizeof in->filters_meta);
  f->data_pos = h->header_size;
  f->data_end = h->header_size;
  f->index_pos = h->header_size;
}

static b2_frame *frame_new(const char *name) {
  b2_frame *f = calloc(1, sizeof *f);
  if (!f) {
    b2_fail(B2_E_NOMEM, "out of memory");
    return NULL;
  }
  f->fd = -1;
  f->dirfd = -1;
  f->home_dir = -1;
  f->path = strdup(name);
  if (!f->path) {
    free(f);
    b2_fail(B2_E_NOMEM, "out of memory");
    return NULL;
  }
  return f;
}

/* Header, trailer, index and checksums of a frame whose files are open;
 * closes f on error. */
static int load(b2_frame *f, b2_frame **out) {
  b2_frame_header h;
  b2_frame_image_load(f);
  int rc = load_header(f, &h);
  if (!rc) {
    fill_info(f, &h);
    rc = load_trailer(f, &h);
  }
  if (!rc) rc = b2_frame_load_index(f);
  if (!rc) rc = b2_frame_csum_load(f);
  if (rc < 0) {
    b2_frame_close(f);
    return rc;
  }
  *out = f;
  return 0;
}

/* A new frame to be opened at entry `name` of directory dirfd (any
 * descriptor of it, O_PATH included), or by path when dirfd is -1. */
static int frame_new_at(int dirfd, const char *name, int borrow, b2_frame **out) {
  b2_frame *f = *out = frame_new(name);
  if (!f) return B2_E_NOMEM;
  if (dirfd == -1) return 0;
  f->home_borrowed = borrow; /* a read-only open needs its directory only meanwhile */
  f->home_dir = borrow ? dirfd : openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = f->home_dir < 0 ? b2_fail(b2_from_errno(errno), "cannot open the directory of %s: %s",
                                      name, strerror(errno))
                           : 0;
  if (!rc && !(f->home_name = strdup(name))) rc = b2_fail(B2_E_NOMEM, "out of memory");
  if (rc < 0) {
    b2_frame_close(f);
    *out = NULL;
  }
  return rc;
}

static int open_in(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx, int borrow,
                   int noatime, b2_frame **out);

int b2_frame_open(const char *path, b2_frame **out) {
  return b2_frame_open_in(-1, path, NULL, NULL, out);
}

int b2_frame_open_reusing(const char *path, b2_frame_reuse_fn fn, void *ctx,
                          b2_frame **out) {
  return b2_frame_open_in(-1, path, fn, ctx, out);
}

int b2_frame_open_reusing_at(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                             b2_frame **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "frame open: no directory");
  return open_in(dirfd, name, fn, ctx, 1, 0, out);
}

int b2_frame_open_probe(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                        b2_frame **out) {
  return open_in(dirfd, name, fn, ctx, dirfd != -1, 1, out);
}

int b2_frame_open_in(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx,
                     b2_frame **out) {
  return open_in(dirfd, name, fn, ctx, 0, 0, out);
}

/* A read-only frame opened at a borrowed directory lets go of it. */
static void unborrow(b2_frame *f) {
  if (!f->home_borrowed) return;
  f->home_dir = -1;
  free(f->home_name);
  f->home_name = NULL;
  f->home_borrowed = 0;
}

static int open_in(int dirfd, const char *name, b2_frame_reuse_fn fn, void *ctx, int borrow,
                   int noatime, b2_frame **out) {
  if (!out) return b2_fail(B2_E_INVAL, "frame open: no output");
  *out = NULL;
  if (!name || !*name) return b2_fail(B2_E_INVAL, "frame open: empty path");
  if (dirfd != -1 && strchr(name, '/'))
    return b2_fail(B2_E_INVAL, "frame open: %s is not a name in a directory", name);
  b2_frame *f;
  int rc = frame_new_at(dirfd, name, borrow, &f);
  if (rc < 0) return rc;
  f->noatime = noatime;
  rc = open_files(f, name);
  b2_frame *old = rc == 0 && fn && f->info.layout == B2_LAYOUT_CONTIGUOUS ? fn(ctx, &f->st) : NULL;
  if (old && b2_frame_lk_moved(old)) { /* changed under locking, size and times alike */
    b2_frame_close(old);
    old = NULL;
  }
  if (old) { /* the same file, unchanged: the parse it had is right */
    old->fd = f->fd;
    old->noatime = f->noatime;
    f->fd = -1;
    char *p = old->path;
    old->path = f->path;
    f->path = p;
    if (!f->home_borrowed) { /* and where it was opened this time */
      int hd = old->home_dir;
      old->home_dir = f->home_dir;
      f->home_dir = hd;
      char *hn = old->home_name;
      old->home_name = f->home_name;
      f->home_name = hn;
    }
    b2_frame_close(f);
    *out = old;
    return 0;
  }
  if (rc == 0) rc = b2_frame_lk_attach(f, name);
  int locked = 0;
  if (rc == 0 && f->lk) { /* loaded under the shared lock, sized under it */
    struct stat st;
    rc = locked = b2_frame_lk_rd_begin(f, 0);
    if (rc > 0) rc = 0;
    /* A sparse frame's index as the counter just read describes it: the
     * one opened before the lock may have been replaced since. */
    if (locked > 0 && f->info.layout == B2_LAYOUT_SPARSE) {
      rc = open_index(f);
    } else if (locked > 0 && fstat(f->fd, &st) == 0) {
      f->file_size = (int64_t)st.st_size;
      f->st = st;
    }
  }
  if (rc < 0) {
    b2_frame_close(f);
    return rc;
  }
  rc = load(f, out); /* closes f on failure, which releases the lock */
  if (rc == 0) b2_frame_lk_rd_end(f, locked);
  if (rc == 0) unborrow(*out);
  return rc;
}

int b2_frame_detach(b2_frame *f) {
  if (!f || f->w || f->info.layout != B2_LAYOUT_CONTIGUOUS || !f->st_valid || f->fd < 0)
    return b2_fail(B2_E_INVAL, "frame detach: not a read-only frame opened by path");
  /* Under a .b2lock sidecar another program may bump the generation
   * without changing the file: such a frame must be parsed afresh. */
  if (f->lk) return b2_fail(B2_E_INVAL, "frame detach: shared through a lock sidecar");
  close(f->fd);
  f->fd = -1;
  if (f->home_dir >= 0) { /* a reuse gets the directory of its own open */
    close(f->home_dir);
    f->home_dir = -1;
    free(f->home_name);
    f->home_name = NULL;
  }
  return 0;
}

int b2_frame_home(const b2_frame *f, const char **name) {
  if (!f || f->home_dir < 0) return -1;
  *name = f->home_name;
  return fcntl(f->home_dir, F_DUPFD_CLOEXEC, 0);
}

int b2_frame_rehome(b2_frame *f, int dirfd, const char *name) {
  if (!f || f->home_dir < 0) return b2_fail(B2_E_INVAL, "frame rehome: not opened at a directory");
  if (strchr(name, '/')) return b2_fail(B2_E_INVAL, "frame rehome: %s is not a name", name);
  int nd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (nd < 0)
    return b2_fail(b2_from_errno(errno), "cannot open the new directory of %s: %s", name,
                   strerror(errno));
  char *n = strdup(name), *p = strdup(name), *r = f->w && f->w->rpath ? strdup(name) : NULL;
  if (!n || !p || (f->w && f->w->rpath && !r)) {
    close(nd);
    free(n);
    free(p);
    free(r);
    return b2_fail(B2_E_NOMEM, "out of memory");
  }
  close(f->home_dir);
  f->home_dir = nd;
  free(f->home_name);
  f->home_name = n;
  free(f->path);
  f->path = p;
  if (r) {
    free(f->w->rpath);
    f->w->rpath = r;
  }
  return 0;
}

int b2_frame_open_at(int dirfd, const char *name, b2_frame **out) {
  if (dirfd == -1) return b2_fail(B2_E_INVAL, "frame open: no directory");
  return open_in(dirfd, name, NULL, NULL, 1, 0, out); /* read-only: dirfd is needed meanwhile */
}

int b2_frame_open_fd(int fd, int64_t offset, int64_t length, const char *name,
                     b2_frame **out) {
  if (!out) return b2_fail(B2_E_INVAL, "frame open: no output");
  *out = NULL;
  if (fd < 0 || offset < 0 || length < 0 || offset > INT64_MAX - length)
    return b2_fail(B2_E_INVAL, "frame open: bad descriptor, offset or length");
  struct stat st;
  if (fstat(fd, &st) != 0)
    return b2_fail(b2_from_errno(errno), "cannot stat: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return b2_fail(B2_E_FORMAT, "not a regular file");
  if (offset + length > (int64_t)st.st_size)
    return b2_fail(B2_E_TRUNCATED, "bytes [%lld, +%lld) lie past the end of "
                   "the file (%lld bytes)", (long long)offset,
                   (long long)length, (long long)st.st_size);
  b2_frame *f = frame_new(name && *name ? name : "(frame)");
  if (!f) return B2_E_NOMEM;
  f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (f->fd < 0) {
    int e = errno;
    b2_frame_close(f);
    return b2_fail(b2_from_errno(e), "cannot duplicate the descriptor: %s",
                   strerror(e));
  }
  f->info.layout = B2_LAYOUT_CONTIGUOUS;
  f->base = offset;
  f->file_size = length;
  return load(f, out);
}

void b2_frame_close(b2_frame *f) {
  if (!f) return;
  b2_frame_w_free(f); /* discards what was not committed */
  b2_frame_lk_free(f);
  b2_frame_image_drop(f);
  if (f->fd >= 0) close(f->fd);
  if (f->dirfd >= 0) close(f->dirfd);
  if (f->home_dir >= 0 && !f->home_borrowed) close(f->home_dir);
  free(f->home_name);
  free(f->path);
  free(f->header);
  free(f->trailer);
  free(f->meta);
  free(f->vlmeta);
  free(f->offsets);
  free(f->starts);
  b2_frame_csum_free(f);
  free(f);
}

const b2_frame_info *b2_frame_get_info(const b2_frame *f) {
  return f ? &f->info : NULL;
}

const char *b2_frame_path(const b2_frame *f) { return f ? f->path : NULL; }

int b2_frame_stat(const b2_frame *f, struct stat *st) {
  if (!f || !f->st_valid)
    return b2_fail(B2_E_INVAL, "frame stat: not a frame opened by path");
  *st = f->st;
  return 0;
}

int b2_frame_file_now(b2_frame *f, struct stat *st) {
  if (f->w) pthread_rwlock_rdlock(&f->w->lock); /* a rewrite swaps the descriptor */
  int rc = f->fd >= 0 && fstat(f->fd, st) == 0
               ? 0
               : b2_fail(b2_from_errno(f->fd >= 0 ? errno : EBADF), "frame stat: %s",
                         strerror(f->fd >= 0 ? errno : EBADF));
  if (f->w) pthread_rwlock_unlock(&f->w->lock);
  return rc;
}

/* ---- logical geometry ---------------------------------------------------- */

/* Callers hold the read lock (writable frames) or need none. */
static int64_t start_of(const b2_frame *f, int64_t i) {
  if (f->starts) return f->starts[i];
  if (i == f->info.nchunks) return f->info.nbytes;
  return i * (int64_t)f->info.chunksize;
}

int32_t b2_frame_nbytes_of(const b2_frame *f, int64_t i) {
  if (f->starts) return (int32_t)(f->starts[i + 1] - f->starts[i]);
  int64_t start = i * (int64_t)f->info.chunksize;
  int64_t left = f->info.nbytes - start;
  return (int32_t)(left < f->info.chunksize ? left : f->info.chunksize);
}

int64_t b2_frame_chunk_start(const b2_frame *f, int64_t i) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  b2_frame_rdlock(f);
  int64_t r = i < 0 || i > f->info.nchunks
                  ? b2_fail(B2_E_RANGE, "chunk %lld is out of range",
                            (long long)i)
                  : start_of(f, i);
  b2_frame_rdunlock(f);
  return r;
}

int32_t b2_frame_chunk_nbytes(const b2_frame *f, int64_t i) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  b2_frame_rdlock(f);
  int32_t r = i < 0 || i >= f->info.nchunks
                  ? b2_fail(B2_E_RANGE, "chunk %lld is out of range",
                            (long long)i)
                  : b2_frame_nbytes_of(f, i);
  b2_frame_rdunlock(f);
  return r;
}

static int64_t chunk_at(const b2_frame *f, int64_t offset) {
  if (offset < 0 || offset >= f->info.nbytes)
    return b2_fail(B2_E_RANGE, "offset %lld is outside the frame's bytes",
                   (long long)offset);
  if (!f->starts) return offset / f->info.chunksize;
  /* Last chunk whose start is <= offset (empty chunks are skipped). */
  int64_t lo = 0, hi = f->info.nchunks - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo + 1) / 2;
    if (f->starts[mid] <= offset) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

int64_t b2_frame_chunk_at(const b2_frame *f, int64_t offset) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  b2_frame_rdlock(f);
  int64_t r = chunk_at(f, offset);
  b2_frame_rdunlock(f);
  return r;
}

void b2_frame_set_geom(b2_frame *f, const b2_chunk_geom *g) {
  if (!f) return;
  memset(&f->geom, 0, sizeof f->geom);
  if (g && g->ndim > 0 && g->ndim <= B2_CHUNK_GEOM_MAXDIM) f->geom = *g;
}

const b2_chunk_geom *b2_frame_geom(const b2_frame *f) {
  return f && f->geom.ndim > 0 ? &f->geom : NULL;
}
