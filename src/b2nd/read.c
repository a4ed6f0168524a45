/*
 * read.c - gather a C-order byte range of a b2nd array from its blocks.
 *
 * The range [off, off+len) covers the items p..q (C order).  That set is
 * split into at most 2*ndim-1 boxes (hyper-rectangles): the tail of p's
 * row, slabs of whole rows, the head of q's row, and so on per dimension.
 * Along each dimension the array is cut into "cells", one per block
 * position: chunk j, block k covers [j*cs + k*bs, min(j*cs + (k+1)*bs,
 * (j+1)*cs)), clipped to the shape.  A box therefore touches a box of cells;
 * every touched block is visited once (blocks already seen through an
 * earlier box are skipped), its needed span fetched once through the
 * reader, and each row segment it shares with any box copied to dst.
 * Runs of rows that are contiguous both in the block and in C order are
 * copied as one, and trailing dimensions that chunks and blocks never
 * split are folded into the one before, so 1-D-like arrays read straight
 * into dst without a scratch copy.  Otherwise the span goes through a
 * per-thread scratch buffer, in windows of at most b2_b2nd_window bytes
 * (one request per block unless its needed span is larger than that).
 * Writing (b2_b2nd_update) walks the same way and hands every run, as it
 * lies in its block, to the caller's writer instead.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2nd/b2nd_int.h"
#include "common/util.h"

#define MAXD B2_B2ND_MAXDIM
#define MAXBOX (2 * MAXD - 1)
size_t b2_b2nd_window = (size_t)32 << 20;

/* ---- per-thread scratch buffer ----------------------------------------- */

typedef struct scratch {
  size_t cap;
  unsigned char data[];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;

static void scratch_release(void *p) { free(p); }
static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, scratch_release) == 0; }

static unsigned char *scratch_get(size_t n) {
  pthread_once(&scratch_once, scratch_init);
  if (!scratch_ok) return NULL;
  scratch *s = pthread_getspecific(scratch_key);
  if (s && s->cap >= n) return s->data;
  size_t cap = B2_MAX(n, (size_t)64 << 10);
  scratch *ns = malloc(sizeof *ns + cap);
  if (!ns) return NULL;
  ns->cap = cap;
  if (pthread_setspecific(scratch_key, ns) != 0) {
    free(ns);
    return NULL;
  }
  free(s);
  return ns->data;
}

/* ---- geometry ------------------------------------------------------------ */

typedef struct geo {
  int n;
  int64_t isz;
  int64_t block_nbytes;
  int64_t shape[MAXD], cs[MAXD], bs[MAXD];
  int64_t nbpc[MAXD];     /* blocks per chunk along d */
  int64_t astride[MAXD];  /* item stride, array C order */
  int64_t bstride[MAXD];  /* item stride inside a block */
  int64_t cgstride[MAXD]; /* stride in the chunk grid */
  int64_t bgstride[MAXD]; /* stride in a chunk's block grid */
} geo;

/* Called only for non-empty arrays: every shape is > 0. */
static void geo_init(geo *g, const b2_b2nd *a) {
  g->isz = a->itemsize;
  g->block_nbytes = a->block_nbytes;
  if (a->ndim == 0) {
    g->n = 1;
    g->shape[0] = g->cs[0] = g->bs[0] = 1;
  } else {
    g->n = a->ndim;
    for (int d = 0; d < g->n; d++) {
      g->shape[d] = a->shape[d];
      g->cs[d] = a->chunkshape[d];
      g->bs[d] = a->blockshape[d];
    }
  }
  /* Fold trailing dimensions that are never split: same items, same order,
   * same chunk and block boundaries one dimension up. */
  while (g->n > 1) {
    int l = g->n - 1;
    int64_t s = g->shape[l];
    if (g->cs[l] != s || g->bs[l] != s) break;
    g->shape[l - 1] *= s;
    g->cs[l - 1] *= s;
    g->bs[l - 1] *= s;
    g->n--;
  }
  int64_t as = 1, bst = 1, cg = 1, bg = 1;
  for (int d = g->n - 1; d >= 0; d--) {
    g->nbpc[d] = (g->cs[d] + g->bs[d] - 1) / g->bs[d];
    g->astride[d] = as;
    g->bstride[d] = bst;
    g->cgstride[d] = cg;
    g->bgstride[d] = bg;
    as *= g->shape[d];
    bst *= g->bs[d];
    cg *= (g->shape[d] + g->cs[d] - 1) / g->cs[d];
    bg *= g->nbpc[d];
  }
}

