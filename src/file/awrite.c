/*
 * awrite.c - writing through a b2nd array's views (.npy and C order), and
 * new .npy files becoming b2nd arrays.
 *
 * Array views.  Bytes written inside the items go through the geometry
 * (b2_b2nd_update) to the decoded chunks in the shared cache, as logical
 * writes do: a chunk is decoded first unless the write covers all its
 * items, marked dirty, and compressed in the background as soon as the
 * write reaches its last item in C order (a C-order stream completes the
 * chunks one after another), else by the cache or at flush.  A write of
 * the whole .npy header for the same array with other rows resizes it (a
 * header spelled otherwise is kept); a size inside a row is kept, not
 * committed, until whole rows again.  What the array cannot say (another
 * dtype or shape in the header, part of it changed, a size inside it, a
 * size inside a row at a commit) makes the file the plain frame of its
 * bytes (to_bytes), written on as any.  A size change by whole rows of
 * the first axis resizes the array: the frame gets or loses chunks, the
 * items an edge chunk's padding gives back are zeroed, and the `b2nd`
 * metalayer with the new shape is staged, to be committed with the index.
 * Truncating a .npy view to 0 starts the file afresh as a new .npy file.
 *
 * New .npy files.  Until the header is complete its bytes (and any others
 * written meanwhile) are held in memory; the file on disk stays an empty
 * plain frame (or, for an array truncated to 0, the old array).  Once the
 * header parses, the frame is created anew as a b2nd array of its shape
 * and dtype (chunk and block shapes chosen, or set with user.b2.chunkshape
 * / blockshape), sized with zero chunks, and the held bytes are written
 * through the new array view.  A header that cannot become a b2nd array
 * (Fortran order, object dtype, damaged, too many dimensions), or one
 * still incomplete at a flush (close, fsync) or past PEND_MAX bytes, makes the file a plain
 * frame of the bytes written, with a note saying why (b2_file_take_note).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "b2_error.h"
#include "common/fileio.h"
#include "common/msgpack.h"
#include "common/util.h"
#include "file/file_impl.h"


static int to_bytes(b2_file *f, int64_t keep, const char *why);

static int64_t hdr_len(const b2_file *f) {
  return f->view == B2_VIEW_NPY ? (int64_t)f->npylen : 0;
}

/* ---- items of an array ---------------------------------------------------- */

typedef struct upd {
  b2_file *f;
  int64_t aoff, aend;   /* array bytes written */
  b2_cache_entry *e;    /* chunk `cur`, in a write section */
  int64_t cur;
  int64_t *done;        /* chunks whose last item the write reached */
  size_t ndone, capdone;
  int lossy;            /* the frame's blocks encode lossily as wholes (ZFP,
                           NDMEAN): chunks are always decoded first, so
                           their padding stays as decoded (as python-blosc2
                           keeps it) */
  int changed;          /* chunk `cur` got bytes it did not hold (or was
                           resized, or started blank): only then is it
                           dirty.  Bytes written as they were leave it as it
                           was: a mapped file writes back whole pages, and a
                           page straddling two chunks is sent again when the
                           second is written; for lossy blocks, encoding a
                           chunk again would also move its values */
  int reach;            /* the write reaches chunk `cur`'s last item */
  int64_t start;        /* the file offset of chunk `cur`'s first item */
  int64_t held;         /* bytes of the array's items chunk `cur` holds */
  int parked;           /* chunk `cur` is parked (spill.c): runs go there */
  struct pslot *ps;     /* runs for parked chunks, gathered (PARK_SLOTS) */
  int pnext;            /* the slot taken next when all are in use */
} upd;

/* Runs for parked chunks are gathered before they go to the unnamed file:
 * a C-order writer in cubes or tiles hands each chunk one run per row
 * (512 bytes for 128^3 cubes of float32), in turn with the other chunks
 * across, and a pwrite each cost more than the rest of the write (525,000
 * of them for a 512 MiB volume).  One row after another, a chunk's runs
 * are contiguous in it, so each chunk in flight gets a slot where they
 * are joined, written out when the next run does not follow on, when the
 * slot is full or wanted for another chunk, and at the end of the write. */
#define PARK_SLOTS 16
#define PARK_SLOT_BYTES ((size_t)64 << 10)
typedef struct pslot {
  int64_t chunk; /* -1: free */
  size_t off, len;
  uint8_t *buf;  /* PARK_SLOT_BYTES */
} pslot;

static void upd_done(upd *u, int64_t chunk);

static void upd_close(upd *u) {
  int64_t chunk = u->cur;
  u->parked = 0;
  u->cur = -1;
  if (!u->e) return;
  if (b2_file_chunk_done(u->f, u->reach, u->start, b2_cache_written(u->e), (size_t)u->held))
    upd_done(u, chunk);
  b2_cache_write_end(u->f->env->cache, u->e, u->changed);
  b2_cache_release(u->f->env->cache, u->e);
  u->e = NULL;
}

/* The write leaves `chunk` done (b2_file_chunk_done): note it, to be
 * compressed. */
static void upd_done(upd *u, int64_t chunk) {
  if (u->ndone && u->done[u->ndone - 1] == chunk) return;
  if (u->ndone == u->capdone) {
    size_t ncap = u->capdone ? 2 * u->capdone : 16;
    int64_t *n = realloc(u->done, ncap * sizeof *n);
    if (!n) return; /* compressed later instead */
    u->done = n;
    u->capdone = ncap;
  }
  u->done[u->ndone++] = chunk;
}

/* Open a write section on pinned entry e at the array's chunk length
 * (resized when it differs, zeros added): 1 when it was resized, 0 when
 * not, < 0 on error (no section open then). */
static int entry_begin(b2_file *f, b2_cache_entry *e) {
  b2_cache *c = f->env->cache;
  int rc = b2_cache_write_begin(c, e, f, b2_file_flush_chunk);
  if (rc < 0) return rc;
  size_t want = (size_t)f->array.chunk_nbytes;
  if (b2_cache_len(e) == want) return 0;
  if ((rc = b2_cache_resize(c, e, want)) < 0) {
    b2_cache_write_end(c, e, 0);
    return rc;
  }
  return 1;
}

