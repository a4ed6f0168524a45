/*
 * ndcell.c - the NDCELL (id 32) and NDMEAN (id 33) filters python-blosc2
 * offers for arrays: a block of the array (its b2nd block shape, C order)
 * is stored cell by cell, cells of `meta` items along each dimension (the
 * last ones cut at the block's edges), cells in C order over the block's
 * grid of cells, each cell as its rows along the last dimension, in C
 * order.  NDMEAN also replaces every item of a cell by the cell's mean
 * (float or double items), so it is lossy, and its cells are at most the
 * block's size along each dimension.
 *
 * As the reference places them, a cell starts at its grid position times
 * the first dimension's cell size along every dimension (the same size
 * for NDCELL; for NDMEAN it differs only where a side of the block is
 * shorter than meta).  Every row is checked to lie inside the block, and
 * a block whose rows do not cover it exactly is refused.
 */
#include "b2_codec.h"
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <string.h>

/* One block's cells: sizes, grid and strides. */
struct cells {
  int ndim;
  int64_t shape[B2_NDCELL_MAXDIM];
  int64_t cell[B2_NDCELL_MAXDIM];
  int64_t grid[B2_NDCELL_MAXDIM];   /* cells along each dimension */
  int64_t stride[B2_NDCELL_MAXDIM]; /* items between neighbours along it */
  int64_t ncells, nitems;
};

static int setup(struct cells *c, int mean, int meta, size_t typesize, int ndim,
                 const int32_t *shape, size_t nbytes) {
  const char *name = mean ? "ndmean" : "ndcell";
  if (ndim < 1 || ndim > B2_NDCELL_MAXDIM)
    return b2_fail(B2_E_UNSUPPORTED, "%s: %d dimensions, not 1 to %d", name, ndim,
                   B2_NDCELL_MAXDIM);
  int side = mean ? (int)(int8_t)meta : meta;
  if (side <= 0) return b2_fail(B2_E_FORMAT, "%s: cell size %d", name, side);
  if (typesize == 0) return b2_fail(B2_E_FORMAT, "%s: typesize 0", name);
  c->ndim = ndim;
  c->ncells = 1;
  if (b2_block_items(ndim, shape, typesize, nbytes, &c->nitems) < 0)
    return b2_fail(B2_E_FORMAT, "%s: block shape does not fit the block's %zu bytes", name,
                   nbytes);
  for (int i = 0; i < ndim; i++) {
    c->shape[i] = shape[i];
    c->cell[i] = mean && side > shape[i] ? shape[i] : side;
    c->grid[i] = (shape[i] + c->cell[i] - 1) / c->cell[i];
    c->ncells *= c->grid[i];
  }
  if ((uint64_t)c->nitems * typesize != nbytes)
    return b2_fail(B2_E_FORMAT, "%s: block shape holds %lld items, the block %zu bytes", name,
                   (long long)c->nitems, nbytes);
  int64_t cellitems = 1; /* one whole cell must fit in the block */
  for (int i = 0; i < ndim && cellitems <= c->nitems; i++) cellitems *= c->cell[i];
  if (cellitems > c->nitems)
    return b2_fail(B2_E_FORMAT, "%s: cells of %d larger than the block", name, side);
  int64_t s = 1;
  for (int i = ndim - 1; i >= 0; i--) {
    c->stride[i] = s;
    s *= c->shape[i];
  }
  return 0;
}

/* Visit every row of every cell in stored order: fn(ctx, cell, first
 * item of the row in the block, items in the row).  Returns 0 or a
 * negative code for a row outside the block, or rows not covering it. */
typedef int (*row_fn)(void *ctx, int64_t cell, int64_t at, int64_t n);

static int walk(const struct cells *c, const char *name, row_fn fn, void *ctx) {
  int nd = c->ndim;
  int64_t total = 0;
  for (int64_t k = 0; k < c->ncells; k++) {
    int64_t ii[B2_NDCELL_MAXDIM], pad[B2_NDCELL_MAXDIM], r = k;
    for (int i = nd - 1; i >= 0; i--) {
      ii[i] = r % c->grid[i];
      r /= c->grid[i];
    }
    int64_t orig = 0, nrows = 1;
    for (int i = 0; i < nd; i++) {
      orig += ii[i] * c->cell[0] * c->stride[i];
      int64_t edge = c->shape[i] % c->cell[i];
      pad[i] = edge && ii[i] == c->grid[i] - 1 ? edge : c->cell[i];
      if (i < nd - 1) nrows *= pad[i];
    }
    for (int64_t row = 0; row < nrows; row++) {
      int64_t at = orig;
      r = row;
      for (int i = nd - 2; i >= 0; i--) {
        at += (r % pad[i]) * c->stride[i];
        r /= pad[i];
      }
      if (at < 0 || at + pad[nd - 1] > c->nitems)
        return b2_fail(B2_E_FORMAT, "%s: a cell's row lies outside the block", name);
      int rc = fn(ctx, k, at, pad[nd - 1]);
      if (rc < 0) return rc;
      total += pad[nd - 1];
    }
  }
  if (total != c->nitems)
    return b2_fail(B2_E_FORMAT, "%s: cells hold %lld of the block's %lld items", name,
                   (long long)total, (long long)c->nitems);
  return 0;
}