static int64_t cell_of(const geo *g, int d, int64_t x) {
  return x / g->cs[d] * g->nbpc[d] + x % g->cs[d] / g->bs[d];
}

/* ---- boxes --------------------------------------------------------------- */

typedef struct box {
  int64_t lo[MAXD], hi[MAXD];   /* items, hi exclusive */
  int64_t clo[MAXD], chi[MAXD]; /* cells, inclusive */
} box;

typedef struct plan {
  const geo *g;
  int nbox;
  box b[MAXBOX];
} plan;

/* Box with dims < e fixed at fix[], dim e in [lo, hi), dims > e whole. */
static void add_box(plan *pl, const int64_t *fix, int e, int64_t lo, int64_t hi) {
  const geo *g = pl->g;
  if (lo >= hi) return;
  box *b = &pl->b[pl->nbox++];
  for (int d = 0; d < g->n; d++) {
    if (d < e) {
      b->lo[d] = fix[d];
      b->hi[d] = fix[d] + 1;
    } else if (d == e) {
      b->lo[d] = lo;
      b->hi[d] = hi;
    } else {
      b->lo[d] = 0;
      b->hi[d] = g->shape[d];
    }
    b->clo[d] = cell_of(g, d, b->lo[d]);
    b->chi[d] = cell_of(g, d, b->hi[d] - 1);
  }
}

/* Split the items p..q (coordinates, inclusive) into boxes. */
static void make_boxes(plan *pl, const int64_t *p, const int64_t *q) {
  const geo *g = pl->g;
  int n = g->n, ds = n - 1;
  for (int d = 0; d < n; d++)
    if (p[d] != q[d]) {
      ds = d;
      break;
    }
  /* p's row tail: dims after the last non-zero coordinate of p start at 0,
   * so they fold into the box one dimension up; same for q's trailing
   * coordinates that sit at their last value. */
  int pz = -1, qz = -1;
  for (int d = 0; d < n; d++) {
    if (p[d] != 0) pz = d;
    if (q[d] != g->shape[d] - 1) qz = d;
  }
  pl->nbox = 0;
  for (int e = n - 1; e > ds; e--)
    if (e <= pz) add_box(pl, p, e, e == pz ? p[e] : p[e] + 1, g->shape[e]);
  add_box(pl, p, ds, pz <= ds ? p[ds] : p[ds] + 1, qz <= ds ? q[ds] + 1 : q[ds]);
  for (int e = ds + 1; e < n; e++)
    if (e <= qz) add_box(pl, q, e, 0, e == qz ? q[e] + 1 : q[e]);
}

/* ---- copying -------------------------------------------------------------- */

typedef struct job {
  const geo *g;
  uint64_t off, end;       /* requested array bytes */
  unsigned char *dst;      /* holds bytes [off, end) */
  int64_t bstart[MAXD];    /* block origin (items) */
  int nsec;                /* boxes meeting the block */
  int64_t ilo[MAXBOX][MAXD], ihi[MAXBOX][MAXD]; /* their intersections */
} job;

/* Rows of intersection k: the run dimension r (dims >= r copy as one run
 * of `run` items) is returned; dims < r are iterated by the caller. */
static int run_dim(const job *j, int k, int64_t *run) {
  const geo *g = j->g;
  const int64_t *lo = j->ilo[k], *hi = j->ihi[k];
  int r = g->n - 1;
  int64_t len = hi[r] - lo[r];
  while (r > 0 && lo[r] == 0 && hi[r] == g->shape[r] && g->bs[r] == g->shape[r]) {
    r--;
    len *= hi[r] - lo[r];
  }
  *run = len;
  return r;
}

static int64_t local_item(const job *j, const int64_t *x) {
  int64_t o = 0;
  for (int d = 0; d < j->g->n; d++) o += (x[d] - j->bstart[d]) * j->g->bstride[d];
  return o;
}

static int64_t global_item(const job *j, const int64_t *x) {
  int64_t o = 0;
  for (int d = 0; d < j->g->n; d++) o += x[d] * j->g->astride[d];
  return o;
}

/* Every run of every intersection that falls in the window of block
 * bytes [wlo, whi): copied out of `buf` (reading), or handed to `wr` as
 * bytes of chunk `chunk` whose block starts at byte `base` (writing). */
typedef struct runs_out {
  const unsigned char *buf; /* reading */
  b2_chunk_writer wr;       /* writing */
  void *ctx;
  int64_t chunk;
  size_t base;
} runs_out;