/* Open chunk `chunk` for the run at its byte `off`.  A chunk the write
 * covers whole starts blank (no decode) only at its first run (off 0): a
 * C-order write comes back to a chunk of tiles once per row of blocks, and
 * the chunk may have left the cache in between (written back under the
 * dirty limit, then evicted), holding the rows this write gave it. */
static int upd_open(upd *u, int64_t chunk, size_t off) {
  b2_file *f = u->f;
  b2_cache *c = f->env->cache;
  int64_t lo, hi;
  int rc = b2_b2nd_chunk_span(&f->array, chunk, &lo, &hi, &u->held);
  if (rc < 0) return rc;
  u->reach = hi <= u->aend;
  u->start = lo + hdr_len(f);
  b2_cache_entry *e;
  /* Parked and not in the cache: the runs go to its parked bytes (a
   * C-order writer's; it is unparked once the writer reaches its end). */
  if (b2_cache_peek(c, f->id, chunk, &e) == 0) {
    b2_cache_release(c, e);
  } else if (b2_file_spill_has(f, chunk)) {
    if (u->reach) upd_done(u, chunk);
    u->parked = 1;
    u->cur = chunk;
    return 0;
  }
  int blank = off == 0 && u->aoff <= lo && hi <= u->aend && !u->lossy;
  rc = b2_file_wpin(f, chunk, blank, &e);
  if (rc == B2_E_STALE && b2_file_spill_has(f, chunk)) { /* parked meanwhile */
    if (u->reach) upd_done(u, chunk);
    u->parked = 1;
    u->cur = chunk;
    return 0;
  }
  if (rc < 0) return rc;
  if ((rc = entry_begin(f, e)) < 0) {
    b2_cache_release(c, e);
    return rc;
  }
  u->changed = rc || blank; /* a blank chunk holds nothing to compare with */
  u->e = e;
  u->cur = chunk;
  return 0;
}

/* Bytes [off, off+len) of chunk `chunk`, parked when the write began:
 * to its parked bytes, or, when it is parked no longer (the idle flusher
 * compressed it meanwhile) or the unnamed file fails (no space, an I/O
 * error), through the cache as if it had not been parked. */
static int park_put(upd *u, int64_t chunk, size_t off, const void *src, size_t len) {
  b2_file *f = u->f;
  b2_cache *c = f->env->cache;
  b2_cache_entry *e = NULL;
  for (int tries = 0; !e; tries++) {
    /* In the cache (unparked by an earlier fallback of this write): the
     * newer bytes are there. */
    if (b2_cache_peek(c, f->id, chunk, &e) == 0) break;
    int rc = b2_file_spill_write(f, chunk, off, src, len);
    if (rc > 0) return 0;
    upd_close(u); /* (its entry may be this chunk's) */
    if (rc < 0) {
      /* The parked bytes go to the cache, where the newer bytes of a
       * chunk both parked and cached are looked for first. */
      int r2 = b2_file_spill_unpark(f, chunk, &e);
      if (r2 < 0) return rc;
      if (r2 > 0) break;
    }
    rc = b2_file_wpin(f, chunk, 0, &e);
    if (rc == B2_E_STALE && tries < 8) continue; /* parked again meanwhile */
    if (rc < 0) return rc;
  }
  int rc = entry_begin(f, e);
  if (rc >= 0) {
    memcpy(b2_cache_wdata(e) + off, src, len);
    b2_cache_write_end(c, e, 1);
  }
  b2_cache_release(c, e);
  return rc < 0 ? rc : 0;
}

static int park_flush(upd *u, pslot *p) {
  if (p->chunk < 0 || p->len == 0) return 0;
  size_t n = p->len;
  p->len = 0;
  return park_put(u, p->chunk, p->off, p->buf, n);
}

static int park_flush_all(upd *u) {
  int rc = 0;
  for (int k = 0; u->ps && k < PARK_SLOTS; k++) {
    int r = park_flush(u, &u->ps[k]);
    if (rc == 0) rc = r;
    u->ps[k].chunk = -1;
  }
  return rc;
}

static void park_free(upd *u) {
  if (!u->ps) return;
  free(u->ps[0].buf);
  free(u->ps);
  u->ps = NULL;
}

/* A run for parked chunk `chunk`: joined to its slot's bytes when it
 * follows them, else the slot is written out first. */
static int park_run(upd *u, int64_t chunk, size_t off, const void *src, size_t len) {
  if (!u->ps && len < PARK_SLOT_BYTES) {
    pslot *ps = calloc(PARK_SLOTS, sizeof *ps);
    uint8_t *buf = ps ? malloc(PARK_SLOTS * PARK_SLOT_BYTES) : NULL;
    if (buf) {
      for (int k = 0; k < PARK_SLOTS; k++) ps[k] = (pslot){-1, 0, 0, buf + k * PARK_SLOT_BYTES};
      u->ps = ps;
    } else {
      free(ps); /* no room to gather: one write each */
    }
  }
  pslot *p = NULL, *free_slot = NULL;
  for (int k = 0; u->ps && k < PARK_SLOTS && !p; k++) {
    if (u->ps[k].chunk == chunk) p = &u->ps[k];
    else if (u->ps[k].chunk < 0 && !free_slot) free_slot = &u->ps[k];
  }
  if (!u->ps || len >= PARK_SLOT_BYTES) {
    int rc = p ? park_flush(u, p) : 0;
    return rc < 0 ? rc : park_put(u, chunk, off, src, len);
  }
  if (p && (p->off + p->len != off || p->len + len > PARK_SLOT_BYTES)) {
    int rc = park_flush(u, p);
    if (rc < 0) return rc;
  }
  if (!p) {
    p = free_slot;
    if (!p) { /* all in use: the next in turn is written out */
      p = &u->ps[u->pnext];
      u->pnext = (u->pnext + 1) % PARK_SLOTS;
      int rc = park_flush(u, p);
      if (rc < 0) return rc;
    }
    p->chunk = chunk;
  }
  if (u->cur != chunk) {
    /* A flush above went through the cache (park_put closed the writer's
     * chunk): this chunk may be cached now, so this run goes there too,
     * never into a slot behind the cache's newer bytes. */
    p->chunk = -1;
    return park_put(u, chunk, off, src, len);
  }
  if (p->len == 0) p->off = off;
  memcpy(p->buf + p->len, src, len);
  p->len += len;
  return 0;
}

