/*
 * shuffle.c - byte shuffle and unshuffle: the public entry points and the
 * portable implementation.
 *
 * Shuffle splits a block of n = nbytes / typesize elements into typesize
 * byte planes: output byte j*n + i is byte j of element i.  The
 * nbytes % typesize trailing bytes are copied unchanged.  The SIMD
 * versions (shuffle_sse2.c, shuffle_avx2.c) give identical output.
 */
#include "b2_codec.h"
#include "codec/codec_internal.h"

#include <string.h>

void b2_shuffle_generic_tail(size_t typesize, size_t first, size_t nelem,
                             const uint8_t *src, uint8_t *dst) {
  for (size_t j = 0; j < typesize; j++) {
    uint8_t *d = dst + j * nelem;
    const uint8_t *s = src + j;
    for (size_t i = first; i < nelem; i++) d[i] = s[i * typesize];
  }
}

void b2_unshuffle_generic_tail(size_t typesize, size_t first, size_t nelem,
                               const uint8_t *src, uint8_t *dst) {
  for (size_t j = 0; j < typesize; j++) {
    const uint8_t *s = src + j * nelem;
    uint8_t *d = dst + j;
    for (size_t i = first; i < nelem; i++) d[i * typesize] = s[i];
  }
}

void b2_shuffle_generic(size_t typesize, size_t nbytes, const uint8_t *src,
                        uint8_t *dst) {
  size_t nelem = nbytes / typesize, body = nelem * typesize;
  b2_shuffle_generic_tail(typesize, 0, nelem, src, dst);
  memcpy(dst + body, src + body, nbytes - body);
}

void b2_unshuffle_generic(size_t typesize, size_t nbytes, const uint8_t *src,
                          uint8_t *dst) {
  size_t nelem = nbytes / typesize, body = nelem * typesize;
  b2_unshuffle_generic_tail(typesize, 0, nelem, src, dst);
  memcpy(dst + body, src + body, nbytes - body);
}

void b2_shuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                uint8_t *dst) {
  if (typesize <= 1 || nbytes < 2 * typesize) {
    if (nbytes) memcpy(dst, src, nbytes);
    return;
  }
  b2_simd()->shuffle(typesize, nbytes, src, dst);
}

void b2_unshuffle(size_t typesize, size_t nbytes, const uint8_t *src,
                  uint8_t *dst) {
  if (typesize <= 1 || nbytes < 2 * typesize) {
    if (nbytes) memcpy(dst, src, nbytes);
    return;
  }
  b2_simd()->unshuffle(typesize, nbytes, src, dst);
}
