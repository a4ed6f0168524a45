/*
 * band.c - sequential reads of arrays whose chunks do not hold their items
 * in C order (chunks or blocks that split a trailing axis: a volume stored
 * in cubes, a matrix in tiles).
 *
 * One row of such an array's C-order view (the items sharing a first
 * coordinate) takes bytes from every chunk across it, and a chunk's rows
 * are read over and over as the view goes by: decoding chunks whole into
 * the cache, as reads of C-order chunks do, needs a whole row of chunks in
 * the cache at once, and when the cache is smaller each chunk is decoded
 * again for every few rows read (a 1 GB volume in 8 MiB cubes read at
 * 23 MB/s with the 256 MiB cache).
 *
 * A sequential reader is served by bands instead (b2_b2nd_band): runs of
 * whole rows inside one cell of the first axis, each assembled in C order
 * by b2_b2nd_read from just the rows of the blocks it needs (stored chunks
 * kept compressed in the cache by partial.c, never decoded whole), and
 * cached decoded under (f->bid, its first row).  Reading the bands in
 * order decodes each block once, unless its cell is larger than a quarter
 * of the cache: it is then cut into bands of that size, and its blocks are
 * decoded once for each.  A band's blocks are shared with the pool
 * workers idle when it is loaded.  Bands are decoded ahead on the pool workers
 * (up to `readahead` of them, and a quarter of the cache) and leave the
 * cache one behind the reader, as chunks do.  Read-only handles only.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_error.h"
#include "common/util.h"
#include "file/file_impl.h"

#define BAND_TARGET ((int64_t)4 << 20) /* small cells grouped up to this */
#define BAND_MAX ((int64_t)256 << 20)  /* and none larger (b2_b2nd_read's limit) */
#define BAND_SHARE_MIN ((size_t)1 << 20) /* bands shared with idle workers */

/* Bytes a band may take: a quarter of the cache. */
static int64_t band_max(const b2_file *f) {
  return B2_MIN((int64_t)(f->env->opts.cache_size / 4), BAND_MAX);
}

/* The band holding `row`; 0 when the array has none. */
static int band_of(const b2_file *f, int64_t row, int64_t *r0, int64_t *r1) {
  return b2_b2nd_band(&f->array, row, BAND_TARGET, band_max(f), r0, r1);
}

/* One band gathered by the loader and the pool workers idle at the time:
 * each walks the whole band (b2_b2nd_read asks for the same requests in
 * the same order every time) and serves the requests it claims; the
 * others it skips. */
typedef struct band_share {
  b2_file *f;
  int64_t off;
  size_t n;
  uint8_t *buf;
  atomic_long next; /* the next request not yet claimed */
  atomic_int err;   /* the first error */
} band_share;

typedef struct band_walker {
  band_share *sh;
  long seen, mine; /* requests met so far; the one this walker claimed */
} band_walker;

/* Bytes [off, off+len) of decoded chunk i for a band: from the decoded
 * chunk if the cache has it, else the blocks covering them alone. */
static int band_reader(void *arg, int64_t chunk, size_t off, size_t len, void *dst) {
  band_walker *w = arg;
  if (w->seen++ != w->mine) return B2_B2ND_SKIP;
  w->mine = atomic_fetch_add(&w->sh->next, 1);
  if (atomic_load(&w->sh->err)) return B2_B2ND_SKIP; /* another walker failed */
  b2_file *f = w->sh->f;
  b2_cache *c = f->env->cache;
  b2_cache_entry *e;
  if (b2_cache_peek(c, f->id, chunk, &e) == 0) {
    size_t have = b2_cache_len(e);
    int ok = off <= have && len <= have - off;
    if (ok) memcpy(dst, b2_cache_data(e) + off, len);
    b2_cache_release(c, e);
    if (ok) return 0;
  }
  return b2_file_read_blocks(f, chunk, off, len, dst);
}

static int walk_band(band_share *sh) {
  band_walker w = {sh, 0, atomic_fetch_add(&sh->next, 1)};
  int rc = b2_b2nd_read(&sh->f->array, (uint64_t)sh->off, sh->n, sh->buf, band_reader, &w);
  if (rc >= 0 && (size_t)rc != sh->n)
    rc = b2_fail(B2_E_FORMAT, "a band gave %d bytes, expected %zu", rc, sh->n);
  if (rc < 0) {
    int zero = 0;
    atomic_compare_exchange_strong(&sh->err, &zero, rc);
  }
  return rc;
}

static void walk_job(void *arg) { (void)walk_band(arg); }