static int upd_write(void *ctx, int64_t chunk, size_t off, size_t len, const void *src) {
  upd *u = ctx;
  if (chunk != u->cur) {
    upd_close(u);
    int rc = upd_open(u, chunk, off);
    if (rc < 0) return rc;
  }
  if (u->parked) return park_run(u, chunk, off, src, len);
  b2_cache_note_write(u->e, off, len);
  uint8_t *dst = b2_cache_wdata(u->e) + off;
  if (!u->changed && memcmp(dst, src, len) == 0) return 0; /* as it was: see `changed` */
  memcpy(dst, src, len);
  u->changed = 1;
  return 0;
}

/* Store n bytes at array byte aoff (within the array). */
static int items_write(b2_file *f, const uint8_t *src, size_t n, int64_t aoff) {
  while (n > 0) {
    size_t piece = B2_MIN(n, (size_t)1 << 30);
    upd u = {.f = f, .aoff = aoff, .aend = aoff + (int64_t)piece, .cur = -1,
             .lossy = b2_cparams_lossy_blocks(&f->cp)};
    /* spill.c: where the writer is (somewhere in this write, then past it) */
    atomic_store(&f->wlo, aoff);
    atomic_store(&f->whi, aoff + (int64_t)piece);
    int rc = b2_b2nd_update(&f->array, (uint64_t)aoff, piece, src, upd_write, &u);
    int r2 = park_flush_all(&u);
    if (rc >= 0 && r2 < 0) rc = r2;
    park_free(&u);
    upd_close(&u);
    atomic_store(&f->wlo, aoff + (int64_t)piece);
    int unparked = 0;
    for (size_t k = 0; rc >= 0 && k < u.ndone; k++) {
      b2_cache_entry *e;
      if (b2_cache_peek(f->env->cache, f->id, u.done[k], &e) == 0) {
        b2_file_flush_soon(f, e);
      } else if ((rc = b2_file_spill_unpark(f, u.done[k], &e)) > 0) {
        /* A row of parked chunks completed at once: each is loaded to be
         * compressed, a few at a time, so that they fit in the cache. */
        b2_file_flush_soon(f, e);
        if (f->env->pool && ++unparked >= 2 * b2_pool_threads(f->env->pool)) {
          b2_pool_wait(f->env->pool, &f->group);
          unparked = 0;
        }
      }
    }
    free(u.done);
    if (rc < 0) return rc;
    src += piece;
    aoff += (int64_t)piece;
    n -= piece;
  }
  return 0;
}

/* ---- size changes of an array ---------------------------------------------- */

/* Bytes of one row of the first axis (0 for a 0-d array). */
static int64_t row_bytes(const b2_b2nd *a) {
  if (a->ndim == 0) return 0;
  int64_t rowb = a->itemsize;
  for (int d = 1; d < a->ndim; d++) rowb *= a->shape[d];
  return rowb;
}

int b2_file_aragged(const b2_file *f) {
  return f->has_array && !f->pending &&
         atomic_load(&f->size) != hdr_len(f) + b2_b2nd_nbytes(&f->array);
}

/* The .npy view's header for array na: numpy.save's when it has the
 * current header's length, else the same text padded to that length (a
 * writer's own header was shorter or longer), so that the items stay
 * where they are; *kept: not numpy.save's.  malloc'd into *out. */
static int header_for(b2_file *f, const b2_b2nd *na, char **out, int *kept) {
  int64_t hdr = hdr_len(f);
  char *npy = NULL;
  int hn = b2_npy_header(na, NULL, 0);
  *kept = hn >= 0 && hn != hdr;
  if (hn >= 0 && !(npy = malloc((size_t)hdr))) hn = b2_fail(B2_E_NOMEM, "no memory");
  if (hn >= 0)
    hn = *kept ? b2_npy_header_sized(na, npy, (size_t)hdr) : b2_npy_header(na, npy, (size_t)hdr);
  if (hn == B2_E_LIMIT)
    hn = b2_fail(B2_E_INVAL, "%s: %lld rows need a .npy header longer than its %lld bytes",
                 f->path, (long long)na->shape[0], (long long)hdr);
  if (hn < 0) {
    free(npy);
    return hn;
  }
  *out = npy;
  return 0;
}

/* The rows of the first axis the view's .npy header gives (-1: none). */
static int64_t header_rows(const b2_file *f) {
  char *descr = malloc(f->npylen + 1); /* a descr is shorter than its header */
  size_t hl;
  int fortran, ndim = 0;
  int64_t shape[B2_B2ND_MAXDIM];
  int rc = descr ? b2_npy_parse(f->npy, f->npylen, &hl, descr, f->npylen + 1, &fortran, &ndim, shape)
                 : B2_E_NOMEM;
  free(descr);
  return rc < 0 || ndim < 1 ? -1 : shape[0];
}

/* The view's header is about to show rows its writer's did not give:
 * keep the header a plain file would still hold, for to_bytes (wmu held). */
static void keep_posix(b2_file *f) {
  if (f->npy_posix || !f->npy) return;
  f->npy_posix = malloc(f->npylen);
  if (f->npy_posix) memcpy(f->npy_posix, f->npy, f->npylen);
}

static void drop_posix(b2_file *f) {
  free(f->npy_posix);
  f->npy_posix = NULL;
}

/* Make the view's header give `rows` rows (wmu held; szlock taken here):
 * while the size ends inside a row, the rows complete, so that bytes
 * appended leave the header as it was until they make a row; the array's
 * own count once whole. */
static int show_rows(b2_file *f, int64_t rows) {
  b2_b2nd *a = &f->array, na;
  int64_t shape[B2_B2ND_MAXDIM];
  memcpy(shape, a->shape, sizeof shape);
  shape[0] = rows;
  int rc = b2_b2nd_make(&na, a->ndim, shape, a->chunkshape, a->blockshape, a->itemsize, a->dtype);
  if (rc < 0) return b2_context(rc, "%s", f->path);
  na.dtype_format = a->dtype_format;
  char *npy;
  int kept;
  rc = header_for(f, &na, &npy, &kept);
  b2_b2nd_free(&na);
  if (rc < 0) return rc;
  keep_posix(f);
  pthread_rwlock_wrlock(&f->szlock);
  free(f->npy);
  f->npy = npy;
  pthread_rwlock_unlock(&f->szlock);
  return 0;
}

