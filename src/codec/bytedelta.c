/*
 * bytedelta.c - the "bytedelta" filter (registered id 35).
 *
 * The block is seen as `typesize` consecutive streams of nbytes / typesize
 * bytes (normally the byte planes a shuffle just produced).  Each stream
 * is replaced by its byte differences: out[0] = in[0], out[k] = in[k] -
 * in[k-1] (mod 256), each stream starting afresh.  Decoding is the running
 * sum.  The nbytes % typesize trailing bytes are copied unchanged.
 */
#include "b2_codec.h"

#include <string.h>

void b2_bytedelta_encode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst) {
  if (typesize == 0) typesize = 1;
  size_t len = nbytes / typesize, body = len * typesize;
  for (size_t s = 0; s < typesize; s++) {
    const uint8_t *in = src + s * len;
    uint8_t *out = dst + s * len;
    uint8_t prev = 0;
    for (size_t k = 0; k < len; k++) {
      uint8_t v = in[k];
      out[k] = (uint8_t)(v - prev);
      prev = v;
    }
  }
  memcpy(dst + body, src + body, nbytes - body);
}

void b2_bytedelta_decode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst) {
  if (typesize == 0) typesize = 1;
  size_t len = nbytes / typesize, body = len * typesize;
  for (size_t s = 0; s < typesize; s++) {
    const uint8_t *in = src + s * len;
    uint8_t *out = dst + s * len;
    uint8_t acc = 0;
    for (size_t k = 0; k < len; k++) {
      acc = (uint8_t)(acc + in[k]);
      out[k] = acc;
    }
  }
  memcpy(dst + body, src + body, nbytes - body);
}
