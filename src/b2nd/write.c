/*
 * write.c - encode a whole b2nd array from its C-order items, streaming.
 *
 * Items are read a slab at a time.  A slab is the set of chunks that share
 * their grid indices along dimensions 0..L; its items form a dense box
 * (chunkshape along 0..L, the whole array along the rest), which the
 * source delivers as runs of C-order bytes: one run for L = 0 (a row of
 * chunks, read strictly front to back), more and shorter runs for larger L.
 * L is the smallest level whose box fits slab_max, so memory stays bounded
 * when a row of chunks is huge.  Chunks in flight take a plain and an
 * encoded buffer each: two per thread, fewer when chunks are huge.  Each chunk of the slab is laid out
 * (b2_b2nd_scatter) and encoded, by a worker pool in batches when threads
 * are asked for, then handed to the sink in chunk order.  Since slabs go
 * in C order of their indices and a slab's chunks are consecutive in the
 * chunk grid, the sink sees chunks 0, 1, 2, ...
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_chunk.h"
#include "b2_error.h"
#include "common/pool.h"
#include "common/util.h"

#define MAXD B2_B2ND_MAXDIM
#define SLAB_DEFAULT ((size_t)256 << 20)
#define JOBS_MEM ((size_t)512 << 20) /* chunk buffers of all jobs together */

void b2_b2nd_write_opts_default(b2_b2nd_write_opts *o) {
  memset(o, 0, sizeof *o);
  b2_cparams_default(&o->cparams);
  o->nthreads = 1;
}

void b2_b2nd_cparams(const b2_b2nd *a, b2_cparams *cp) {
  cp->typesize = a->itemsize <= 255 ? a->itemsize : 1;
  cp->blocksize = a->block_nbytes;
  b2_b2nd_geom(a, &cp->geom); /* ZFP and the cell filters encode blocks of this shape */
}

/* ---- one chunk: lay out, encode ------------------------------------------ */

typedef struct job {
  const b2_b2nd *a;
  const b2_cparams *cp;
  const int64_t *box_start, *box_shape;
  const void *slab;
  int64_t chunk;
  unsigned char *plain; /* chunk_nbytes */
  unsigned char *enc;   /* enc_cap */
  size_t enc_cap;
  int rc; /* cbytes or a negative code */
  char detail[256]; /* the failure's detail (recorded on the worker) */
} job;

static void run_job(void *arg) {
  job *j = arg;
  int rc = b2_b2nd_scatter(j->a, j->chunk, j->box_start, j->box_shape, j->slab, j->plain);
  if (rc >= 0)
    rc = b2_chunk_encode(j->cp, j->plain, (size_t)j->a->chunk_nbytes, j->enc, j->enc_cap);
  j->rc = rc;
  if (rc < 0) snprintf(j->detail, sizeof j->detail, "%s", b2_last_detail());
}

/* ---- the whole array ----------------------------------------------------- */

typedef struct writer {
  const b2_b2nd *a;
  b2_cparams cp;
  int n;
  int64_t shape[MAXD], cs[MAXD];
  int64_t nch[MAXD];     /* chunks along d */
  int64_t astride[MAXD]; /* items, array C order */
  int64_t cgstride[MAXD];
  int level;
  unsigned char *slab;
  job *jobs;
  int njobs;
  b2_pool *pool;
  b2_b2nd_source src;
  void *src_ctx;
  b2_b2nd_sink sink;
  void *sink_ctx;
} writer;

/* Items of the largest slab box at level L, saturating at INT64_MAX. */
static int64_t slab_items(const writer *w, int L) {
  uint64_t p = 1;
  for (int d = 0; d < w->n; d++) {
    uint64_t x = (uint64_t)(d <= L ? B2_MIN(w->cs[d], w->shape[d]) : w->shape[d]);
    if (b2_mul_overflow_u64(p, x, &p) || p > INT64_MAX) return INT64_MAX;
  }
  return (int64_t)p;
}

