/* sframe_pack.h - one fuzz input holding a whole sparse frame directory.
 *
 * The input is a sequence of parts, each a 4-byte little-endian length then
 * that many bytes (a length past the end takes what is left).  Part 0 is
 * chunks.b2frame, part k >= 1 the chunk file %08X of number k - 1.  The
 * length 0xFFFFFFFF stands for a file that does not exist.  Shared by the
 * seed writer (seeds.c) and the target (fuzz_sframe.c). */
#ifndef B2_SFRAME_PACK_H
#define B2_SFRAME_PACK_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define B2_SFRAME_PACK_MAXCHUNKS 16
#define B2_SFRAME_PACK_MISSING 0xFFFFFFFFu

/* Append a part (data NULL: a missing file) to buf at n; returns the new
 * length, or 0 when it does not fit. */
static inline size_t b2_sframe_pack_part(uint8_t *buf, size_t cap, size_t n,
                                         const void *data, size_t len) {
  uint32_t l = data ? (uint32_t)len : B2_SFRAME_PACK_MISSING;
  if (n + 4 + (data ? len : 0) > cap) return 0;
  for (int i = 0; i < 4; i++) buf[n + (size_t)i] = (uint8_t)(l >> (8 * i));
  if (data && len) memcpy(buf + n + 4, data, len);
  return n + 4 + (data ? len : 0);
}

/* Take the next part at *pos: 1 with *data and *len set (*data NULL for a
 * missing file), 0 at the end of the input. */
static inline int b2_sframe_unpack_part(const uint8_t *in, size_t size,
                                        size_t *pos, const uint8_t **data,
                                        size_t *len) {
  if (*pos + 4 > size) return 0;
  uint32_t l = 0;
  for (int i = 0; i < 4; i++) l |= (uint32_t)in[*pos + (size_t)i] << (8 * i);
  *pos += 4;
  if (l == B2_SFRAME_PACK_MISSING) {
    *data = NULL;
    *len = 0;
    return 1;
  }
  size_t left = size - *pos;
  *len = l < left ? l : left;
  *data = in + *pos;
  *pos += *len;
  return 1;
}
#endif
