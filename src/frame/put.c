/*
 * put.c - stage chunks in a writable frame: replace or append a chunk
 * (its bytes go to disk at once, past the committed end of a contiguous
 * frame or into a new chunk file of a sparse one), special entries, and
 * resizing.  The index and geometry change under the write lock, so
 * readers of the same b2_frame see each put whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "b2_chunk.h"
#include "b2_error.h"
#include "common/crc32c.h"
#include "common/fileio.h"
#include "common/util.h"
#include "frame/frame_impl.h"

int b2_frame_w_begin(b2_frame *f) {
  if (!f) return b2_fail(B2_E_INVAL, "no frame");
  if (!f->w) return b2_fail(B2_E_ROFS, "the frame is open read-only");
  pthread_mutex_lock(&f->w->wmu);
  return 0;
}

void b2_frame_w_end(b2_frame *f) { pthread_mutex_unlock(&f->w->wmu); }

/* Check that chunk i may hold nb bytes; *nbytes gets the frame's new
 * logical size. */
static int geometry(const b2_frame *f, int64_t i, int32_t nb,
                    int64_t *nbytes) {
  const b2_frame_info *in = &f->info;
  int64_t n = in->nchunks, cs = in->chunksize;
  if (cs <= 0) cs = nb; /* not set yet (empty frame): the first chunk's */
  if (i < 0 || i > n)
    return b2_fail(B2_E_RANGE, "chunk %lld: out of range (%lld chunks; "
                   "append with %lld)", (long long)i, (long long)n,
                   (long long)n);
  if (nb <= 0 || nb > cs)
    return b2_fail(B2_E_INVAL, "chunk %lld: holds %d bytes, the frame's "
                   "chunks hold 1 to %lld", (long long)i, nb, (long long)cs);
  if (i < n - 1 && nb != cs)
    return b2_fail(B2_E_INVAL, "chunk %lld: holds %d bytes; only the last "
                   "chunk may hold fewer than %lld", (long long)i, nb,
                   (long long)cs);
  if (i == n && n > 0 && in->nbytes != n * cs)
    return b2_fail(B2_E_INVAL, "chunk %lld: cannot append after a last "
                   "chunk that is not full (%lld bytes in %lld chunks)",
                   (long long)i, (long long)in->nbytes, (long long)n);
  if (i == n && n + 1 > B2_FRAME_MAX_CHUNKS)
    return b2_fail(B2_E_LIMIT, "more than %lld chunks",
                   (long long)B2_FRAME_MAX_CHUNKS);
  *nbytes = i >= n - 1 ? i * cs + nb : in->nbytes;
  return 0;
}

/* ---- sparse: chunk file numbers ----------------------------------------- */

static int grow_numbers(b2_frame_w *w) {
  int64_t ncap = 2 * w->ncap;
  if (ncap > (int64_t)UINT32_MAX + 1) ncap = (int64_t)UINT32_MAX + 1;
  if (ncap <= w->ncap)
    return b2_fail(B2_E_LIMIT, "no chunk file number left");
  uint8_t *c = realloc(w->cbit, (size_t)ncap);
  if (c) w->cbit = c;
  uint32_t *r = realloc(w->sref, (size_t)ncap * sizeof *r);
  if (r) w->sref = r;
  int32_t *z = realloc(w->nsize, (size_t)ncap * sizeof *z);
  if (z) w->nsize = z;
  if (!c || !r || !z) return b2_fail(B2_E_NOMEM, "out of memory");
  size_t more = (size_t)(ncap - w->ncap);
  memset(w->cbit + w->ncap, 0, more);
  memset(w->sref + w->ncap, 0, more * sizeof *r);
  memset(w->nsize + w->ncap, 0, more * sizeof *z);
  w->ncap = ncap;
  return 0;
}

/* Write `chunk` to a new chunk file with the lowest number no index
 * (committed or staged) uses; *num gets it. */
