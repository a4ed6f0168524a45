/*
 * zfp.c - the ZFP codecs python-blosc2 offers (ids 33-35), through libzfp.
 *
 * Each block of an array is one ZFP stream without a header: the field it
 * encodes is the array's block (its b2nd block shape, fastest dimension
 * last, 1 to 4 dimensions) of floats (typesize 4) or doubles (8), and the
 * mode comes from the chunk's codec and its meta byte:
 *   zfp_acc   fixed accuracy, tolerance 10^meta (meta a signed byte);
 *   zfp_prec  fixed precision, meta + 3 + 2 * ndim bits (at most 64);
 *   zfp_rate  fixed rate, meta / 100 of the item's bits per value.
 * Built without libzfp (no B2_HAVE_ZFP) these say so and fail.
 *
 * libzfp reads its stream word by word without bounds: a stream is decoded
 * from a copy padded with zeros to the most any stream of that field and
 * mode can take, so a damaged or short one cannot make it read past the
 * copy.
 */
#include "b2_codec.h"
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <stdlib.h>
#include <string.h>

int b2_codec_is_zfp(int codec) {
  return codec == B2_CODEC_ZFP_ACC || codec == B2_CODEC_ZFP_PREC || codec == B2_CODEC_ZFP_RATE;
}

/* Items of a block of `shape` that fill exactly `nbytes` of `typesize`-byte
 * items, or a negative code naming the mismatch. */
static int check_block(int codec, int typesize, int ndim, const int32_t *shape, size_t nbytes) {
  const char *name = b2_codec_name(codec);
  if (typesize != 4 && typesize != 8)
    return b2_fail(B2_E_UNSUPPORTED, "%s: typesize %d is not 4 or 8", name, typesize);
  if (ndim < 1 || ndim > B2_ZFP_MAXDIM)
    return b2_fail(B2_E_UNSUPPORTED, "%s: %d dimensions, not 1 to %d", name, ndim,
                   B2_ZFP_MAXDIM);
  int64_t items;
  if (b2_block_items(ndim, shape, (size_t)typesize, nbytes, &items) < 0)
    return b2_fail(B2_E_FORMAT, "%s: block shape does not fit the block's %zu bytes", name,
                   nbytes);
  if ((uint64_t)items * (uint64_t)typesize != nbytes)
    return b2_fail(B2_E_FORMAT, "%s: block shape holds %llu bytes, the block %zu", name,
                   (unsigned long long)items * (unsigned long long)typesize, nbytes);
  return 0;
}

/* A side of the block (check_block has found them positive) narrower than
 * ZFP's cells, which the reference refuses to encode, or 0 when none is. */
static int32_t narrow_side(int ndim, const int32_t *shape) {
  for (int d = 0; d < ndim; d++)
    if (shape[d] < B2_ZFP_MIN_SIDE) return shape[d];
  return 0;
}

static int missing(int codec) {
  return b2_fail(B2_E_UNSUPPORTED, "%s: b2fs was built without libzfp", b2_codec_name(codec));
}

int b2_zfp_check(int codec, int typesize, int ndim, const int32_t *shape, size_t nbytes) {
  if (!b2_zfp_available()) return missing(codec);
  int rc = check_block(codec, typesize, ndim, shape, nbytes);
  if (rc < 0) return rc;
  int32_t narrow = narrow_side(ndim, shape);
  if (narrow)
    return b2_fail(B2_E_INVAL, "%s: blocks need at least %d items along each dimension, "
                   "not %d", b2_codec_name(codec), B2_ZFP_MIN_SIDE, narrow);
  return 0;
}

#ifdef B2_HAVE_ZFP
#include <math.h>
#include <zfp.h>

static int no_memory(int codec) {
  return b2_fail(B2_E_NOMEM, "%s: out of memory", b2_codec_name(codec));
}

/* Let go of a stream and a field (either may be NULL). */
static void release(zfp_stream *s, zfp_field *f) {
  if (f) zfp_field_free(f);
  if (s) zfp_stream_close(s);
}