/* Resize to `size` view bytes by whole rows of the first axis (wmu and
 * szlock exclusive held). */
static int set_rows(b2_file *f, int64_t size) {
  b2_b2nd *a = &f->array;
  b2_cache *c = f->env->cache;
  int64_t hdr = hdr_len(f), rowb = row_bytes(a);
  if (a->ndim == 0 || rowb == 0 || a->chunkshape[0] <= 0 || size < hdr || (size - hdr) % rowb)
    return b2_fail(B2_E_INVAL, "%s: an array's size changes only by whole rows of its first "
                   "axis (%lld bytes each)", f->path, (long long)rowb);
  int64_t shape[B2_B2ND_MAXDIM];
  memcpy(shape, a->shape, sizeof shape);
  shape[0] = (size - hdr) / rowb;
  b2_b2nd na;
  int rc = b2_b2nd_make(&na, a->ndim, shape, a->chunkshape, a->blockshape, a->itemsize, a->dtype);
  if (rc < 0) return b2_context(rc, "%s", f->path);
  na.dtype_format = a->dtype_format;
  char *npy = NULL;
  int kept = 0; /* the new header is not numpy.save's: kept (B2_NPY_HEADER_VLMETA) */
  if (f->view == B2_VIEW_NPY && (rc = header_for(f, &na, &npy, &kept)) < 0) {
    b2_b2nd_free(&na);
    return rc;
  }
  /* Growing: the old edge chunks' padding along the first axis becomes
   * items, which must read as zeros. */
  int64_t cs0 = a->chunkshape[0], nch0 = (a->shape[0] + cs0 - 1) / cs0;
  if (shape[0] > a->shape[0] && a->shape[0] % cs0 && a->nchunks > 0) {
    int64_t per = a->nchunks / nch0;
    for (int64_t k = (nch0 - 1) * per; rc == 0 && k < nch0 * per; k++) {
      b2_cache_entry *e;
      if ((rc = b2_file_wpin(f, k, 0, &e)) < 0) break;
      if ((rc = entry_begin(f, e)) >= 0) {
        rc = b2_b2nd_zero_rows(a, k, a->shape[0], b2_cache_wdata(e));
        b2_cache_write_end(c, e, rc == 0);
      }
      b2_cache_release(c, e);
    }
  }
  uint8_t *meta = NULL;
  size_t mlen = 0;
  if (rc == 0) rc = b2_b2nd_meta_encode(&na, &meta, &mlen);
  b2_b2nd old = *a;
  if (rc == 0) {
    pthread_mutex_lock(&f->fmu);
    rc = b2_frame_resize(f->frame, na.nchunks * na.chunk_nbytes);
    if (rc == 0 && (rc = b2_frame_meta_set(f->frame, "b2nd", meta, mlen)) < 0)
      b2_frame_resize(f->frame, old.nchunks * old.chunk_nbytes);
    /* The header shown from now on, staged with the shape (a failure
     * loses only a writer's spelling: numpy.save's shows at the reopen) */
    if (rc == 0 && npy &&
        (!kept || b2_npy_header_keep(f->frame, &na, npy, (size_t)hdr) < 0))
      (void)b2_frame_vlmeta_del(f->frame, B2_NPY_HEADER_VLMETA);
    if (rc == 0) {
      *a = na;
      atomic_store(&f->size, hdr + b2_b2nd_nbytes(&na));
      b2_file_spill_cut(f, na.nchunks);
    }
    atomic_fetch_add(&f->epoch, 1);
    pthread_mutex_unlock(&f->fmu);
  }
  free(meta);
  if (rc < 0) {
    free(npy);
    b2_b2nd_free(&na);
    return b2_context(rc, "%s: resize", f->path);
  }
  for (int64_t k = na.nchunks; k < old.nchunks; k++) b2_cache_discard(c, f->id, k);
  b2_b2nd_free(&old);
  if (npy) {
    keep_posix(f);
    free(f->npy);
    f->npy = npy;
  }
  b2_file_touched(f);
  return 0;
}

/* ---- new .npy files ---------------------------------------------------------- */

static int pend_reserve(b2_file *f, size_t n) {
  if (n <= f->pend_cap) return 0;
  size_t cap = B2_MAX(n, B2_MIN(2 * f->pend_cap, PEND_MAX));
  cap = B2_MAX(cap, (size_t)4096);
  uint8_t *p = realloc(f->pend, cap), *s = p ? realloc(f->pend_set, cap) : NULL;
  if (p) f->pend = p;
  if (!s) return b2_fail(B2_E_NOMEM, "no memory for a .npy header");
  f->pend_set = s;
  memset(f->pend + f->pend_cap, 0, cap - f->pend_cap);
  memset(f->pend_set + f->pend_cap, 0, cap - f->pend_cap);
  f->pend_cap = cap;
  return 0;
}

/* Take the held bytes out of the handle. */
typedef struct held {
  uint8_t *buf, *set;
  size_t len; /* bytes of buf that may be set */
  int64_t size;
} held;

static void take_held(b2_file *f, held *h) {
  h->buf = f->pend;
  h->set = f->pend_set;
  h->size = atomic_load(&f->size);
  h->len = (size_t)B2_MIN((int64_t)f->pend_cap, h->size);
  f->pend = f->pend_set = NULL;
  f->pend_cap = 0;
}

/* Write the held runs from byte `from` on: through the array (array) or
 * as plain bytes. */
static int replay(b2_file *f, held *h, size_t from, int array) {
  int rc = 0;
  for (size_t s = from; rc >= 0 && s < h->len;) {
    if (!h->set[s]) {
      s++;
      continue;
    }
    size_t e = s;
    while (e < h->len && h->set[e]) e++;
    ssize_t w = array ? b2_file_awrite(f, h->buf + s, e - s, (int64_t)s)
                      : b2_file_lwrite(f, h->buf + s, e - s, (int64_t)s);
    rc = w < 0 ? (int)w : 0;
    s = e;
  }
  /* The writer was told they were written: its flushes say they are not. */
  int none = 0;
  if (rc < 0) atomic_compare_exchange_strong(&f->lost, &none, rc);
  free(h->buf);
  free(h->set);
  return rc;
}

/* Shapes asked for an empty .npy file outlive its handle in this
 * vlmetalayer of the empty plain frame ("chunkshape=A,B;blockshape=C,D"). */