static int write_chunk_file(b2_frame *f, const void *chunk, size_t len,
                            int64_t *num) {
  b2_frame_w *w = f->w;
  int64_t n = w->next_free;
  for (;;) {
    if (n >= w->ncap) {
      int rc = grow_numbers(w);
      if (rc < 0) return rc;
    }
    if (!w->cbit[n] && !w->sref[n]) break;
    n++;
  }
  w->next_free = n + 1;
  char name[32];
  b2_sframe_name(n, name);
  int fd = b2_io_openat(f->dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd == B2_E_EXIST) {
    /* A leftover of an interrupted writer: no index references it. */
    int rc = b2_io_unlinkat(f->dirfd, name, 0);
    if (rc < 0) return rc;
    fd = b2_io_openat(f->dirfd, name, O_WRONLY | O_CREAT | O_EXCL, 0644);
  }
  if (fd < 0) return b2_context(fd, "chunk file");
  int rc = b2_io_pwrite(fd, chunk, len, 0);
  b2_io_close(fd);
  if (rc < 0) {
    (void)b2_io_unlinkat(f->dirfd, name, 0);
    w->next_free = n;
    return b2_context(rc, "chunk file %s", name);
  }
  w->sref[n]++;
  w->nsize[n] = (int32_t)len;
  *num = n;
  return 0;
}

/* A staged entry stops referencing `e`: a chunk file that no index on
 * disk can reference goes at once. */
static void release_entry(b2_frame *f, int64_t e) {
  b2_frame_w *w = f->w;
  if (f->info.layout != B2_LAYOUT_SPARSE || e < 0 || e >= w->ncap) return;
  if (w->sref[e] > 0) w->sref[e]--;
  if (w->sref[e] == 0 && !w->cbit[e]) {
    char name[32];
    b2_sframe_name(e, name);
    (void)b2_io_unlinkat(f->dirfd, name, 0);
    w->nsize[e] = 0;
    if (e < w->next_free) w->next_free = e;
  }
}

/* ---- staging ------------------------------------------------------------ */

/* Set entry i (appending when i == nchunks) under the write lock; the
 * entry it replaces is released after. */
static void install(b2_frame *f, int64_t i, int64_t entry, int32_t cs,
                    int32_t nb, int64_t nbytes, uint32_t crc) {
  b2_frame_w *w = f->w;
  int64_t old = -1;
  pthread_rwlock_wrlock(&w->lock);
  if (f->info.chunksize <= 0) f->info.chunksize = nb;
  if (i == f->info.nchunks) f->info.nchunks++;
  else old = f->offsets[i];
  f->offsets[i] = entry;
  w->csize[i] = cs;
  b2_frame_csum_set(f, i, crc);
  f->info.nbytes = nbytes;
  if (f->info.layout == B2_LAYOUT_CONTIGUOUS) f->data_end = w->append_pos;
  pthread_rwlock_unlock(&w->lock);
  release_entry(f, old);
  w->dirty = 1;
}

static int put_entry(b2_frame *f, int64_t i, int64_t entry, int32_t nb) {
  int64_t nbytes;
  int rc = geometry(f, i, nb, &nbytes);
  if (!rc) rc = b2_frame_w_reserve(f, i + 1);
  if (rc < 0) return rc;
  install(f, i, entry, 0, nb, nbytes, 0);
  return 0;
}

static int put_parsed(b2_frame *f, int64_t i, const void *chunk, size_t len,
                      const b2_chunk_info *cip, int special);

