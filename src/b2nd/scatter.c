/*
 * scatter.c - lay out one decoded b2nd chunk from C-order items.
 *
 * The inverse of read.c's gather.  A chunk holds the items of its box of
 * the array (chunkshape, clipped at the array's end) split into blocks:
 * along each dimension the chunk is cut every blockshape items and the
 * last piece padded to a whole block, so the decoded chunk is the block
 * grid in C order, each block blockshape items in C order.  Items outside
 * the array (edge chunks, and the rounding of chunkshape up to whole
 * blocks) are zero.  The source is any dense C-order box of the array that
 * contains the chunk; each block is filled row by row, where a row is the
 * block's extent along the last dimension (rows of a block that are also
 * contiguous in the source are copied together).  Trailing dimensions
 * that chunks, blocks and the box all keep whole are folded into the one
 * before first, so long rows are copied at once.
 */
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "common/util.h"

#define MAXD B2_B2ND_MAXDIM

typedef struct lay {
  int n;
  int64_t isz;
  int64_t shape[MAXD], cs[MAXD], bs[MAXD];
  int64_t o[MAXD], e[MAXD];       /* chunk origin and extent in the array */
  int64_t bx0[MAXD], bxn[MAXD];   /* source box start and shape */
} lay;

/* Place the chunk and check the box; folds never-split trailing dims. */
static int lay_init(lay *L, const b2_b2nd *a, int64_t chunk, const int64_t *box_start,
                    const int64_t *box_shape) {
  L->isz = a->itemsize;
  if (a->ndim == 0) {
    L->n = 1;
    L->shape[0] = L->cs[0] = L->bs[0] = L->e[0] = L->bxn[0] = 1;
    L->o[0] = L->bx0[0] = 0;
    return chunk == 0 ? 0 : b2_fail(B2_E_RANGE, "b2nd scatter: chunk %lld of 1", (long long)chunk);
  }
  if (chunk < 0 || chunk >= a->nchunks)
    return b2_fail(B2_E_RANGE, "b2nd scatter: chunk %lld of %lld", (long long)chunk,
                   (long long)a->nchunks);
  if (!box_start || !box_shape) return b2_fail(B2_E_INVAL, "b2nd scatter: no box");
  L->n = a->ndim;
  int64_t rest = chunk;
  for (int d = L->n - 1; d >= 0; d--) {
    L->shape[d] = a->shape[d];
    L->cs[d] = a->chunkshape[d];
    L->bs[d] = a->blockshape[d];
    if (L->shape[d] == 0 || L->cs[d] <= 0 || L->bs[d] <= 0)
      return b2_fail(B2_E_RANGE, "b2nd scatter: the array has no chunks");
    int64_t nc = (L->shape[d] + L->cs[d] - 1) / L->cs[d];
    L->o[d] = rest % nc * L->cs[d];
    rest /= nc;
    L->e[d] = B2_MIN(L->cs[d], L->shape[d] - L->o[d]);
    L->bx0[d] = box_start[d];
    L->bxn[d] = box_shape[d];
    if (box_start[d] < 0 || box_shape[d] < 0 || L->o[d] < box_start[d] ||
        L->o[d] + L->e[d] - box_start[d] > box_shape[d])
      return b2_fail(B2_E_INVAL, "b2nd scatter: the box misses chunk %lld along dimension %d",
                     (long long)chunk, d);
  }
  if (rest != 0)
    return b2_fail(B2_E_RANGE, "b2nd scatter: chunk %lld is out of range", (long long)chunk);
  while (L->n > 1) {
    int l = L->n - 1;
    int64_t s = L->shape[l];
    if (L->cs[l] != s || L->bs[l] != s || L->bx0[l] != 0 || L->bxn[l] != s) break;
    int k = l - 1;
    L->shape[k] *= s;
    L->cs[k] *= s;
    L->bs[k] *= s;
    L->o[k] *= s;
    L->e[k] *= s;
    L->bx0[k] *= s;
    L->bxn[k] *= s;
    L->n--;
  }
  return 0;
}

int b2_b2nd_scatter(const b2_b2nd *a, int64_t chunk, const int64_t *box_start,
                    const int64_t *box_shape, const void *src, void *dst) {
  if (!a || !src || !dst) return b2_fail(B2_E_INVAL, "b2nd scatter: bad arguments");
  lay L;
  memset(&L, 0, sizeof L);
  int rc = lay_init(&L, a, chunk, box_start, box_shape);
  if (rc < 0) return rc;
  const int n = L.n, last = n - 1;
  int64_t sstr[MAXD], bstr[MAXD], nbpc[MAXD];
  int padded = 0;
  int64_t ss = 1, bb = 1;
  for (int d = last; d >= 0; d--) {
    sstr[d] = ss;
    bstr[d] = bb;
    ss *= L.bxn[d];
    bb *= L.bs[d];
    nbpc[d] = (L.cs[d] + L.bs[d] - 1) / L.bs[d];
    padded |= L.e[d] < nbpc[d] * L.bs[d];
  }
  if (padded) memset(dst, 0, (size_t)a->chunk_nbytes);
  const unsigned char *s = src;
  unsigned char *out = dst;
  const size_t block_nbytes = (size_t)a->block_nbytes;
  int64_t kb[MAXD] = {0};
  for (int64_t blk = 0;; blk++) {
    /* this block's extent inside the array */
    int64_t be[MAXD], sbase = 0;
    int empty = 0;
    for (int d = 0; d < n; d++) {
      be[d] = B2_MIN(L.bs[d], L.e[d] - kb[d] * L.bs[d]);
      empty |= be[d] <= 0;
      sbase += (L.o[d] + kb[d] * L.bs[d] - L.bx0[d]) * sstr[d];
    }
    if (!empty) {
      unsigned char *bdst = out + (size_t)blk * block_nbytes;
      /* rows contiguous in both block and source are copied together */
      int rd = last;
      int64_t run = be[last];
      while (rd > 0 && be[rd] == L.bs[rd] && be[rd] == L.bxn[rd]) {
        rd--;
        run *= be[rd];
      }
      size_t run_bytes = (size_t)(run * L.isz);
      int64_t idx[MAXD] = {0};
      for (;;) {
        int64_t so = sbase, bo = 0;
        for (int d = 0; d < rd; d++) {
          so += idx[d] * sstr[d];
          bo += idx[d] * bstr[d];
        }
        memcpy(bdst + (size_t)(bo * L.isz), s + (size_t)(so * L.isz), run_bytes);
        int d = rd - 1;
        while (d >= 0 && ++idx[d] == be[d]) idx[d--] = 0;
        if (d < 0) break;
      }
    }
    int d = last;
    while (d >= 0 && ++kb[d] == nbpc[d]) kb[d--] = 0;
    if (d < 0) break;
  }
  return 0;
}