#define WANT_VLMETA "b2fs.npy"

static void put_dims(char *buf, size_t cap, const char *key, const int32_t *d, int n) {
  size_t k = strlen(buf);
  k += (size_t)snprintf(buf + k, cap - k, "%s%s=", k ? ";" : "", key);
  for (int i = 0; i < n && k < cap; i++) k += (size_t)snprintf(buf + k, cap - k, i ? ",%d" : "%d", d[i]);
}

static int save_wanted(b2_file *f) {
  if (!f->want_nc && !f->want_nb) return 0;
  char buf[512] = "";
  if (f->want_nc) put_dims(buf, sizeof buf, "chunkshape", f->want_cs, f->want_nc);
  if (f->want_nb) put_dims(buf, sizeof buf, "blockshape", f->want_bs, f->want_nb);
  /* A msgpack string, as python-blosc2 reads every vlmetalayer. */
  uint8_t mp[sizeof buf + 8];
  b2_mp_writer w;
  b2_mp_writer_init(&w, mp, sizeof mp);
  int rc = b2_mp_put_str(&w, buf, strlen(buf));
  return rc < 0 ? rc : b2_frame_vlmeta_set(f->frame, WANT_VLMETA, mp, w.len);
}

static void load_wanted(b2_file *f) {
  uint8_t *v = NULL;
  size_t n = 0;
  if (b2_frame_vlmeta_get(f->frame, WANT_VLMETA, &v, &n) < 0 || !v) return;
  /* A msgpack string (or, as written before 28 November 2026, its bytes). */
  const uint8_t *text = v;
  uint32_t tlen = (uint32_t)B2_MIN(n, (size_t)UINT32_MAX);
  b2_mp_reader r;
  b2_mp_reader_init(&r, v, n);
  const uint8_t *s;
  uint32_t slen;
  if (b2_mp_read_str(&r, &s, &slen) == 0 && r.pos == n) text = s, tlen = slen;
  char buf[512];
  snprintf(buf, sizeof buf, "%.*s", (int)B2_MIN(tlen, sizeof buf - 1), (const char *)text);
  free(v);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    int32_t d[B2_B2ND_MAXDIM];
    int chunk = !strncmp(tok, "chunkshape=", 11), block = !strncmp(tok, "blockshape=", 11);
    int k = chunk || block ? b2_file_parse_dims(tok + 11, d) : -1;
    if (k <= 0) continue; /* not ours, or damaged: the defaults then */
    memcpy(chunk ? f->want_cs : f->want_bs, d, (size_t)k * sizeof d[0]);
    if (chunk) f->want_nc = k;
    else f->want_nb = k;
  }
}

/* Parameters of a plain frame for the bytes of a .npy file. */
static void plain_params(b2_file *f, b2_frame_params *p) {
  *p = f->newp;
  /* Bytes that are no array cannot keep an array's codec or filters (an
   * empty file keeps them, for the array it may become). */
  if (atomic_load(&f->size) > 0 && b2_cparams_check(&p->cparams) < 0)
    b2_file_env_params(f->env, p);
  p->nmeta = 0;
  p->meta = NULL;
}

/* The header did not make an array: a plain frame of the bytes written. */
static int to_plain(b2_file *f) {
  b2_frame_params p;
  plain_params(f, &p);
  int rc = b2_file_recreate(f, &p, 0);
  if (rc < 0) return rc;
  held h;
  pthread_rwlock_wrlock(&f->szlock);
  take_held(f, &h);
  f->pending = 0;
  f->view = B2_VIEW_LOGICAL;
  f->npy_plain = 1;
  atomic_store(&f->size, 0);
  pthread_rwlock_unlock(&f->szlock);
  rc = replay(f, &h, 0, 0);
  if (rc == 0 && atomic_load(&f->size) < h.size) rc = b2_file_lresize(f, h.size);
  if (rc == 0 && h.size == 0) rc = save_wanted(f); /* an empty file, shapes asked for */
  b2_file_touched(f);
  return rc;
}

/* The header of hl bytes describes array a (taken over): create it (or
 * refuse the parameters asked for, when they cannot encode its items). */
static int to_array(b2_file *f, b2_b2nd *a, size_t hl) {
  b2_frame_params p = f->newp;
  b2_frame_meta_init mi;
  uint8_t *meta = NULL;
  char *npy = malloc(hl);
  int rc = npy ? b2_b2nd_frame_params(a, &p, &mi, &meta) : b2_fail(B2_E_NOMEM, "no memory");
  /* Sized before it is committed: a b2nd on disk always has the chunks
   * its shape needs (zero chunks until written). */
  if (rc == 0) rc = b2_file_recreate(f, &p, a->nchunks * a->chunk_nbytes);
  free(meta);
  if (rc < 0) {
    free(npy);
    b2_b2nd_free(a);
    return rc;
  }
  memcpy(npy, f->pend, hl); /* the writer's own header: its offsets hold */
  /* A header numpy.save spells otherwise shows after the last close too. */
  if (b2_npy_header_keep(f->frame, a, npy, hl) < 0)
    snprintf(f->note, sizeof f->note, "%s: its .npy header's spelling is not kept: %s", f->path,
             b2_last_detail());
  held h;
  pthread_rwlock_wrlock(&f->szlock);
  take_held(f, &h);
  pthread_mutex_lock(&f->fmu);
  f->array = *a;
  f->has_array = 1;
  pthread_mutex_unlock(&f->fmu);
  b2_b2nd_cparams(&f->array, &f->cp);
  free(f->npy);
  f->npy = npy;
  f->npylen = hl;
  f->pending = 0;
  f->npy_born = 1;
  f->npy_hw = h.size;
  atomic_store(&f->size, (int64_t)hl + b2_b2nd_nbytes(&f->array));
  pthread_rwlock_unlock(&f->szlock);
  /* settle() sent bytes past the array's end to to_plain: all fit. */
  rc = replay(f, &h, hl, 1);
  if (rc < 0)
    snprintf(f->note, sizeof f->note, "%s: bytes written before its .npy header was complete "
             "could not be stored: %s", f->path, b2_last_detail());
  b2_file_touched(f);
  return rc;
}

/* Decide what a new .npy file becomes once its header is complete (or
 * now, when `final`). */