static int copy_runs(const job *j, const runs_out *o, int64_t wlo, int64_t whi) {
  const geo *g = j->g;
  const int64_t isz = g->isz;
  for (int k = 0; k < j->nsec; k++) {
    const int64_t *lo = j->ilo[k], *hi = j->ihi[k];
    int64_t run;
    int r = run_dim(j, k, &run);
    int64_t idx[MAXD];
    memcpy(idx, lo, sizeof idx);
    int64_t src = local_item(j, lo) * isz, dstb = global_item(j, lo) * isz;
    const int64_t rb = run * isz;
    for (;;) {
      /* clip [src, src+rb) -> [dstb, dstb+rb) to the window, in block
       * bytes first, then to the range: every sum stays within the
       * array's bytes (a crafted shape may bring them near INT64_MAX) */
      int64_t la = B2_MAX(src, wlo), lb = B2_MIN(src + rb, whi);
      int64_t a = 0, b = 0;
      if (la < lb) {
        a = B2_MAX(dstb + (la - src), (int64_t)j->off);
        b = B2_MIN(dstb + (lb - src), (int64_t)j->end);
      }
      if (a < b && o->wr) {
        int rc = o->wr(o->ctx, o->chunk, o->base + (size_t)(src + (a - dstb)), (size_t)(b - a),
                       j->dst + (a - (int64_t)j->off));
        if (rc < 0) return rc;
      } else if (a < b) {
        memcpy(j->dst + (a - (int64_t)j->off), o->buf + (src + (a - dstb) - wlo), (size_t)(b - a));
      }
      /* next run: step the innermost dimension that has one more, back to
       * the start of those after it (never past the last run: the offset
       * of an item beyond the array could overflow) */
      int d = r - 1;
      for (; d >= 0; d--) {
        if (idx[d] + 1 < hi[d]) {
          idx[d]++;
          src += g->bstride[d] * isz;
          dstb += g->astride[d] * isz;
          break;
        }
        src -= (idx[d] - lo[d]) * g->bstride[d] * isz;
        dstb -= (idx[d] - lo[d]) * g->astride[d] * isz;
        idx[d] = lo[d];
      }
      if (d < 0) break;
    }
  }
  return 0;
}

/* Visit block `c` (cell coordinates): gather the boxes it meets, fetch its
 * needed span once and copy. */
static int do_block(job *j, const plan *pl, const int64_t *c, b2_chunk_reader rd,
                    b2_chunk_writer wr, void *ctx) {
  const geo *g = j->g;
  int64_t chunk = 0, blk = 0, bend[MAXD];
  for (int d = 0; d < g->n; d++) {
    int64_t jc = c[d] / g->nbpc[d], kb = c[d] % g->nbpc[d];
    chunk += jc * g->cgstride[d];
    blk += kb * g->bgstride[d];
    j->bstart[d] = jc * g->cs[d] + kb * g->bs[d];
    bend[d] = B2_MIN(B2_MIN(j->bstart[d] + g->bs[d], jc * g->cs[d] + g->cs[d]), g->shape[d]);
  }
  j->nsec = 0;
  int64_t smin = INT64_MAX, smax = -1;
  for (int k = 0; k < pl->nbox; k++) {
    const box *b = &pl->b[k];
    int in = 1;
    for (int d = 0; d < g->n && in; d++) in = c[d] >= b->clo[d] && c[d] <= b->chi[d];
    if (!in) continue;
    int s = j->nsec++;
    int64_t last[MAXD];
    for (int d = 0; d < g->n; d++) {
      j->ilo[s][d] = B2_MAX(b->lo[d], j->bstart[d]);
      j->ihi[s][d] = B2_MIN(b->hi[d], bend[d]);
      last[d] = j->ihi[s][d] - 1;
    }
    smin = B2_MIN(smin, local_item(j, j->ilo[s]));
    smax = B2_MAX(smax, local_item(j, last));
  }
  if (j->nsec == 0) return 0; /* cannot happen: c came from a box */
  const int64_t isz = g->isz;
  const size_t base = (size_t)(blk * g->block_nbytes);
  if (wr) { /* writing: every run straight from the caller's bytes */
    runs_out o = {NULL, wr, ctx, chunk, base};
    return copy_runs(j, &o, smin * isz, (smax + 1) * isz);
  }

  /* One contiguous run: read it straight into dst. */
  if (j->nsec == 1) {
    int64_t run;
    int r = run_dim(j, 0, &run);
    int single = 1;
    for (int d = 0; d < r; d++) single &= j->ihi[0][d] - j->ilo[0][d] == 1;
    if (single) {
      int64_t src = local_item(j, j->ilo[0]) * isz, dstb = global_item(j, j->ilo[0]) * isz;
      int64_t a = B2_MAX(dstb, (int64_t)j->off), b = B2_MIN(dstb + run * isz, (int64_t)j->end);
      int rc = rd(ctx, chunk, base + (size_t)(src + (a - dstb)), (size_t)(b - a),
                  j->dst + (a - (int64_t)j->off));
      return rc < 0 && rc != B2_B2ND_SKIP ? rc : 0;
    }
  }

  /* Otherwise fetch the span [smin, smax] into scratch, in windows. */
  int64_t slo = smin * isz, shi = (smax + 1) * isz;
  size_t win = (size_t)B2_MIN((int64_t)B2_MAX(b2_b2nd_window, (size_t)1), shi - slo);
  unsigned char *buf = scratch_get(win);
  if (!buf) return b2_fail(B2_E_NOMEM, "b2nd: no memory for a %zu-byte block buffer", win);
  for (int64_t w = slo; w < shi; w += (int64_t)win) {
    int64_t we = B2_MIN(shi, w + (int64_t)win);
    int rc = rd(ctx, chunk, base + (size_t)w, (size_t)(we - w), buf);
    if (rc == B2_B2ND_SKIP) continue;
    if (rc < 0) return rc;
    runs_out o = {buf, NULL, NULL, chunk, base};
    copy_runs(j, &o, w, we);
  }
  return 0;
}