int b2_frame_put_chunk(b2_frame *f, int64_t i, const void *chunk,
                       size_t len) {
  if (!chunk || len < B2_CHUNK_HEADER_MIN)
    return b2_fail(B2_E_INVAL, "put chunk %lld: %zu bytes are no chunk",
                   (long long)i, chunk ? len : 0);
  b2_chunk_info ci;
  int rc = b2_chunk_parse(chunk, len, &ci);
  if (rc < 0) return b2_context(rc, "put chunk %lld", (long long)i);
  if ((size_t)ci.cbytes != len)
    return b2_fail(B2_E_INVAL, "put chunk %lld: cbytes %d but %zu bytes "
                   "given", (long long)i, ci.cbytes, len);
  /* Special index entries only for whole items: the reference library
   * refuses special chunks whose size is not a multiple of the typesize. */
  int special = (ci.special == B2_SPECIAL_ZERO ||
                 ci.special == B2_SPECIAL_NAN ||
                 ci.special == B2_SPECIAL_UNINIT) &&
                f->info.typesize > 0 && ci.nbytes % f->info.typesize == 0;
  /* The reference library reads at least a 32-byte header of every stored
   * chunk. */
  if (!special && len < B2_CHUNK_HEADER_EXT)
    return b2_fail(B2_E_INVAL, "put chunk %lld: %zu bytes, a stored chunk "
                   "needs at least %d", (long long)i, len,
                   B2_CHUNK_HEADER_EXT);
  rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  rc = put_parsed(f, i, chunk, len, &ci, special);
  b2_frame_w_end(f);
  return rc;
}

/* put_chunk with the writer's mutex held and the chunk parsed. */
static int put_parsed(b2_frame *f, int64_t i, const void *chunk, size_t len,
                      const b2_chunk_info *cip, int special) {
  b2_chunk_info ci = *cip;
  int rc;
  if (special)
    return put_entry(f, i, b2_frame_special_entry(ci.special), ci.nbytes);
  int64_t nbytes = 0, entry = 0;
  rc = geometry(f, i, ci.nbytes, &nbytes);
  if (!rc) rc = b2_frame_w_reserve(f, i + 1);
  if (!rc && f->info.layout == B2_LAYOUT_SPARSE) {
    rc = write_chunk_file(f, chunk, len, &entry);
  } else if (!rc) {
    b2_frame_w *w = f->w;
    rc = b2_io_pwrite(f->fd, chunk, len, w->append_pos);
    b2_frame_csum_hold(f); /* staged past the frame: it is unchanged */
    if (rc < 0) rc = b2_context(rc, "put chunk %lld", (long long)i);
    entry = w->append_pos - f->data_pos;
    if (!rc) w->append_pos += (int64_t)len;
  }
  if (!rc) install(f, i, entry, (int32_t)len, ci.nbytes, nbytes,
                   b2_crc32c(0, chunk, len));
  return rc;
}

int b2_frame_put_special(b2_frame *f, int64_t i, int kind, int32_t nbytes) {
  if (kind != B2_SPECIAL_ZERO && kind != B2_SPECIAL_NAN &&
      kind != B2_SPECIAL_UNINIT)
    return b2_fail(B2_E_INVAL, "put special %lld: kind %d cannot be an "
                   "index entry", (long long)i, kind);
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  rc = put_entry(f, i, b2_frame_special_entry(kind), nbytes);
  b2_frame_w_end(f);
  return rc;
}

/* Remember that chunk j must hold its new expected size at commit. */
static void add_fix(b2_frame_w *w, int64_t j) {
  for (int k = 0; k < w->nfix; k++)
    if (w->fix[k] == j) return;
  if (w->nfix < (int)(sizeof w->fix / sizeof w->fix[0])) w->fix[w->nfix++] = j;
  else w->fix_all = 1;
}

/* Expected size of chunk j for a logical size of `nbytes`. */
static int64_t expect(int64_t j, int64_t cs, int64_t nbytes) {
  int64_t left = nbytes - j * cs;
  return left < cs ? left : cs;
}