static int settle(b2_file *f, int final) {
  size_t fill = 0, len = (size_t)B2_MIN((int64_t)f->pend_cap, atomic_load(&f->size));
  while (fill < len && f->pend_set[fill]) fill++;
  if (len == 0 && final) return to_plain(f); /* nothing written: an empty file */
  if (fill == 0 && !final) return 0;
  size_t hl = 0;
  b2_b2nd a;
  int rc = b2_b2nd_of_npy(f->pend, fill, atomic_load(&f->size), f->want_cs, f->want_nc,
                          f->want_bs, f->want_nb, b2_cparams_min_side(&f->newp.cparams), &a, &hl);
  if (rc == B2_E_TRUNCATED && !final) return 0;
  if (rc == 0) return to_array(f, &a, hl);
  snprintf(f->note, sizeof f->note, "%s: stored as a plain frame, not a b2nd array: %s", f->path,
           rc == B2_E_TRUNCATED ? "the .npy header is incomplete"
                                : b2_last_detail()[0] ? b2_last_detail() : b2_strerror(rc));
  return to_plain(f);
}

static ssize_t pend_write(b2_file *f, const uint8_t *buf, size_t n, int64_t off) {
  int64_t end = off + (int64_t)n;
  if ((uint64_t)end > PEND_MAX) {
    if ((uint64_t)off < PEND_MAX) {
      /* Hold what fits first (it may complete the header), then the rest
       * as what the file has become. */
      size_t head = (size_t)(PEND_MAX - (uint64_t)off);
      ssize_t k = pend_write(f, buf, head, off);
      if (k < 0) return k;
      k = b2_file_awrite(f, buf + head, n - head, off + (int64_t)head);
      return k < 0 ? k : (ssize_t)n;
    }
    int rc = settle(f, 1);
    if (rc < 0) return rc;
    /* Plain now, even if empty: written anew from empty is for later
     * writes (b2_file_awrite would make it a new .npy file again). */
    return f->has_array ? b2_file_awrite(f, buf, n, off) : b2_file_lwrite(f, buf, n, off);
  }
  pthread_rwlock_wrlock(&f->szlock);
  int rc = pend_reserve(f, (size_t)end);
  if (rc == 0 && n) {
    memcpy(f->pend + off, buf, n);
    memset(f->pend_set + off, 1, n);
    if (end > atomic_load(&f->size)) atomic_store(&f->size, end);
  }
  pthread_rwlock_unlock(&f->szlock);
  b2_file_touched(f);
  if (rc == 0) rc = settle(f, 0);
  return rc < 0 ? rc : (ssize_t)n;
}

static int pend_resize(b2_file *f, int64_t size) {
  if ((uint64_t)size > PEND_MAX) {
    int rc = settle(f, 1);
    return rc < 0 ? rc : b2_file_aresize(f, size);
  }
  pthread_rwlock_wrlock(&f->szlock);
  int rc = pend_reserve(f, (size_t)size);
  if (rc == 0 && f->pend_cap > (size_t)size) { /* else no bytes held yet, maybe no buffer */
    memset(f->pend + size, 0, f->pend_cap - (size_t)size);
    memset(f->pend_set + size, 0, f->pend_cap - (size_t)size);
  }
  if (rc == 0) atomic_store(&f->size, size);
  pthread_rwlock_unlock(&f->szlock);
  b2_file_touched(f);
  return rc;
}

/* Forget the array under the handle and its chunks in the cache (the
 * pool's jobs for the file done first; szlock taken by the caller after
 * that): the view is empty.  Whether there was an array. */
static int drop_array(b2_file *f) {
  int was = f->has_array;
  pthread_mutex_lock(&f->fmu);
  f->has_array = 0;
  atomic_fetch_add(&f->epoch, 1); /* flushes under way store nothing */
  pthread_mutex_unlock(&f->fmu);
  b2_cache_discard_file(f->env->cache, f->id);
  if (was) b2_b2nd_free(&f->array);
  free(f->npy);
  f->npy = NULL;
  drop_posix(f);
  f->npylen = 0;
  f->npy_born = 0;
  atomic_store(&f->size, 0);
  return was;
}

/* A .npy file written anew: an array's .npy view truncated to 0, or a
 * .npy file kept as its bytes written again while empty (or truncated to
 * 0).  Its bytes are held as a new file's; the frame on disk stays as it
 * is until they settle.  A plain frame keeps its parameters for the new
 * frame (a codec set while it was empty), an array the mount's. */
static int restart(b2_file *f) {
  if (f->env->pool) b2_pool_wait(f->env->pool, &f->group);
  pthread_rwlock_wrlock(&f->szlock);
  if (drop_array(f)) {
    b2_file_env_params(f->env, &f->newp);
  } else {
    b2_file_params_of(f->frame, &f->newp);
    load_wanted(f);
  }
  f->pending = 1;
  f->npy_plain = 0;
  f->npy_new = 1; /* a plain frame's name at the close, if it ends as one */
  f->view = B2_VIEW_NPY;
  pthread_rwlock_unlock(&f->szlock);
  b2_file_touched(f);
  return 0;
}

/* ---- entry points (wmu held) --------------------------------------------------- */

/* A write of the whole .npy header with other bytes: does h describe the
 * same array but for its rows (in *rows)?  Then rewrite_header: a header
 * for another number of rows (rsync --inplace of an array grown or cut,
 * an appender writing the rows it added) resizes the array to them; one
 * spelled otherwise than the view's is kept as its header (as a new .npy
 * file's writer's is, B2_NPY_HEADER_VLMETA). */
static int header_alike(const b2_file *f, const uint8_t *h, int64_t *rows) {
  size_t hl = f->npylen;
  int64_t rowb = row_bytes(&f->array);
  return b2_file_npy_alike((const char *)h, hl, f->npy, hl, rows) && *rows >= 0 &&
         !(rowb > 0 && *rows > (INT64_MAX - (int64_t)hl) / rowb);
}

