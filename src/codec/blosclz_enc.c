/*
 * blosclz_enc.c - our encoder for the blosclz stream format (the format is
 * described in blosclz.c).
 *
 * A greedy LZ77 parse with one hash table of 4-byte sequences.  The stream
 * always starts and ends with a literal run, as the reference decoder
 * requires.  Higher levels use a bigger table, accept shorter matches and
 * search more patiently; low levels skip faster over data that does not
 * match.  Gives up (returns 0) when the output
 * would not fit, or early when the first part of the input barely
 * compresses.
 */
#include "codec/codec_internal.h"

#include <string.h>

#define MAX_LIT 32           /* bytes per literal run token */
#define NEAR_MAX 8191        /* distances 1..8191 fit in 13 bits */
#define FAR_MAX (8192 + 65535)
#define HASH_LOG_MAX 14 /* a 64 KiB table on the stack */

static inline uint32_t rd32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static inline uint64_t rd64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

static inline uint32_t hash4(uint32_t v, unsigned hlog) {
  return (v * 2654435761u) >> (32 - hlog);
}

/* Length of the common prefix of a and b, not reading at or past `end`
 * through a (b is behind a). */
static inline size_t common_len(const uint8_t *a, const uint8_t *b,
                                const uint8_t *end) {
  const uint8_t *start = a;
  while (a + 8 <= end) {
    uint64_t x = rd64(a) ^ rd64(b);
    if (x) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
      return (size_t)(a - start) + ((unsigned)__builtin_ctzll(x) >> 3);
#else
      while (*a == *b) a++, b++;
      return (size_t)(a - start);
#endif
    }
    a += 8;
    b += 8;
  }
  while (a < end && *a == *b) a++, b++;
  return (size_t)(a - start);
}

/* Output bytes a literal run of n bytes takes. */
static inline size_t lit_cost(size_t n) { return n + (n + MAX_LIT - 1) / MAX_LIT; }

static uint8_t *put_literals(uint8_t *op, const uint8_t *lit, size_t n) {
  while (n > 0) {
    size_t k = n < MAX_LIT ? n : MAX_LIT;
    *op++ = (uint8_t)(k - 1);
    memcpy(op, lit, k);
    op += k;
    lit += k;
    n -= k;
  }
  return op;
}

/* Emit a match of len >= 3 bytes at distance 1..FAR_MAX. */
static uint8_t *put_match(uint8_t *op, size_t len, size_t dist) {
  size_t n = len - 2; /* 1..6 inline, 7 means extension bytes follow */
  size_t d = dist - 1;
  unsigned hi = d < NEAR_MAX ? (unsigned)(d >> 8) : 31u;
  if (n < 7) {
    *op++ = (uint8_t)((n << 5) | hi);
  } else {
    *op++ = (uint8_t)((7u << 5) | hi);
    for (n -= 7; n >= 255; n -= 255) *op++ = 255;
    *op++ = (uint8_t)n;
  }
  if (d < NEAR_MAX) {
    *op++ = (uint8_t)(d & 255);
  } else {
    size_t v = dist - (NEAR_MAX + 1);
    *op++ = 255;
    *op++ = (uint8_t)(v >> 8);
    *op++ = (uint8_t)(v & 255);
  }
  return op;
}

struct level {
  unsigned hlog;     /* hash table size */
  unsigned min_near; /* shortest match worth coding, distance <= 8191 */
  unsigned min_far;  /* ... beyond */
  unsigned skip;     /* step grows by 1 every 2^skip bytes without a match */
};

/* Tuned on text, binaries and shuffled numeric data: shorter minimum
 * matches gain little ratio and cost decoding speed; indexing positions
 * inside matches made greedy parsing worse on periodic data. */
static const struct level levels[10] = {
    {12, 6, 9, 3}, {12, 6, 9, 3}, {13, 5, 9, 4}, {14, 5, 8, 4}, {14, 5, 8, 5},
    {14, 5, 8, 5}, {14, 5, 8, 6}, {14, 5, 8, 6}, {14, 5, 8, 7}, {14, 4, 7, 8},
};

int b2_blosclz_compress(int clevel, const uint8_t *src, size_t srclen,
                        uint8_t *dst, size_t dstcap) {
  if (clevel < 1) return 0;
  if (clevel > 9) clevel = 9;
  const struct level *lv = &levels[clevel];
  if (srclen < 16 || dstcap < 4) return 0;
  if (srclen > UINT32_MAX) return 0;

  uint32_t htab[1u << HASH_LOG_MAX];
  const unsigned hlog = lv->hlog;
  memset(htab, 0, sizeof(uint32_t) << hlog);

  const uint8_t *const end = src + srclen;
  const uint8_t *const ip_limit = end - 12; /* no match starts past here */
  const uint8_t *const mend = end - 4;      /* matches end before here */
  const uint8_t *ip = src + 1;              /* byte 0 is always a literal */
  const uint8_t *lit = src;
  uint8_t *op = dst;
  uint8_t *const oe = dst + dstcap;
  const uint8_t *probe = srclen >= 8192 ? src + srclen / 4 : end;

  while (ip < ip_limit) {
    uint32_t seq = rd32(ip);
    uint32_t h = hash4(seq, hlog);
    const uint8_t *ref = src + htab[h];
    htab[h] = (uint32_t)(ip - src);
    size_t dist = (size_t)(ip - ref);
    if (dist == 0 || dist > FAR_MAX || rd32(ref) != seq) {
      ip += 1 + ((size_t)(ip - lit) >> lv->skip);
      continue;
    }
    size_t len = 4 + common_len(ip + 4, ref + 4, mend);
    /* Grow the match backwards over pending literals (never over byte 0). */
    while (ip > lit && ip > src + 1 && ref > src && ip[-1] == ref[-1]) {
      ip--;
      ref--;
      len++;
    }
    if (len < (dist <= NEAR_MAX ? lv->min_near : lv->min_far)) {
      ip++;
      continue;
    }
    size_t nlit = (size_t)(ip - lit);
    size_t need = lit_cost(nlit) + 5 + len / 255;
    if ((size_t)(oe - op) < need) return 0;
    op = put_literals(op, lit, nlit);
    op = put_match(op, len, dist);
    ip += len;
    lit = ip;
    /* Index the match's last two positions. */
    if (ip < ip_limit) {
      htab[hash4(rd32(ip - 2), hlog)] = (uint32_t)(ip - 2 - src);
      htab[hash4(rd32(ip - 1), hlog)] = (uint32_t)(ip - 1 - src);
    }
    if (ip >= probe) {
      /* The first quarter barely compressing predicts the rest; give up
       * and let the caller store the block raw. */
      if ((size_t)(op - dst) * 64 > (size_t)(ip - src) * 63 && clevel < 9)
        return 0;
      probe = end;
    }
  }
  size_t nlit = (size_t)(end - lit);
  if ((size_t)(oe - op) < lit_cost(nlit)) return 0;
  op = put_literals(op, lit, nlit);
  dst[0] |= 1u << 5; /* format marker the reference writes */
  return (int)(op - dst);
}