/* A stream and a field for one block, in the mode of codec/meta. */
static int setup(int codec, int meta, int typesize, int ndim, const int32_t *shape, void *data,
                 zfp_stream **zs, zfp_field **zf) {
  zfp_type type = typesize == 4 ? zfp_type_float : zfp_type_double;
  zfp_field *f = NULL;
  switch (ndim) { /* zfp counts its dimensions fastest first */
  case 1: f = zfp_field_1d(data, type, (size_t)shape[0]); break;
  case 2: f = zfp_field_2d(data, type, (size_t)shape[1], (size_t)shape[0]); break;
  case 3: f = zfp_field_3d(data, type, (size_t)shape[2], (size_t)shape[1], (size_t)shape[0]); break;
  default:
    f = zfp_field_4d(data, type, (size_t)shape[3], (size_t)shape[2], (size_t)shape[1],
                     (size_t)shape[0]);
  }
  zfp_stream *s = zfp_stream_open(NULL);
  if (!f || !s) {
    release(s, f);
    return no_memory(codec);
  }
  if (codec == B2_CODEC_ZFP_ACC) {
    zfp_stream_set_accuracy(s, pow(10.0, (double)(int8_t)meta));
  } else if (codec == B2_CODEC_ZFP_PREC) {
    unsigned prec = (unsigned)meta + 3u + 2u * (unsigned)ndim;
    zfp_stream_set_precision(s, prec > ZFP_MAX_PREC ? ZFP_MAX_PREC : prec);
  } else {
    double rate = (double)meta / 100.0 * typesize * 8;
    zfp_stream_set_rate(s, rate, type, (unsigned)ndim, zfp_false);
  }
  *zs = s;
  *zf = f;
  return 0;
}

int b2_zfp_available(void) { return 1; }

int b2_zfp_decompress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                      const void *src, size_t srclen, void *dst, size_t dstlen) {
  int rc = check_block(codec, typesize, ndim, shape, dstlen);
  if (rc < 0) return rc;
  zfp_stream *s;
  zfp_field *f;
  rc = setup(codec, meta, typesize, ndim, shape, dst, &s, &f);
  if (rc < 0) return rc;
  size_t most = zfp_stream_maximum_size(s, f);
  size_t cap = (most > srclen ? most : srclen) + 64;
  uint8_t *copy = calloc(1, cap);
  bitstream *bs = copy ? stream_open(copy, cap) : NULL;
  if (!bs) {
    free(copy);
    release(s, f);
    return no_memory(codec);
  }
  memcpy(copy, src, srclen);
  zfp_stream_set_bit_stream(s, bs);
  zfp_stream_rewind(s);
  size_t used = zfp_decompress(s, f);
  stream_close(bs);
  release(s, f);
  free(copy);
  if (used == 0 || used > srclen + 8)
    return b2_fail(B2_E_CODEC, "%s stream damaged (%zu bytes, %zu read)", b2_codec_name(codec),
                   srclen, used);
  return (int)dstlen;
}

int b2_zfp_compress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                    const void *src, size_t srclen, void *dst, size_t dstcap) {
  /* Not a whole block (split streams), or a block the reference refuses
   * (a side under 4): stored raw. */
  if (check_block(codec, typesize, ndim, shape, srclen) < 0 || narrow_side(ndim, shape))
    return 0;
  zfp_stream *s;
  zfp_field *f;
  int rc = setup(codec, meta, typesize, ndim, shape, (void *)src, &s, &f);
  if (rc < 0) return rc;
  size_t most = zfp_stream_maximum_size(s, f);
  uint8_t *out = malloc(most);
  bitstream *bs = out ? stream_open(out, most) : NULL;
  if (!bs) {
    free(out);
    release(s, f);
    return no_memory(codec);
  }
  zfp_stream_set_bit_stream(s, bs);
  zfp_stream_rewind(s);
  size_t n = zfp_compress(s, f);
  stream_close(bs);
  release(s, f);
  rc = 0;
  if (n > 0 && n < srclen && n <= dstcap) {
    memcpy(dst, out, n);
    rc = (int)n;
  }
  free(out);
  return rc;
}

#else /* no libzfp */

int b2_zfp_available(void) { return 0; }

int b2_zfp_decompress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                      const void *src, size_t srclen, void *dst, size_t dstlen) {
  (void)meta, (void)src, (void)srclen, (void)dst;
  int rc = check_block(codec, typesize, ndim, shape, dstlen);
  return rc < 0 ? rc : missing(codec);
}

int b2_zfp_compress(int codec, int meta, int typesize, int ndim, const int32_t *shape,
                    const void *src, size_t srclen, void *dst, size_t dstcap) {
  (void)meta, (void)typesize, (void)ndim, (void)shape, (void)src, (void)srclen, (void)dst,
      (void)dstcap;
  return missing(codec);
}
#endif