static int rewrite_header(b2_file *f, const uint8_t *h, int64_t rows) {
  size_t hl = f->npylen;
  int64_t rowb = row_bytes(&f->array);
  int rc = rows == f->array.shape[0] ? 0 : b2_file_aresize(f, (int64_t)hl + rows * rowb);
  if (rc == 0) drop_posix(f); /* the writer's header is the view's now */
  if (rc < 0 || memcmp(f->npy, h, hl) == 0) return rc;
  char *copy = malloc(hl);
  if (!copy) return b2_fail(B2_E_NOMEM, "no memory for the .npy header");
  memcpy(copy, h, hl);
  pthread_mutex_lock(&f->fmu);
  rc = b2_npy_header_keep(f->frame, &f->array, copy, hl);
  pthread_mutex_unlock(&f->fmu);
  if (rc < 0) {
    free(copy);
    return rc;
  }
  pthread_rwlock_wrlock(&f->szlock); /* readers copy from it */
  free(f->npy);
  f->npy = copy;
  pthread_rwlock_unlock(&f->szlock);
  b2_file_touched(f);
  return 0;
}

ssize_t b2_file_awrite(b2_file *f, const void *buf, size_t n, int64_t off) {
  if (!f->pending && f->npy_plain && atomic_load(&f->size) == 0) restart(f);
  if (f->pending) return pend_write(f, buf, n, off);
  if (!f->has_array) return b2_file_lwrite(f, buf, n, off);
  int64_t end = off + (int64_t)n, hdr = hdr_len(f);
  const uint8_t *src = buf;
  size_t left = n;
  if (off < hdr) {
    size_t h = (size_t)B2_MIN((int64_t)left, hdr - off);
    if (memcmp(f->npy + off, src, h) != 0) {
      /* The header of the same array with other rows (or spelled
       * otherwise); else (another dtype or shape, part of it changed) the
       * file becomes the plain frame of its bytes, written as any file's. */
      int64_t rows;
      int rc = off == 0 && (int64_t)h == hdr && header_alike(f, src, &rows)
                   ? rewrite_header(f, src, rows)
                   : to_bytes(f, atomic_load(&f->size), "its .npy header was written over");
      if (rc < 0) return rc;
      if (!f->has_array) return b2_file_lwrite(f, buf, n, off);
    } else if (f->npy_posix) { /* the view's bytes, written: a plain file's too */
      memcpy(f->npy_posix + off, src, h);
      if (memcmp(f->npy_posix, f->npy, (size_t)hdr) == 0) drop_posix(f);
    }
    src += h;
    off += (int64_t)h;
    left -= h;
  }
  if (end > atomic_load(&f->size)) {
    int rc = b2_file_aresize(f, end);
    if (rc < 0) return rc;
  }
  int rc = left ? items_write(f, src, left, off - hdr) : 0;
  if (rc == 0 && end > f->npy_hw) f->npy_hw = end;
  b2_file_touched(f);
  return rc < 0 ? rc : (ssize_t)n;
}

/* Zeros over array bytes [from, to) (wmu held). */
static int zero_items(b2_file *f, int64_t from, int64_t to) {
  static const uint8_t zeros[1 << 16];
  int rc = 0;
  while (rc == 0 && from < to) {
    size_t k = (size_t)B2_MIN(to - from, (int64_t)sizeof zeros);
    rc = items_write(f, zeros, k, from);
    from += (int64_t)k;
  }
  return rc;
}

int b2_file_aresize(b2_file *f, int64_t size) {
  if (f->pending) return pend_resize(f, size);
  if (!f->has_array) return size == 0 && f->npy_plain ? restart(f) : b2_file_lresize(f, size);
  int64_t old = atomic_load(&f->size), hdr = hdr_len(f), rowb = row_bytes(&f->array);
  if (size == old) return 0;
  int was_ragged = b2_file_aragged(f);
  if (size == 0 && f->view == B2_VIEW_NPY) return restart(f);
  if (size < hdr) return to_bytes(f, size, "cut inside its .npy header");
  /* A size inside a row (an appender's write, cut by its buffer, ends
   * mid-row; a truncate there): the array gets the rows it reaches, the
   * items past the size stay zeros (those a cut leaves are zeroed), and
   * the view has that size (b2_file_aragged) until whole rows again. */
  int64_t whole = size;
  if (rowb > 0 && size > hdr && (size - hdr) % rowb) whole = size + rowb - (size - hdr) % rowb;
  int rc = 0;
  if (whole != hdr + b2_b2nd_nbytes(&f->array)) {
    /* Parked chunks into the frame first, and none parked meanwhile. */
    atomic_store(&f->committing, 1);
    rc = b2_file_spill_drain(f);
    if (rc == 0) {
      pthread_rwlock_wrlock(&f->szlock);
      rc = set_rows(f, whole);
      pthread_rwlock_unlock(&f->szlock);
    }
    atomic_store(&f->committing, 0);
  }
  if (rc == 0 && whole != size && old > size)
    rc = zero_items(f, size - hdr, B2_MIN(old, whole) - hdr);
  if (rc == 0) atomic_store(&f->size, size); /* whole again within the rows too */
  /* The header gives the complete rows: set_rows made it so for whole
   * sizes; inside a row, or whole again within the rows, it may not. */
  if (rc == 0 && f->view == B2_VIEW_NPY && rowb > 0 && (whole != size || was_ragged) &&
      header_rows(f) != (size - hdr) / rowb)
    rc = show_rows(f, (size - hdr) / rowb);
  if (rc == 0) f->npy_hw = size; /* the file is that long now */
  return rc;
}

int b2_file_is_shape_key(const char *key) {
  return !strcmp(key, "chunkshape") || !strcmp(key, "blockshape");
}

int b2_file_parse_dims(const char *s, int32_t *out) {
  int n = 0;
  while (*s) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 1 || v > INT32_MAX || n == B2_B2ND_MAXDIM)
      return b2_fail(B2_E_INVAL, "shapes are positive sizes A,B,... (at most %d)", B2_B2ND_MAXDIM);
    out[n++] = (int32_t)v;
    s = end;
    if (*s == ',' || *s == 'x') s++;
    else if (*s) return b2_fail(B2_E_INVAL, "shapes are positive sizes A,B,...");
  }
  return n ? n : b2_fail(B2_E_INVAL, "an empty shape");
}