static int pick_level(writer *w, const b2_b2nd_write_opts *o) {
  size_t max = o->slab_max ? o->slab_max : SLAB_DEFAULT;
  uint64_t lim = (uint64_t)max / (uint64_t)w->a->itemsize;
  for (int L = 0; L < w->n; L++) {
    if ((uint64_t)slab_items(w, L) <= lim || L == w->n - 1) {
      if (L > 0 && o->sequential)
        return b2_fail(B2_E_LIMIT,
                       "b2nd: a row of chunks holds %lld items, more than the %zu bytes "
                       "allowed; read from a file (not a pipe) or use a smaller chunkshape",
                       (long long)slab_items(w, 0), max);
      w->level = L;
      return 0;
    }
  }
  return b2_fail(B2_E_INVAL, "b2nd: no dimensions");
}

/* Read the slab box into w->slab as runs of C-order items (adjacent runs
 * merged into one read). */
static int read_box(writer *w, const int64_t *start, const int64_t *bshape) {
  const int L = w->level;
  const uint64_t isz = (uint64_t)w->a->itemsize;
  const uint64_t run = (uint64_t)(bshape[L] * w->astride[L]);
  int64_t idx[MAXD] = {0};
  uint64_t pend_off = 0, pend_len = 0, filled = 0;
  for (;;) {
    uint64_t off = (uint64_t)(start[L] * w->astride[L]);
    for (int d = 0; d < L; d++) off += (uint64_t)((start[d] + idx[d]) * w->astride[d]);
    if (pend_len && pend_off + pend_len == off) {
      pend_len += run;
    } else {
      if (pend_len) {
        int rc = w->src(w->src_ctx, pend_off * isz, (size_t)(pend_len * isz),
                        w->slab + filled * isz);
        if (rc < 0) return b2_context(rc, "b2nd: items at byte %llu", (unsigned long long)(pend_off * isz));
        filled += pend_len;
      }
      pend_off = off;
      pend_len = run;
    }
    int d = L - 1;
    while (d >= 0 && ++idx[d] == bshape[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  int rc = w->src(w->src_ctx, pend_off * isz, (size_t)(pend_len * isz), w->slab + filled * isz);
  return rc < 0 ? b2_context(rc, "b2nd: items at byte %llu", (unsigned long long)(pend_off * isz))
                : 0;
}

/* Lay out, encode and hand over the `count` chunks from `first`. */
static int do_chunks(writer *w, int64_t first, int64_t count, const int64_t *start,
                     const int64_t *bshape) {
  for (int64_t k0 = 0; k0 < count; k0 += w->njobs) {
    int nb = (int)B2_MIN((int64_t)w->njobs, count - k0);
    b2_pool_group g = B2_POOL_GROUP_INIT;
    for (int k = 0; k < nb; k++) {
      job *j = &w->jobs[k];
      j->box_start = start;
      j->box_shape = bshape;
      j->chunk = first + k0 + k;
      j->rc = 0;
      if (!w->pool || b2_pool_submit(w->pool, run_job, j, &g) < 0) run_job(j);
    }
    if (w->pool) b2_pool_wait(w->pool, &g);
    for (int k = 0; k < nb; k++) {
      job *j = &w->jobs[k];
      if (j->rc < 0) return b2_fail(j->rc, "chunk %lld: %s", (long long)j->chunk, j->detail);
      int rc = w->sink(w->sink_ctx, j->chunk, j->enc, (size_t)j->rc);
      if (rc < 0) return b2_context(rc, "chunk %lld", (long long)j->chunk);
    }
  }
  return 0;
}

static int write_all(writer *w) {
  const int L = w->level;
  int64_t jx[MAXD] = {0}; /* slab indices along 0..L */
  for (;;) {
    int64_t start[MAXD], bshape[MAXD], first = 0;
    for (int d = 0; d < w->n; d++) {
      start[d] = d <= L ? jx[d] * w->cs[d] : 0;
      bshape[d] = d <= L ? B2_MIN(w->cs[d], w->shape[d] - start[d]) : w->shape[d];
      if (d <= L) first += jx[d] * w->cgstride[d];
    }
    int rc = read_box(w, start, bshape);
    if (rc >= 0) rc = do_chunks(w, first, w->cgstride[L], start, bshape);
    if (rc < 0) return rc;
    int d = L;
    while (d >= 0 && ++jx[d] == w->nch[d]) jx[d--] = 0;
    if (d < 0) return 0;
  }
}

int b2_b2nd_write(const b2_b2nd *a, const b2_b2nd_write_opts *o, b2_b2nd_source src,
                  void *src_ctx, b2_b2nd_sink sink, void *sink_ctx) {
  if (!a || !o || !src || !sink) return b2_fail(B2_E_INVAL, "b2nd write: bad arguments");
  if (a->nitems == 0) return 0;
  if (a->chunk_nbytes > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_LIMIT, "b2nd write: a chunk of %lld bytes is too large",
                   (long long)a->chunk_nbytes);
  writer w;
  memset(&w, 0, sizeof w);
  w.a = a;
  w.cp = o->cparams;
  b2_b2nd_cparams(a, &w.cp);
  w.src = src;
  w.src_ctx = src_ctx;
  w.sink = sink;
  w.sink_ctx = sink_ctx;
  if (a->ndim == 0) {
    w.n = 1;
    w.shape[0] = w.cs[0] = 1;
  } else {
    w.n = a->ndim;
    for (int d = 0; d < w.n; d++) {
      w.shape[d] = a->shape[d];
      w.cs[d] = a->chunkshape[d];
    }
  }
  int64_t as = 1, cg = 1;
  for (int d = w.n - 1; d >= 0; d--) {
    w.nch[d] = (w.shape[d] + w.cs[d] - 1) / w.cs[d];
    w.astride[d] = as;
    w.cgstride[d] = cg;
    as *= w.shape[d];
    cg *= w.nch[d];
  }
  int rc = pick_level(&w, o);
  if (rc < 0) return rc;

  /* two chunks in flight per thread, within JOBS_MEM for huge chunks */
  size_t enc_cap = b2_chunk_bound((size_t)a->chunk_nbytes);
  int64_t fit = (int64_t)(JOBS_MEM / ((size_t)a->chunk_nbytes + enc_cap));
  int nthreads = (int)B2_MAX(1, B2_MIN((int64_t)B2_MIN(o->nthreads, 64), fit));
  w.njobs = nthreads == 1 ? 1 : (int)B2_MIN(2 * (int64_t)nthreads, fit);
  size_t slab_bytes = (size_t)slab_items(&w, w.level) * (size_t)a->itemsize;
  w.slab = malloc(slab_bytes ? slab_bytes : 1);
  w.jobs = calloc((size_t)w.njobs, sizeof *w.jobs);
  rc = w.slab && w.jobs ? 0 : b2_fail(B2_E_NOMEM, "b2nd write: no memory for a slab of %zu bytes",
                                      slab_bytes);
  for (int k = 0; rc == 0 && k < w.njobs; k++) {
    job *j = &w.jobs[k];
    j->a = a;
    j->cp = &w.cp;
    j->slab = w.slab;
    j->enc_cap = enc_cap;
    j->plain = malloc((size_t)a->chunk_nbytes);
    j->enc = malloc(enc_cap);
    if (!j->plain || !j->enc) rc = b2_fail(B2_E_NOMEM, "b2nd write: no memory for chunk buffers");
  }
  if (rc == 0 && nthreads > 1) rc = b2_pool_create(nthreads, w.njobs, &w.pool);
  if (rc == 0) rc = write_all(&w);
  b2_pool_destroy(w.pool);
  for (int k = 0; w.jobs && k < w.njobs; k++) {
    free(w.jobs[k].plain);
    free(w.jobs[k].enc);
  }
  free(w.jobs);
  free(w.slab);
  return rc;
}
