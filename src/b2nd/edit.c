/*
 * edit.c - a new array from a .npy header, and the geometry an editor of
 * stored chunks needs: the C-order span of a chunk's items and the items
 * a change of the first axis brings back into an edge chunk; the bands
 * of rows a sequential reader of the C-order view decodes one by one;
 * where the items of chunks of one kind (holes) begin and end in C order.
 */
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "common/util.h"

int b2_b2nd_from_npy(b2_b2nd *out, const char *descr, int fortran, int ndim,
                     const int64_t *shape, const int32_t *chunkshape,
                     const int32_t *blockshape, int32_t min_side) {
  memset(out, 0, sizeof *out);
  if (fortran)
    return b2_fail(B2_E_UNSUPPORTED, "Fortran-ordered arrays are not supported "
                   "(save numpy.ascontiguousarray(x) instead)");
  /* The metalayer holds the dtype text python-blosc2 would store. */
  char *dtype = NULL;
  int64_t isz = 0;
  int rc = b2_dtype_from_npy(descr, &dtype, &isz);
  if (rc < 0) return rc;
  if (ndim < 0 || ndim > B2_B2ND_MAXDIM) {
    free(dtype);
    return b2_fail(B2_E_LIMIT, "%d dimensions (at most %d)", ndim, B2_B2ND_MAXDIM);
  }
  int32_t cs[B2_B2ND_MAXDIM] = {0}, bs[B2_B2ND_MAXDIM] = {0};
  for (int d = 0; d < ndim; d++) {
    cs[d] = chunkshape ? chunkshape[d] : 0;
    bs[d] = blockshape ? blockshape[d] : 0;
  }
  rc = b2_b2nd_choose_shapes(ndim, shape, (int32_t)isz, min_side, cs, bs);
  if (rc == 0) rc = b2_b2nd_make(out, ndim, shape, cs, bs, (int32_t)isz, dtype);
  free(dtype);
  return rc;
}

int b2_b2nd_storable(const b2_b2nd *a) {
  if (a->block_nbytes > B2_CHUNK_MAXBLOCK)
    return b2_fail(B2_E_LIMIT, "blocks of %d bytes (the format holds at most %d)",
                   a->block_nbytes, B2_CHUNK_MAXBLOCK);
  if (a->chunk_nbytes > B2_CHUNK_MAXSIZE)
    return b2_fail(B2_E_LIMIT, "chunks of %lld bytes (the format holds at most %d)",
                   (long long)a->chunk_nbytes, B2_CHUNK_MAXSIZE);
  return 0;
}

int b2_b2nd_of_npy(const void *buf, size_t len, int64_t size, const int32_t *cs, int ncs,
                   const int32_t *bs, int nbs, int32_t min_side, b2_b2nd *out, size_t *hl) {
  memset(out, 0, sizeof *out);
  char *descr = malloc(B2_B2ND_MAXDTYPE + 1);
  if (!descr) return b2_fail(B2_E_NOMEM, "no memory for a .npy header");
  int fortran = 0, ndim = 0;
  int64_t shape[B2_B2ND_MAXDIM];
  int rc = b2_npy_parse(buf, len, hl, descr, B2_B2ND_MAXDTYPE + 1, &fortran, &ndim, shape);
  if (rc == 0)
    rc = b2_b2nd_from_npy(out, descr, fortran, ndim, shape, ncs == ndim ? cs : NULL,
                          nbs == ndim ? bs : NULL, min_side);
  free(descr);
  if (rc < 0) return rc;
  if (size > (int64_t)*hl + b2_b2nd_nbytes(out)) /* no array holds them all */
    rc = b2_fail(B2_E_INVAL, "%lld bytes follow the items its header describes",
                 (long long)(size - (int64_t)*hl - b2_b2nd_nbytes(out)));
  /* Items or chunks too large for the format's blocks and chunks. */
  if (rc == 0) rc = b2_b2nd_storable(out);
  if (rc < 0) b2_b2nd_free(out);
  return rc;
}