/* Cache loader of the band starting at row `r0`. */
static int load_band(void *arg, uint64_t file, int64_t r0, uint8_t **data, size_t *len) {
  b2_file *f = arg;
  (void)file;
  atomic_store(&f->cached, 1);
  int64_t b0, b1;
  if (!band_of(f, r0, &b0, &b1) || b0 != r0)
    return b2_fail(B2_E_INVAL, "no band starts at row %lld", (long long)r0);
  int64_t rb = b2_b2nd_row_nbytes(&f->array);
  band_share sh = {.f = f, .off = b0 * rb, .n = (size_t)((b1 - b0) * rb)};
  atomic_init(&sh.next, 0);
  atomic_init(&sh.err, 0);
  sh.buf = b2_cache_buf_alloc(sh.n);
  if (!sh.buf) return b2_fail(B2_E_NOMEM, "no memory for a band of %zu bytes", sh.n);
  b2_pool *pool = f->env->pool;
  b2_pool_group g = B2_POOL_GROUP_INIT;
  int helpers = pool && sh.n >= BAND_SHARE_MIN ? b2_pool_idle(pool) : 0;
  for (int k = 0; k < helpers; k++)
    if (b2_pool_try_submit(pool, walk_job, &sh, &g) < 0) break;
  int rc = walk_band(&sh);
  if (pool) b2_pool_wait(pool, &g);
  if (rc >= 0 && atomic_load(&sh.err)) rc = atomic_load(&sh.err);
  if (rc < 0) {
    b2_cache_buf_free(sh.buf);
    return b2_context(rc, "rows %lld-%lld", (long long)b0, (long long)b1);
  }
  *data = sh.buf;
  *len = sh.n;
  return 0;
}

static int has_bands(const b2_file *f, int64_t aoff, int64_t *r0, int64_t *r1) {
  if (!f->bid || f->writable || f->pending || !f->has_array) return 0;
  int64_t rb = b2_b2nd_row_nbytes(&f->array);
  return rb > 0 && band_of(f, aoff / rb, r0, r1);
}

/* The reader st finished the band [r0, r1): the one before leaves the
 * cache; the next ones are queued. */
static void band_done(b2_file *f, b2_stream *st, int64_t r0) {
  int64_t p0 = -1, p1;
  if (r0 > 0 && !band_of(f, r0 - 1, &p0, &p1)) p0 = -1;
  b2_file_drop_behind(f, st, f->bid, r0, p0);
}

static void band_ahead(b2_file *f, b2_stream *st, int64_t next) {
  b2_env *env = f->env;
  if (!env->pool || env->opts.readahead <= 0) return;
  int64_t rb = b2_b2nd_row_nbytes(&f->array), budget = band_max(f), r0, r1;
  for (int k = 0; k < env->opts.readahead && band_of(f, next, &r0, &r1); k++) {
    budget -= (r1 - r0) * rb;
    if (k > 0 && budget < 0) break;
    if (r0 >= atomic_load(&st->ahead)) {
      if (b2_file_queue_ahead(f, st, f->bid, r0, load_band) < 0) break;
      atomic_store(&st->ahead, r1);
    }
    next = r1;
  }
}

int b2_file_band_read(b2_file *f, uint8_t *dst, size_t n, int64_t aoff, b2_stream *seq) {
  int64_t r0, r1;
  if (!seq || !has_bands(f, aoff, &r0, &r1)) return 0;
  b2_cache *c = f->env->cache;
  int64_t rb = b2_b2nd_row_nbytes(&f->array), end = aoff + (int64_t)n;
  while (aoff < end) {
    if (!band_of(f, aoff / rb, &r0, &r1))
      return b2_fail(B2_E_RANGE, "offset %lld past the array", (long long)aoff);
    b2_cache_entry *e;
    int rc = b2_cache_get(c, f->bid, r0, load_band, f, &e);
    if (rc < 0) return rc;
    int64_t bend = r1 * rb, take = B2_MIN(end, bend) - aoff;
    memcpy(dst, b2_cache_data(e) + (aoff - r0 * rb), (size_t)take);
    b2_cache_release(c, e);
    dst += take;
    aoff += take;
    if (aoff == bend) band_done(f, seq, r0);
  }
  band_ahead(f, seq, r1);
  return 1;
}

int b2_file_band_pin(b2_file *f, size_t n, int64_t aoff, b2_stream *seq, b2_file_pin *p) {
  int64_t r0, r1;
  if (!seq || !has_bands(f, aoff, &r0, &r1)) return 0;
  int64_t rb = b2_b2nd_row_nbytes(&f->array);
  if (aoff + (int64_t)n > r1 * rb) return 0; /* spans bands */
  b2_cache_entry *e;
  int rc = b2_cache_get(f->env->cache, f->bid, r0, load_band, f, &e);
  if (rc < 0) return rc;
  p->data = b2_cache_data(e) + (aoff - r0 * rb);
  p->entry = e;
  if (aoff + (int64_t)n == r1 * rb) band_done(f, seq, r0);
  band_ahead(f, seq, r1);
  return 1;
}
