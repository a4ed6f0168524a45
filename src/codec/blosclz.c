/*
 * blosclz.c - decoder for the blosclz stream format (an LZ77 byte format
 * of the FastLZ family used by the Blosc project).
 *
 * A stream is a sequence of tokens, each starting with a control byte c:
 *   c < 32     a literal run: the next c+1 bytes are copied to the output.
 *              (The first control byte only counts by its low 5 bits; its
 *              top bits carry a marker and the first token is a literal.)
 *   c >= 32    a match: n = c >> 5 (1..7), h = c & 31.
 *              n == 7 adds extension bytes e1..ek (each 255 but the last):
 *              length = n + 2 + sum(e).  Then a byte lo follows:
 *              distance = h*256 + lo + 1, except h == 31 && lo == 255,
 *              where two more bytes give a big-endian value v and
 *              distance = v + 8192.  The match copies `length` bytes from
 *              `distance` bytes back in the output (overlap allowed).
 * Every read of the source and every write of the destination is bounds
 * checked; the stream must produce exactly the expected number of bytes.
 */
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <string.h>

#define NEAR_LIMIT 8191 /* h == 31 && lo == 255 escapes to a far distance */

static int damaged(const char *what, size_t pos) {
  return b2_fail(B2_E_CODEC, "blosclz stream damaged at byte %zu: %s", pos,
                 what);
}

/* Copy `len` bytes from `op - dist` to `op`; the ranges may overlap.
 * `room` is the number of writable bytes from op (>= len).  The bulk is
 * copied 16 or 8 bytes at a time, over-writing past the match end while
 * there is room; the last bytes go one by one. */
static inline void copy_match(uint8_t *op, size_t dist, size_t len,
                              size_t room) {
  const uint8_t *ref = op - dist;
  if (dist == 1) {
    memset(op, *ref, len);
    return;
  }
  size_t i = 0;
  size_t bulk = room >= len + 16 ? len : (len > 16 ? len - 16 : 0);
  if (dist >= 16) {
    /* Each 16-byte step reads bytes that are already final. */
    for (; i < bulk; i += 16) memcpy(op + i, ref + i, 16);
  } else if (dist >= 8) {
    /* Likewise 8 bytes at a time (periods of 8 are common in float64
     * data). */
    for (; i < bulk; i += 8) memcpy(op + i, ref + i, 8);
  } else if (bulk) {
    /* A short period: the output repeats with any multiple of dist, so
     * lay down the first span byte by byte, then copy 8 bytes at a time
     * from span bytes back, span being the first multiple of dist >= 8. */
    size_t span = dist * ((8 + dist - 1) / dist);
    for (; i < span && i < bulk; i++) op[i] = ref[i];
    for (; i < bulk; i += 8) memcpy(op + i, op + i - span, 8);
  }
  for (; i < len; i++) op[i] = ref[i];
}

int b2_blosclz_decompress(const uint8_t *src, size_t srclen, uint8_t *dst,
                          size_t dstlen, size_t want) {
  const uint8_t *ip = src;
  const uint8_t *const ie = src + srclen;
  uint8_t *op = dst;
  uint8_t *const oe = dst + dstlen;

  if (srclen == 0) {
    if (dstlen == 0) return 0;
    return b2_fail(B2_E_CODEC, "blosclz stream is empty");
  }
  unsigned ctrl = *ip++ & 31u;
  for (;;) {
    if (ctrl < 32) {
      size_t n = (size_t)ctrl + 1;
      if ((size_t)(ie - ip) < n) return damaged("literal run truncated", (size_t)(ip - src));
      if ((size_t)(oe - op) < n) return damaged("literal run overflows output", (size_t)(ip - src));
      if ((size_t)(ie - ip) >= 32 && (size_t)(oe - op) >= 32) {
        memcpy(op, ip, 16);
        memcpy(op + 16, ip + 16, 16);
      } else {
        memcpy(op, ip, n);
      }
      op += n;
      ip += n;
    } else {
      size_t len = (ctrl >> 5) + 2;
      if ((ctrl >> 5) == 7) {
        unsigned e;
        do {
          if (ip >= ie) return damaged("match length truncated", (size_t)(ip - src));
          e = *ip++;
          len += e;
        } while (e == 255);
      }
      if (ip >= ie) return damaged("match distance truncated", (size_t)(ip - src));
      unsigned hi = ctrl & 31u, lo = *ip++;
      size_t dist;
      if (hi == 31 && lo == 255) {
        if (ie - ip < 2) return damaged("far distance truncated", (size_t)(ip - src));
        dist = ((size_t)ip[0] << 8 | ip[1]) + NEAR_LIMIT + 1;
        ip += 2;
      } else {
        dist = ((size_t)hi << 8) + lo + 1;
      }
      if (dist > (size_t)(op - dst)) return damaged("match reaches before the output", (size_t)(ip - src));
      size_t room = (size_t)(oe - op);
      if (room < len) return damaged("match overflows output", (size_t)(ip - src));
      copy_match(op, dist, len, room);
      op += len;
    }
    if (want < dstlen && (size_t)(op - dst) >= want) return (int)(op - dst);
    if (ip >= ie) break;
    ctrl = *ip++;
  }
  if (op != oe)
    return b2_fail(B2_E_CODEC,
                   "blosclz stream decodes to %zu bytes, expected %zu",
                   (size_t)(op - dst), dstlen);
  return (int)dstlen;
}