int b2_b2nd_frame_params(const b2_b2nd *a, b2_frame_params *fp, b2_frame_meta_init *mi,
                         uint8_t **meta) {
  size_t len;
  int rc = b2_b2nd_storable(a);
  if (rc < 0) return rc;
  b2_b2nd_cparams(a, &fp->cparams);
  rc = b2_cparams_check(&fp->cparams); /* the codec and filters take these items, blocks */
  if (rc < 0) return rc;
  const char *fl = b2_cparams_float_only(&fp->cparams);
  if (fl && (!a->dtype || (strcmp(a->dtype, "<f4") != 0 && strcmp(a->dtype, "<f8") != 0)))
    return b2_fail(B2_E_INVAL, "%s encodes float32 or float64 items (<f4, <f8), not %s", fl,
                   a->dtype ? a->dtype : "no dtype");
  rc = b2_b2nd_meta_encode(a, meta, &len);
  if (rc < 0) return rc;
  mi->name = "b2nd";
  mi->data = *meta;
  mi->len = len;
  fp->cparams.typesize = a->itemsize; /* the frame records the whole item */
  fp->chunksize = (int32_t)a->chunk_nbytes;
  fp->nmeta = 1;
  fp->meta = mi;
  return 0;
}

/* Chunk grid position of chunk `chunk` along each dimension. */
static void chunk_pos(const b2_b2nd *a, int64_t chunk, int64_t *jc) {
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t n = a->chunkshape[d] ? (a->shape[d] + a->chunkshape[d] - 1) / a->chunkshape[d] : 0;
    jc[d] = n ? chunk % n : 0;
    chunk = n ? chunk / n : 0;
  }
}

int b2_b2nd_chunk_span(const b2_b2nd *a, int64_t chunk, int64_t *lo, int64_t *hi,
                       int64_t *held) {
  if (chunk < 0 || chunk >= a->nchunks)
    return b2_fail(B2_E_RANGE, "b2nd: chunk %lld of %lld", (long long)chunk, (long long)a->nchunks);
  int64_t jc[B2_B2ND_MAXDIM], first = 0, last = 0, stride = 1, items = 1;
  chunk_pos(a, chunk, jc);
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t s = jc[d] * a->chunkshape[d];
    int64_t e = B2_MIN(s + a->chunkshape[d], a->shape[d]) - 1;
    first += s * stride;
    last += e * stride;
    stride *= a->shape[d];
    items *= e - s + 1;
  }
  *lo = first * a->itemsize;
  *hi = (last + 1) * a->itemsize;
  if (held) *held = items * a->itemsize;
  return 0;
}

int b2_b2nd_zero_rows(const b2_b2nd *a, int64_t chunk, int64_t from, void *buf) {
  if (a->ndim == 0 || chunk < 0 || chunk >= a->nchunks)
    return b2_fail(B2_E_RANGE, "b2nd: chunk %lld", (long long)chunk);
  int64_t jc[B2_B2ND_MAXDIM];
  chunk_pos(a, chunk, jc);
  /* Blocks are in C order within the chunk, the first axis outermost: in
   * every block, the items of rows >= from form the block's tail. */
  int64_t nb = 1, inner = 1; /* blocks per chunk; blocks per step of axis 0 */
  int64_t bitems = 1;        /* items of a block per row of axis 0 */
  for (int d = a->ndim - 1; d >= 0; d--) {
    int64_t k = (a->chunkshape[d] + a->blockshape[d] - 1) / a->blockshape[d];
    nb *= k;
    if (d > 0) {
      inner *= k;
      bitems *= a->blockshape[d];
    }
  }
  int64_t base = jc[0] * a->chunkshape[0];
  for (int64_t b = 0; b < nb; b++) {
    int64_t row0 = base + (b / inner) * a->blockshape[0];
    int64_t keep = B2_MIN(B2_MAX(from - row0, 0), (int64_t)a->blockshape[0]);
    int64_t at = b * a->block_nbytes + keep * bitems * a->itemsize;
    memset((uint8_t *)buf + at, 0, (size_t)(a->block_nbytes - (at - b * a->block_nbytes)));
  }
  return 0;
}

