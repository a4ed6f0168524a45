/*
 * bitshuffle.c - bit shuffle and unshuffle: the public entry points and the
 * portable implementation.
 *
 * Over the first n elements, n = (nbytes / typesize) rounded down to a
 * multiple of 8, the output is typesize*8 bit planes of n bits (n/8 bytes)
 * each: plane 8*j + k holds bit k of byte j of every element, element i at
 * bit i%8 of the plane's byte i/8.  The remaining bytes (elements that do
 * not fill a group of 8 and the partial element at the end) are copied
 * unchanged, as the reference library does for chunk formats >= 3.
 */
#include "b2_codec.h"
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <string.h>

int b2_bitshuffle_generic(size_t typesize, size_t nelem, const uint8_t *src,
                          uint8_t *dst) {
  size_t nb = nelem / 8;
  for (size_t j = 0; j < typesize; j++) {
    uint8_t *planes = dst + j * 8 * nb;
    for (size_t g = 0; g < nb; g++) {
      const uint8_t *s = src + 8 * g * typesize + j;
      uint64_t x = 0;
      for (unsigned m = 0; m < 8; m++) x |= (uint64_t)s[m * typesize] << (8 * m);
      x = b2_transpose8x8(x);
      for (unsigned k = 0; k < 8; k++) planes[k * nb + g] = (uint8_t)(x >> (8 * k));
    }
  }
  return 0;
}

int b2_bitunshuffle_generic(size_t typesize, size_t nelem, const uint8_t *src,
                            uint8_t *dst) {
  size_t nb = nelem / 8;
  for (size_t j = 0; j < typesize; j++) {
    const uint8_t *planes = src + j * 8 * nb;
    for (size_t g = 0; g < nb; g++) {
      uint64_t x = 0;
      for (unsigned k = 0; k < 8; k++) x |= (uint64_t)planes[k * nb + g] << (8 * k);
      x = b2_transpose8x8(x);
      uint8_t *d = dst + 8 * g * typesize + j;
      for (unsigned m = 0; m < 8; m++) d[m * typesize] = (uint8_t)(x >> (8 * m));
    }
  }
  return 0;
}

static int run(b2_bitshuffle_fn fn, size_t typesize, size_t nbytes,
               const uint8_t *src, uint8_t *dst) {
  if (typesize == 0) return b2_fail(B2_E_INVAL, "bitshuffle: typesize 0");
  size_t nelem = nbytes / typesize;
  nelem -= nelem % 8;
  size_t body = nelem * typesize;
  if (nelem) {
    int rc = fn(typesize, nelem, src, dst);
    if (rc < 0) return rc;
  }
  if (nbytes > body) memcpy(dst + body, src + body, nbytes - body);
  return 0;
}

int b2_bitshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                  uint8_t *dst) {
  return run(b2_simd()->bitshuffle, typesize, nbytes, src, dst);
}

int b2_bitunshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                    uint8_t *dst) {
  return run(b2_simd()->bitunshuffle, typesize, nbytes, src, dst);
}

int b2_bitunshuffle_v2(size_t typesize, size_t nbytes, const uint8_t *src,
                       uint8_t *dst) {
  if (typesize == 0) return b2_fail(B2_E_INVAL, "bitshuffle: typesize 0");
  size_t nelem = nbytes / typesize, body = nelem * typesize;
  if (nelem % 8 != 0) {
    if (nbytes) memcpy(dst, src, nbytes);
    return 0;
  }
  if (nelem) {
    int rc = b2_simd()->bitunshuffle(typesize, nelem, src, dst);
    if (rc < 0) return rc;
  }
  if (nbytes > body) memset(dst + body, 0, nbytes - body);
  return 0;
}
