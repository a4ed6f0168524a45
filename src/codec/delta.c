/*
 * delta.c - the Blosc "delta" filter (id 3).
 *
 * Each block is XORed with the chunk's first block (`dref`), word by word.
 * The first block itself (offset 0) is XORed with itself shifted by one
 * word: word i ^= dref word i-1, word 0 kept.  The word is the typesize
 * when it is 1, 2, 4 or 8, 8 bytes for other multiples of 8, else 1 byte.
 * Bytes after the last whole word are copied unchanged.
 */
#include "b2_codec.h"

#include <string.h>

static size_t word_size(size_t typesize) {
  if (typesize == 1 || typesize == 2 || typesize == 4 || typesize == 8)
    return typesize;
  return typesize % 8 == 0 ? 8 : 1;
}

/* XOR of w-byte words (memcpy keeps unaligned access defined). */
#define XOR_WORDS(T, d, a, b, n)                                           \
  for (size_t i_ = 0; i_ < (n); i_++) {                                    \
    T x_, y_;                                                              \
    memcpy(&x_, (a) + i_ * sizeof(T), sizeof(T));                          \
    memcpy(&y_, (b) + i_ * sizeof(T), sizeof(T));                          \
    x_ ^= y_;                                                              \
    memcpy((d) + i_ * sizeof(T), &x_, sizeof(T));                          \
  }

/* d[i] = a[i] ^ b[i] for n words of size w. */
static void xor_words(size_t w, uint8_t *d, const uint8_t *a,
                      const uint8_t *b, size_t n) {
  switch (w) {
  case 8: XOR_WORDS(uint64_t, d, a, b, n) break;
  case 4: XOR_WORDS(uint32_t, d, a, b, n) break;
  case 2: XOR_WORDS(uint16_t, d, a, b, n) break;
  default: XOR_WORDS(uint8_t, d, a, b, n) break;
  }
}

void b2_delta_encode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, const uint8_t *src, uint8_t *dst) {
  size_t w = word_size(typesize), n = nbytes / w, body = n * w;
  if (n == 0) {
    memcpy(dst, src, nbytes);
    return;
  }
  if (offset == 0) {
    memcpy(dst, dref, w);
    xor_words(w, dst + w, src + w, dref, n - 1);
  } else {
    xor_words(w, dst, src, dref, n);
  }
  memcpy(dst + body, src + body, nbytes - body);
}

void b2_delta_decode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, uint8_t *buf) {
  size_t w = word_size(typesize), n = nbytes / w;
  if (n == 0) return;
  if (offset == 0) {
    /* Word i depends on the already decoded word i-1: go in order.  Here
     * dref is normally buf itself. */
    for (size_t i = 1; i < n; i++)
      xor_words(w, buf + i * w, buf + i * w, dref + (i - 1) * w, 1);
  } else {
    xor_words(w, buf, buf, dref, n);
  }
}