int b2_frame_resize(b2_frame *f, int64_t nbytes) {
  int rc = b2_frame_w_begin(f);
  if (rc < 0) return rc;
  b2_frame_w *w = f->w;
  int64_t cs = f->info.chunksize, n = f->info.nchunks;
  int64_t old_nbytes = f->info.nbytes;
  int64_t nn = nbytes >= 0 && cs > 0 ? nbytes / cs + (nbytes % cs != 0) : 0;
  if (nbytes < 0)
    rc = b2_fail(B2_E_INVAL, "resize to %lld bytes", (long long)nbytes);
  else if (cs <= 0 && nbytes > 0)
    rc = b2_fail(B2_E_INVAL, "resize: the frame's chunk size is not set yet "
                 "(put a first chunk)");
  else if (nn > B2_FRAME_MAX_CHUNKS)
    rc = b2_fail(B2_E_LIMIT, "resize to %lld chunks (at most %lld)",
                 (long long)nn, (long long)B2_FRAME_MAX_CHUNKS);
  if (!rc) rc = b2_frame_w_reserve(f, nn);
  if (rc < 0) {
    b2_frame_w_end(f);
    return rc;
  }
  pthread_rwlock_wrlock(&w->lock);
  for (int64_t i = n; i < nn; i++) {
    f->offsets[i] = b2_frame_special_entry(B2_SPECIAL_ZERO);
    w->csize[i] = 0;
  }
  f->info.nchunks = nn;
  f->info.nbytes = nbytes;
  pthread_rwlock_unlock(&w->lock);
  /* Entries cut off keep their slots until the mutex is released. */
  for (int64_t i = nn; i < n; i++) release_entry(f, f->offsets[i]);
  /* The old last chunk and the new last chunk may now be expected to hold
   * another number of bytes. */
  int64_t cand[2] = {n - 1, nn - 1};
  for (int k = 0; k < 2; k++) {
    int64_t j = cand[k];
    if (j < 0 || j >= nn || j >= n || f->offsets[j] < 0) continue;
    if (expect(j, cs, old_nbytes) != expect(j, cs, nbytes)) add_fix(w, j);
  }
  if (nbytes != old_nbytes) w->dirty = 1;
  b2_frame_w_end(f);
  return 0;
}

int b2_frame_w_fix_tail(b2_frame *f) {
  int64_t n = f->info.nchunks;
  int32_t ts = f->info.typesize;
  if (n <= 0 || ts <= 1 || f->offsets[n - 1] >= 0) return 0;
  int32_t nb = b2_frame_nbytes_of(f, n - 1);
  if (nb % ts == 0) return 0;
  /* A special last chunk of a partial item: store real zeros instead. */
  b2_cparams p;
  b2_cparams_default(&p);
  p.codec = f->info.codec;
  p.codec_meta = f->info.codec_meta;
  p.clevel = f->info.clevel;
  p.typesize = ts;
  p.blocksize = f->info.blocksize > 0 ? f->info.blocksize : 0;
  if (f->info.splitmode) p.splitmode = f->info.splitmode;
  memcpy(p.filters, f->info.filters, sizeof p.filters);
  memcpy(p.filters_meta, f->info.filters_meta, sizeof p.filters_meta);
  size_t cap = b2_chunk_bound((size_t)nb);
  uint8_t *zeros = calloc(1, (size_t)nb), *buf = malloc(cap);
  int rc = zeros && buf ? b2_chunk_encode(&p, zeros, (size_t)nb, buf, cap)
                        : b2_fail(B2_E_NOMEM, "no memory for a zero chunk");
  b2_chunk_info ci;
  if (rc >= 0) rc = b2_chunk_parse(buf, (size_t)rc, &ci);
  if (rc >= 0) rc = put_parsed(f, n - 1, buf, (size_t)ci.cbytes, &ci, 0);
  free(zeros);
  free(buf);
  return rc < 0 ? b2_context(rc, "last chunk of zeros") : 0;
}

int b2_frame_w_check_fixups(b2_frame *f) {
  b2_frame_w *w = f->w;
  int64_t n = f->info.nchunks;
  int64_t count = w->fix_all ? n : w->nfix;
  for (int64_t k = 0; k < count; k++) {
    int64_t j = w->fix_all ? k : w->fix[k];
    if (j >= n || f->offsets[j] < 0) continue;
    int32_t nb;
    int rc = b2_frame_stored_nbytes(f, j, &nb);
    if (rc < 0) return b2_context(rc, "chunk %lld", (long long)j);
    int32_t want = b2_frame_nbytes_of(f, j);
    if (nb != want)
      return b2_fail(B2_E_INVAL, "chunk %lld holds %d bytes where the frame "
                     "now expects %d: put it again before commit",
                     (long long)j, nb, want);
  }
  return 0;
}