int b2_b2nd_is_linear(const b2_b2nd *a) {
  for (int d = 1; d < a->ndim; d++)
    if (a->chunkshape[d] != a->shape[d] || a->blockshape[d] != a->shape[d]) return 0;
  /* and no padding between chunks: whole blocks fill each chunk */
  return a->ndim == 0 || (a->chunkshape[0] > 0 && a->blockshape[0] > 0 &&
                          a->chunkshape[0] % a->blockshape[0] == 0);
}

int64_t b2_b2nd_row_nbytes(const b2_b2nd *a) {
  if (a->ndim < 1 || a->nitems <= 0) return 0;
  int64_t n = a->itemsize;
  for (int d = 1; d < a->ndim; d++) n *= a->shape[d]; /* <= the array's bytes */
  return n;
}

int b2_b2nd_band(const b2_b2nd *a, int64_t row, int64_t target, int64_t max, int64_t *r0,
                 int64_t *r1) {
  int64_t rb = b2_b2nd_row_nbytes(a);
  if (rb <= 0 || rb > max || row < 0 || row >= a->shape[0]) return 0;
  int64_t cs = a->chunkshape[0], bs = a->blockshape[0];
  int64_t cstart = row / cs * cs;
  int64_t cend = B2_MIN(cstart + cs, a->shape[0]);
  int64_t k = (row - cstart) / bs;
  if (bs * rb <= max) {
    int64_t g = B2_MAX(1, B2_MIN(target, max) / (bs * rb)); /* cells a band */
    int64_t k0 = k / g * g;
    *r0 = cstart + k0 * bs;
    *r1 = B2_MIN(cstart + B2_MIN(k0 + g, (cs + bs - 1) / bs) * bs, cend);
  } else {
    int64_t c0 = cstart + k * bs, c1 = B2_MIN(c0 + bs, cend);
    int64_t h = max / rb; /* rows a band, >= 1 */
    *r0 = c0 + (row - c0) / h * h;
    *r1 = B2_MIN(*r0 + h, c1);
  }
  return 1;
}

int64_t b2_b2nd_seek(const b2_b2nd *a, int64_t off, int want, b2_chunk_test hole, void *ctx,
                     int64_t budget, int *cut) {
  int64_t nbytes = b2_b2nd_nbytes(a);
  *cut = 0;
  if (off < 0 || off >= nbytes || a->itemsize <= 0) return nbytes;
  if (a->ndim == 0) { /* one item, one chunk */
    int h = hole(ctx, 0);
    return h < 0 ? h : (h == want ? off : nbytes);
  }
  int nd = a->ndim;
  int64_t c[B2_B2ND_MAXDIM], nck[B2_B2ND_MAXDIM], k = off / a->itemsize;
  for (int d = nd - 1; d >= 0; d--) { /* the item's coordinates; chunks per axis */
    c[d] = k % a->shape[d];
    k /= a->shape[d];
    nck[d] = (a->shape[d] + a->chunkshape[d] - 1) / a->chunkshape[d];
  }
  int64_t pos = off; /* start of the run looked at (off itself at first) */
  for (int64_t runs = 0;; runs++) {
    if (runs == budget) {
      *cut = 1;
      return pos;
    }
    int64_t chunk = 0;
    for (int d = 0; d < nd; d++) chunk = chunk * nck[d] + c[d] / a->chunkshape[d];
    int h = hole(ctx, chunk);
    if (h < 0) return h;
    if (h == want) return pos;
    /* The run: the items of this row in this chunk from c[nd-1] on. */
    int64_t cs = a->chunkshape[nd - 1];
    int64_t end = B2_MIN((c[nd - 1] / cs + 1) * cs, a->shape[nd - 1]);
    int64_t item = pos / a->itemsize + (end - c[nd - 1]);
    pos = item * a->itemsize;
    if (pos >= nbytes) return nbytes;
    c[nd - 1] = end;
    for (int d = nd - 1; d > 0 && c[d] == a->shape[d]; d--) { /* carry */
      c[d] = 0;
      c[d - 1]++;
    }
  }
}
