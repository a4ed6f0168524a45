/*
 * bytedelta.c - the "bytedelta" filter (registered id 35).
 *
 * The block is seen as `typesize` consecutive streams of nbytes / typesize
 * bytes (normally the byte planes a shuffle just produced).  Each stream
 * is replaced by its byte differences: out[0] = in[0], out[k] = in[k] -
 * in[k-1] (mod 256), each stream starting afresh.  Decoding is the running
 * sum (done 16 bytes at a time with SSE2 where available).  The
 * nbytes % typesize trailing bytes are copied unchanged.
 */
#include "b2_codec.h"

#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

void b2_bytedelta_encode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst) {
  if (typesize == 0) typesize = 1;
  size_t len = nbytes / typesize, body = len * typesize;
  for (size_t s = 0; s < typesize && len > 0; s++) {
    const uint8_t *in = src + s * len;
    uint8_t *out = dst + s * len;
    out[0] = in[0];
    for (size_t k = 1; k < len; k++) out[k] = (uint8_t)(in[k] - in[k - 1]);
  }
  memcpy(dst + body, src + body, nbytes - body);
}

/* Running sum of one stream, starting from 0. */
static void prefix_sum(const uint8_t *in, uint8_t *out, size_t len) {
  size_t k = 0;
  uint8_t acc = 0;
#if defined(__SSE2__)
  __m128i carry = _mm_setzero_si128(); /* previous sum in every byte */
  for (; k + 16 <= len; k += 16) {
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(in + k));
    x = _mm_add_epi8(x, _mm_slli_si128(x, 1));
    x = _mm_add_epi8(x, _mm_slli_si128(x, 2));
    x = _mm_add_epi8(x, _mm_slli_si128(x, 4));
    x = _mm_add_epi8(x, _mm_slli_si128(x, 8));
    x = _mm_add_epi8(x, carry);
    _mm_storeu_si128((__m128i *)(void *)(out + k), x);
    /* Broadcast byte 15. */
    __m128i hi = _mm_unpackhi_epi8(x, x);
    carry = _mm_shuffle_epi32(_mm_shufflehi_epi16(hi, 0xFF), 0xFF);
  }
  if (k) acc = out[k - 1];
#endif
  for (; k < len; k++) {
    acc = (uint8_t)(acc + in[k]);
    out[k] = acc;
  }
}

void b2_bytedelta_decode(size_t typesize, size_t nbytes, const uint8_t *src,
                         uint8_t *dst) {
  if (typesize == 0) typesize = 1;
  size_t len = nbytes / typesize, body = len * typesize;
  for (size_t s = 0; s < typesize; s++) prefix_sum(src + s * len, dst + s * len, len);
  memcpy(dst + body, src + body, nbytes - body);
}
