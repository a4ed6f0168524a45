/*
 * check.c - whether a codec or filter, with its meta byte, can encode the
 * blocks of a new frame: the item size, and for arrays the block shape.
 * Asked once when a frame's parameters are chosen, so that a pipeline the
 * encoder (or the reference library) would refuse is refused up front,
 * naming why, instead of failing at the first chunk written.
 */
#include "b2_codec.h"
#include "b2_error.h"

static int arrays_only(const char *name) {
  return b2_fail(B2_E_INVAL, "%s works on the blocks of arrays only (a .npy file in the mount, "
                 "b2f pack of a .npy file)", name);
}

int b2_codec_check(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                   size_t nbytes) {
  const char *name = b2_codec_name(codec);
  switch (codec) {
  case B2_CODEC_BLOSCLZ:
  case B2_CODEC_LZ4:
  case B2_CODEC_LZ4HC:
  case B2_CODEC_ZLIB:
  case B2_CODEC_ZSTD: return 0;
  case B2_CODEC_NDLZ:
    if (ndim < 1) return arrays_only(name);
    if (ndim != 2 || typesize != 1)
      return b2_fail(B2_E_INVAL, "ndlz: 2-D arrays of 1-byte items only (not %d-D of %d bytes)",
                     ndim, typesize);
    if (meta != 4 && meta != 8)
      return b2_fail(B2_E_INVAL, "ndlz: cells of 4 or 8 (ndlz:4, ndlz:8), not %d", meta);
    return 0;
  case B2_CODEC_ZFP_ACC:
  case B2_CODEC_ZFP_PREC:
  case B2_CODEC_ZFP_RATE:
    if (ndim < 1) return arrays_only(name);
    return b2_zfp_check(codec, typesize, ndim, shape, nbytes);
  default: return b2_fail(B2_E_UNSUPPORTED, "codec %d cannot be encoded", codec);
  }
}

int b2_filter_moves_bytes(int filter) {
  return filter == B2_FILTER_SHUFFLE || filter == B2_FILTER_BITSHUFFLE ||
         filter == B2_FILTER_DELTA || filter == B2_FILTER_BYTEDELTA;
}

int b2_filter_check(int filter, int meta, int typesize, int ndim, const int32_t *shape,
                    size_t nbytes) {
  uint8_t none[1] = {0}; /* the truncating filters' checks, on no items */
  switch (filter) {
  case B2_FILTER_NONE:
  case B2_FILTER_SHUFFLE:
  case B2_FILTER_BITSHUFFLE:
  case B2_FILTER_DELTA:
  case B2_FILTER_BYTEDELTA: return 0;
  case B2_FILTER_TRUNC_PREC: return b2_truncprec((int8_t)meta, (size_t)typesize, 0, none, none);
  case B2_FILTER_INT_TRUNC: return b2_inttrunc((int8_t)meta, (size_t)typesize, 0, none, none);
  case B2_FILTER_NDCELL:
  case B2_FILTER_NDMEAN:
    if (ndim < 1) return arrays_only(b2_filter_name(filter));
    return b2_ndcell_check(filter == B2_FILTER_NDMEAN, meta, (size_t)typesize, ndim, shape,
                           nbytes);
  default: return b2_fail(B2_E_UNSUPPORTED, "filter %d cannot be encoded", filter);
  }
}