int b2_file_aset_param(b2_file *f, const char *key, const char *value) {
  if (!f->pending && f->npy_plain && atomic_load(&f->size) == 0) restart(f);
  /* The value's form first: B2_E_BUSY says a good value came too late. */
  int32_t dims[B2_B2ND_MAXDIM];
  b2_frame_params p;
  int shape = b2_file_is_shape_key(key), n;
  if (shape) {
    n = b2_file_parse_dims(value, dims);
  } else {
    if (f->pending) p = f->newp;
    else b2_file_params_of(f->frame, &p);
    n = b2_params_set(&p, key, value);
  }
  if (n < 0) return n;
  if (!f->pending)
    return b2_fail(B2_E_BUSY, "%s: an array's parameters are fixed once it exists", f->path);
  if (!shape) {
    f->newp = p;
    return 0;
  }
  int chunk = !strcmp(key, "chunkshape");
  memcpy(chunk ? f->want_cs : f->want_bs, dims, (size_t)n * sizeof dims[0]);
  if (chunk) f->want_nc = n;
  else f->want_nb = n;
  return 0;
}

int b2_file_pending_read(b2_file *f, void *buf, size_t n, int64_t off) {
  size_t have = off < (int64_t)f->pend_cap ? B2_MIN(n, f->pend_cap - (size_t)off) : 0;
  if (have) memcpy(buf, f->pend + off, have);
  memset((uint8_t *)buf + have, 0, n - have);
  return 0;
}

int b2_file_asettle(b2_file *f) { return f->pending ? settle(f, 1) : 0; }

/* An unnamed file beside the frame (else in memory) for a .npy file's bytes. */
static int spill_open(b2_file *f) {
  int fd = b2_file_tmpfile(f);
  if (fd < 0) fd = memfd_create("b2fs-npy", MFD_CLOEXEC);
  return fd < 0 ? b2_fail(b2_from_errno(errno), "%s: no room for its bytes", f->path) : fd;
}

#define SPILL_PIECE ((size_t)1 << 20)

/* Bytes [0, n) of the file (as its writer sees them) into fd and back. */
static int spill_copy(b2_file *f, int fd, int64_t n, int out) {
  uint8_t *buf = malloc(SPILL_PIECE);
  if (!buf) return b2_fail(B2_E_NOMEM, "no memory to keep a .npy file's bytes");
  int rc = 0;
  for (int64_t off = 0; rc == 0 && off < n;) {
    size_t k = (size_t)B2_MIN((int64_t)SPILL_PIECE, n - off);
    ssize_t got;
    if (out) {
      got = b2_file_pread(f, buf, k, off);
      ssize_t w = got == (ssize_t)k ? pwrite(fd, buf, k, off) : got;
      if (got == (ssize_t)k && w != got)
        got = b2_fail(b2_from_errno(w < 0 ? errno : ENOSPC), "%s: keeping its bytes", f->path);
    } else {
      got = pread(fd, buf, k, off);
      if (got != (ssize_t)k) got = b2_fail(B2_E_IO, "%s: reading its kept bytes back", f->path);
      else got = b2_file_lwrite(f, buf, k, off);
    }
    if (got >= 0 && got != (ssize_t)k) got = b2_fail(B2_E_IO, "%s: short copy", f->path);
    rc = got < 0 ? (int)got : 0;
    off += (int64_t)k;
  }
  free(buf);
  return rc;
}

/* Keep the view's bytes [0, keep) as a plain frame of them in place of
 * the array: what the file holds when the array cannot say it.  The bytes
 * go through an unnamed file, the frame is created anew, and the
 * namespace gives it a plain frame's name at the close (npy_new); `why`
 * ends the note. */
static int to_bytes(b2_file *f, int64_t keep, const char *why) {
  /* Nothing written since the last commit: the file keeps that commit's
   * time (one set by utimensat after the data: tar, cp -p). */
  struct stat st;
  int same_time = atomic_load(&f->gen) == atomic_load(&f->committed_gen) &&
                  b2_file_frame_now(f, &st) == 0;
  int fd = spill_open(f);
  if (fd < 0) return fd;
  int rc = spill_copy(f, fd, keep, 1);
  /* The header as a plain file holds it: rows appended or cut since it
   * was written do not change it. */
  size_t hk = (size_t)B2_MIN(keep, (int64_t)f->npylen);
  if (rc == 0 && f->npy_posix && pwrite(fd, f->npy_posix, hk, 0) != (ssize_t)hk)
    rc = b2_fail(B2_E_IO, "%s: keeping its .npy header: %s", f->path, strerror(errno));
  if (rc < 0) {
    close(fd);
    return rc;
  }
  b2_frame_params p;
  if (f->npy_born)
    plain_params(f, &p); /* while the size says there are bytes */
  else
    b2_file_env_params(f->env, &p); /* an array opened: no parameters asked for */
  /* The array goes, as at a restart. */
  if (f->env->pool) b2_pool_wait(f->env->pool, &f->group);
  pthread_rwlock_wrlock(&f->szlock);
  drop_array(f);
  f->npy_plain = 1;
  f->view = B2_VIEW_LOGICAL;
  pthread_rwlock_unlock(&f->szlock);
  rc = b2_file_recreate(f, &p, 0);
  if (rc == 0) rc = spill_copy(f, fd, keep, 0);
  close(fd);
  f->npy_new = 1; /* a plain frame's name at the close */
  snprintf(f->note, sizeof f->note, "%s: stored as a plain frame of its %lld bytes: %s", f->path,
           (long long)keep, why);
  b2_file_touched(f);
  if (same_time)
    atomic_store(&f->changed_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
  return rc;
}

/* A new .npy file whose writer stopped short of the size its header gives
 * (killed, out of space, or cut off on purpose) is kept as the bytes
 * written, as any file system keeps them: as an array padded with zeros,
 * numpy.load and python-blosc2 would take it for complete.  A header
 * alone stays an array: numpy's open_memmap writes it, closes, and maps
 * the file again to write the items.  So is an array whose size ends
 * inside a row. */
int64_t b2_file_ashort_size(const b2_file *f) {
  int64_t hw = f->npy_hw, size = atomic_load(&f->size);
  return f->npy_born && f->has_array && !f->pending && hw < size && hw > (int64_t)f->npylen ? hw
                                                                                           : -1;
}

int b2_file_ashort(b2_file *f, int last, int sync) {
  int64_t size = atomic_load(&f->size), hw = b2_file_ashort_size(f);
  if (b2_file_aragged(f)) return sync ? to_bytes(f, size, "they end inside a row") : 0;
  if (!last || hw < 0) return 0;
  char why[80];
  snprintf(why, sizeof why, "its .npy header gives %lld", (long long)size);
  return to_bytes(f, hw, why);
}