struct copy {
  const uint8_t *src;
  uint8_t *dst;
  size_t ts, pos; /* bytes of the cell-ordered side done */
  int gather;     /* block -> cells (encode), else cells -> block */
};

static int copy_row(void *ctx, int64_t cell, int64_t at, int64_t n) {
  struct copy *x = ctx;
  (void)cell;
  size_t len = (size_t)n * x->ts, b = (size_t)at * x->ts;
  if (x->gather)
    memcpy(x->dst + x->pos, x->src + b, len);
  else
    memcpy(x->dst + b, x->src + x->pos, len);
  x->pos += len;
  return 0;
}

int b2_ndcell_decode(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                     size_t nbytes, const uint8_t *src, uint8_t *dst) {
  struct cells c;
  int rc = setup(&c, mean, meta, typesize, ndim, shape, nbytes);
  if (rc < 0) return rc;
  memset(dst, 0, nbytes); /* rows of NDMEAN's odd cells may leave gaps */
  struct copy x = {src, dst, typesize, 0, 0};
  return walk(&c, mean ? "ndmean" : "ndcell", copy_row, &x);
}

/* NDMEAN's encode: each cell's mean, summed in the item's own precision
 * row by row as the reference sums it, then written over the cell. */
struct means {
  const uint8_t *src;
  uint8_t *dst;
  size_t ts, pos;
  int64_t cell, count;
  double sum_d;
  float sum_f;
};

static void put_mean(struct means *m) {
  for (int64_t i = 0; i < m->count; i++, m->pos += m->ts) {
    if (m->ts == 4) {
      float v = m->sum_f / (float)m->count;
      memcpy(m->dst + m->pos, &v, 4);
    } else {
      double v = m->sum_d / (double)m->count;
      memcpy(m->dst + m->pos, &v, 8);
    }
  }
  m->sum_f = 0;
  m->sum_d = 0;
  m->count = 0;
}

static int mean_row(void *ctx, int64_t cell, int64_t at, int64_t n) {
  struct means *m = ctx;
  if (cell != m->cell) {
    if (m->count) put_mean(m);
    m->cell = cell;
  }
  for (int64_t i = 0; i < n; i++) {
    const uint8_t *p = m->src + (size_t)(at + i) * m->ts;
    if (m->ts == 4) {
      float v;
      memcpy(&v, p, 4);
      m->sum_f += v;
    } else {
      double v;
      memcpy(&v, p, 8);
      m->sum_d += v;
    }
  }
  m->count += n;
  return 0;
}

/* setup, for an encoder: NDMEAN averages floats or doubles only. */
static int setup_encode(struct cells *c, int mean, int meta, size_t typesize, int ndim,
                        const int32_t *shape, size_t nbytes) {
  int rc = setup(c, mean, meta, typesize, ndim, shape, nbytes);
  if (rc == 0 && mean && typesize != 4 && typesize != 8)
    rc = b2_fail(B2_E_UNSUPPORTED, "ndmean: typesize %zu is not 4 or 8", typesize);
  return rc;
}

int b2_ndcell_check(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                    size_t nbytes) {
  struct cells c;
  return setup_encode(&c, mean, meta, typesize, ndim, shape, nbytes);
}

int b2_ndcell_encode(int mean, int meta, size_t typesize, int ndim, const int32_t *shape,
                     size_t nbytes, const uint8_t *src, uint8_t *dst) {
  struct cells c;
  int rc = setup_encode(&c, mean, meta, typesize, ndim, shape, nbytes);
  if (rc < 0) return rc;
  if (!mean) {
    struct copy x = {src, dst, typesize, 0, 1};
    return walk(&c, "ndcell", copy_row, &x);
  }
  struct means m = {src, dst, typesize, 0, -1, 0, 0, 0};
  rc = walk(&c, "ndmean", mean_row, &m);
  if (rc == 0 && m.count) put_mean(&m);
  return rc;
}

int b2_block_items(int ndim, const int32_t *shape, size_t typesize, size_t nbytes,
                   int64_t *items) {
  int64_t n = 1, cap = typesize ? (int64_t)(nbytes / typesize) : 0;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] <= 0 || n > cap / shape[i]) return -1;
    n *= shape[i];
  }
  *items = n;
  return 0;
}
