/* filters.c - one step of a chunk's filter pipeline, forward (encode) or
 * backward (decode), mapping a pipeline slot (id + meta byte) onto the
 * layer-1 filter kernels with the reference library's conventions: a
 * non-zero meta is the element size for shuffle and bytedelta, the
 * signed precision for trunc_prec; old Blosc 1.x chunks bit-shuffled only
 * blocks holding a multiple of 8 elements. */
#include "b2_codec.h"
#include "b2_error.h"
#include "chunk/chunk_internal.h"

#include <string.h>

int b2_filter_supported(int fid) {
  return fid == B2_FILTER_NONE || fid == B2_FILTER_SHUFFLE || fid == B2_FILTER_BITSHUFFLE ||
         fid == B2_FILTER_DELTA || fid == B2_FILTER_TRUNC_PREC || fid == B2_FILTER_BYTEDELTA ||
         fid == B2_FILTER_INT_TRUNC || fid == B2_FILTER_NDCELL || fid == B2_FILTER_NDMEAN;
}

/* The cell filters work on an array's blocks: without its shape, refused. */
static int no_shape(int fid) {
  return b2_fail(B2_E_FORMAT, "%s filter needs the array's block shape (no b2nd metalayer)",
                 b2_filter_name(fid));
}

int b2_filter_is_decode_noop(int fid) {
  return fid == B2_FILTER_NONE || fid == B2_FILTER_TRUNC_PREC ||
         fid == B2_FILTER_INT_TRUNC;
}

static size_t elem_size(int meta, int typesize) {
  return (size_t)(meta ? meta : typesize);
}

int b2_filter_backward(int fid, int meta, int typesize, int version,
                       size_t offset, size_t bsize, const uint8_t *ref,
                       const uint8_t *src, uint8_t *dst, const b2_chunk_geom *geom) {
  switch (fid) {
  case B2_FILTER_SHUFFLE:
    b2_unshuffle(elem_size(meta, typesize), bsize, src, dst);
    return 0;
  case B2_FILTER_BITSHUFFLE: {
    size_t nelem = bsize / (size_t)typesize;
    if (version <= B2_VERSION_BLOSC1 && (nelem % 8 != 0 || nelem == 0)) {
      /* Blosc 1.x left such blocks un-shuffled. */
      memcpy(dst, src, bsize);
      return 0;
    }
    int rc = b2_bitunshuffle((size_t)typesize, bsize, src, dst);
    if (rc < 0) return rc;
    /* Blosc 1.x never wrote the bytes past the last whole element (the
     * reference leaves them as the output buffer held them): zeros. */
    if (version <= B2_VERSION_BLOSC1)
      memset(dst + nelem * (size_t)typesize, 0, bsize % (size_t)typesize);
    return 0;
  }
  case B2_FILTER_DELTA:
    b2_delta_decode(ref ? ref : dst, offset, bsize, (size_t)typesize, dst);
    return 0;
  case B2_FILTER_BYTEDELTA:
    b2_bytedelta_decode(elem_size(meta, typesize), bsize, src, dst);
    return 0;
  case B2_FILTER_NDCELL:
  case B2_FILTER_NDMEAN:
    if (!geom) return no_shape(fid);
    return b2_ndcell_decode(fid == B2_FILTER_NDMEAN, meta, (size_t)typesize, geom->ndim,
                            geom->blockshape, bsize, src, dst);
  default:
    if (b2_filter_is_decode_noop(fid)) {
      if (dst != src) memcpy(dst, src, bsize);
      return 0;
    }
    return b2_fail(B2_E_UNSUPPORTED, "unsupported filter id %d", fid);
  }
}

void b2_unshuffle_window(size_t typesize, size_t bsize, const uint8_t *src,
                         size_t lo, size_t hi, uint8_t *dst) {
  size_t nelem = bsize / typesize, body = nelem * typesize;
  size_t k = lo;
  if (typesize > 1 && nelem > 1 && lo < body) {
    /* Byte b of element e sits at b * nelem + e in the shuffled block. */
    size_t end = hi < body ? hi : body;
    size_t e = lo / typesize, b = lo % typesize;
    for (; k < end && b != 0; k++) { /* the rest of a first partial element */
      dst[k - lo] = src[b * nelem + e];
      if (++b == typesize) b = 0, e++;
    }
    size_t whole = (end - k) / typesize;
    if (whole) { /* whole elements: one stream at a time */
      uint8_t *d = dst + (k - lo);
      for (size_t j = 0; j < typesize; j++) {
        const uint8_t *s = src + j * nelem + e;
        for (size_t m = 0; m < whole; m++) d[m * typesize + j] = s[m];
      }
      k += whole * typesize;
      e += whole;
    }
    for (b = 0; k < end; k++, b++) dst[k - lo] = src[b * nelem + e];
  }
  if (k < hi) memcpy(dst + (k - lo), src + k, hi - k);
}

int b2_filter_forward(int fid, int meta, int typesize, size_t offset,
                      size_t bsize, const uint8_t *ref, const uint8_t *src,
                      uint8_t *dst, const b2_chunk_geom *geom) {
  int rc = 0;
  switch (fid) {
  case B2_FILTER_SHUFFLE:
    b2_shuffle(elem_size(meta, typesize), bsize, src, dst);
    break;
  case B2_FILTER_BITSHUFFLE:
    rc = b2_bitshuffle((size_t)typesize, bsize, src, dst);
    break;
  case B2_FILTER_DELTA:
    b2_delta_encode(ref, offset, bsize, (size_t)typesize, src, dst);
    break;
  case B2_FILTER_TRUNC_PREC:
    rc = b2_truncprec((int)(int8_t)meta, (size_t)typesize, bsize, src, dst);
    break;
  case B2_FILTER_BYTEDELTA:
    b2_bytedelta_encode(elem_size(meta, typesize), bsize, src, dst);
    break;
  case B2_FILTER_INT_TRUNC:
    rc = b2_inttrunc((int)(int8_t)meta, (size_t)typesize, bsize, src, dst);
    break;
  case B2_FILTER_NDCELL:
  case B2_FILTER_NDMEAN:
    rc = geom ? b2_ndcell_encode(fid == B2_FILTER_NDMEAN, meta, (size_t)typesize, geom->ndim,
                                 geom->blockshape, bsize, src, dst)
              : no_shape(fid);
    break;
  default:
    return b2_fail(B2_E_UNSUPPORTED, "filter id %d cannot be encoded", fid);
  }
  return rc < 0 ? rc : 0;
}