/* Is cell tuple c inside the cell range of box b? */
static int cells_in(const geo *g, const box *b, const int64_t *c) {
  for (int d = 0; d < g->n; d++)
    if (c[d] < b->clo[d] || c[d] > b->chi[d]) return 0;
  return 1;
}

/* Reading (rd) or writing (wr) the C-order range [off, off+len). */
static int walk(const b2_b2nd *a, uint64_t off, size_t len, unsigned char *dst, b2_chunk_reader rd,
                b2_chunk_writer wr, void *ctx) {
  if (!a || !(rd || wr) || (!dst && len)) return b2_fail(B2_E_INVAL, "b2nd: bad arguments");
  if (len > INT32_MAX) return b2_fail(B2_E_INVAL, "b2nd: %zu bytes at once is too many", len);
  uint64_t nbytes = (uint64_t)b2_b2nd_nbytes(a);
  if (off >= nbytes || len == 0) return 0;
  if (len > nbytes - off) len = (size_t)(nbytes - off);

  geo g;
  geo_init(&g, a);
  uint64_t isz = (uint64_t)g.isz;
  int64_t first = (int64_t)(off / isz), last = (int64_t)((off + len - 1) / isz);
  int64_t p[MAXD], q[MAXD];
  for (int d = g.n - 1; d >= 0; d--) {
    p[d] = first % g.shape[d];
    first /= g.shape[d];
    q[d] = last % g.shape[d];
    last /= g.shape[d];
  }
  plan pl;
  pl.g = &g;
  make_boxes(&pl, p, q);

  job j;
  j.g = &g;
  j.off = off;
  j.end = off + len;
  j.dst = dst;
  for (int k = 0; k < pl.nbox; k++) {
    const box *b = &pl.b[k];
    int64_t c[MAXD];
    memcpy(c, b->clo, sizeof c);
    for (;;) {
      int seen = 0;
      for (int m = 0; m < k && !seen; m++) seen = cells_in(&g, &pl.b[m], c);
      if (!seen) {
        int rc = do_block(&j, &pl, c, rd, wr, ctx);
        if (rc < 0) return rc;
      }
      int d = g.n - 1;
      for (; d >= 0; d--) {
        if (++c[d] <= b->chi[d]) break;
        c[d] = b->clo[d];
      }
      if (d < 0) break;
    }
  }
  return (int)len;
}

int b2_b2nd_read(const b2_b2nd *a, uint64_t off, size_t len, void *dst, b2_chunk_reader rd,
                 void *ctx) {
  return walk(a, off, len, dst, rd, NULL, ctx);
}

int b2_b2nd_update(const b2_b2nd *a, uint64_t off, size_t len, const void *src,
                   b2_chunk_writer wr, void *ctx) {
  uint64_t nbytes = a ? (uint64_t)b2_b2nd_nbytes(a) : 0;
  if (off > nbytes || len > nbytes - off)
    return b2_fail(B2_E_RANGE, "b2nd: bytes %llu..%llu are past the array's %llu",
                   (unsigned long long)off, (unsigned long long)(off + len),
                   (unsigned long long)nbytes);
  /* The walk only reads from the caller's buffer when writing. */
  return walk(a, off, len, (unsigned char *)(uintptr_t)src, NULL, wr, ctx);
}
