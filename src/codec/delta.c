/*
 * delta.c - the Blosc "delta" filter (id 3).
 *
 * Each block is XORed with the chunk's first block (`dref`), word by word.
 * The first block itself (offset 0) is XORed with itself shifted by one
 * word: word i ^= dref word i-1, word 0 kept.  The word is the typesize
 * when it is 1, 2, 4 or 8, 8 bytes for other multiples of 8, else 1 byte.
 * Bytes after the last whole word are copied unchanged.
 *
 * XOR works byte by byte, so apart from the one-word shift the word size
 * only decides how many bytes take part; the loops run 8 bytes at a time.
 */
#include "b2_codec.h"

#include <string.h>

static size_t word_size(size_t typesize) {
  if (typesize == 1 || typesize == 2 || typesize == 4 || typesize == 8)
    return typesize;
  return typesize != 0 && typesize % 8 == 0 ? 8 : 1;
}

/* d[i] = a[i] ^ b[i] for n bytes; d may be a, not b. */
static void xor_bytes(uint8_t *d, const uint8_t *a, const uint8_t *b,
                      size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    x ^= y;
    memcpy(d + i, &x, 8);
  }
  for (; i < n; i++) d[i] = a[i] ^ b[i];
}

void b2_delta_encode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, const uint8_t *src, uint8_t *dst) {
  size_t w = word_size(typesize), body = nbytes / w * w;
  if (body == 0) {
    memcpy(dst, src, nbytes);
    return;
  }
  if (offset == 0) {
    memcpy(dst, dref, w);
    xor_bytes(dst + w, src + w, dref, body - w);
  } else {
    xor_bytes(dst, src, dref, body);
  }
  memcpy(dst + body, src + body, nbytes - body);
}

/* buf[i] ^= buf[i-1] over n words of type T: a running XOR. */
#define RUNNING_XOR(T, buf, n)                                              \
  do {                                                                      \
    T prev_, x_;                                                            \
    memcpy(&prev_, (buf), sizeof(T));                                       \
    for (size_t i_ = 1; i_ < (n); i_++) {                                   \
      memcpy(&x_, (buf) + i_ * sizeof(T), sizeof(T));                       \
      prev_ ^= x_;                                                          \
      memcpy((buf) + i_ * sizeof(T), &prev_, sizeof(T));                    \
    }                                                                       \
  } while (0)

void b2_delta_decode(const uint8_t *dref, size_t offset, size_t nbytes,
                     size_t typesize, uint8_t *buf) {
  size_t w = word_size(typesize), n = nbytes / w;
  if (n == 0) return;
  if (offset != 0) {
    xor_bytes(buf, buf, dref, n * w);
  } else if (dref != buf) {
    xor_bytes(buf + w, buf + w, dref, (n - 1) * w);
  } else {
    /* The reference block decodes against itself: word i needs the
     * already decoded word i-1. */
    switch (w) {
    case 8: RUNNING_XOR(uint64_t, buf, n); break;
    case 4: RUNNING_XOR(uint32_t, buf, n); break;
    case 2: RUNNING_XOR(uint16_t, buf, n); break;
    default: RUNNING_XOR(uint8_t, buf, n); break;
    }
  }
}
