/*
 * crc32c_sse42.c - CRC-32C with the SSE4.2 crc32 instruction (x86_64).
 *
 * One crc32 instruction has a latency of about three cycles but a
 * throughput of one per cycle, so long buffers are cut into three lanes
 * computed side by side; the lanes' CRCs are then merged by advancing the
 * earlier ones over the bytes of the later ones.  Advancing a CRC register
 * over L zero bytes is linear over GF(2): a 4 x 256 table per lane length
 * (built once, from the instruction itself) applies it in four lookups.
 * The function is compiled for SSE4.2 through a target attribute, so the
 * rest of the build needs no special flags; b2_crc32c_sse42_ok says
 * whether the CPU has it.  Elsewhere the entry points fall back to the
 * portable code.
 */
#include "common/crc32c.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#include <nmmintrin.h>
#include <pthread.h>
#include <string.h>

#define LONG_LANE 8192 /* bytes per lane, long buffers */
#define SHORT_LANE 256 /* bytes per lane, medium buffers */

#define SSE42 __attribute__((target("sse4.2")))

/* zeros_long[k][v]: register byte k of value v advanced over LONG_LANE
 * zero bytes; likewise zeros_short. */
static uint32_t zeros_long[4][256], zeros_short[4][256];
static pthread_once_t zeros_once = PTHREAD_ONCE_INIT;

static SSE42 uint32_t advance_slow(uint32_t c, size_t n) {
  uint64_t r = c;
  for (size_t k = 0; k < n / 8; k++) r = _mm_crc32_u64(r, 0);
  return (uint32_t)r;
}

static void zeros_table(uint32_t t[4][256], size_t n) {
  uint32_t bit[32];
  for (int b = 0; b < 32; b++) bit[b] = advance_slow((uint32_t)1 << b, n);
  for (int k = 0; k < 4; k++)
    for (int v = 0; v < 256; v++) {
      uint32_t r = 0;
      for (int b = 0; b < 8; b++)
        if (v & (1 << b)) r ^= bit[8 * k + b];
      t[k][v] = r;
    }
}

static void zeros_init(void) {
  zeros_table(zeros_long, LONG_LANE);
  zeros_table(zeros_short, SHORT_LANE);
}

static inline uint32_t advance(uint32_t t[4][256], uint32_t c) {
  return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^
         t[3][c >> 24];
}

static inline uint64_t load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8); /* x86 is little-endian */
  return v;
}

/* Three lanes of `lane` bytes from p; returns the register after them. */
static SSE42 uint32_t three_lanes(uint32_t c, const uint8_t *p, size_t lane,
                                  uint32_t t[4][256]) {
  uint64_t a = c, b = 0, d = 0;
  const uint8_t *q = p + lane, *r = p + 2 * lane;
  for (size_t k = 0; k < lane; k += 8) {
    a = _mm_crc32_u64(a, load64(p + k));
    b = _mm_crc32_u64(b, load64(q + k));
    d = _mm_crc32_u64(d, load64(r + k));
  }
  uint32_t x = advance(t, (uint32_t)a) ^ (uint32_t)b;
  return advance(t, x) ^ (uint32_t)d;
}

SSE42 uint32_t b2_crc32c_sse42(uint32_t crc, const void *buf, size_t n) {
  pthread_once(&zeros_once, zeros_init);
  const uint8_t *p = buf;
  uint32_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--) c = _mm_crc32_u8(c, *p++);
  for (; n >= 3 * LONG_LANE; n -= 3 * LONG_LANE, p += 3 * LONG_LANE)
    c = three_lanes(c, p, LONG_LANE, zeros_long);
  for (; n >= 3 * SHORT_LANE; n -= 3 * SHORT_LANE, p += 3 * SHORT_LANE)
    c = three_lanes(c, p, SHORT_LANE, zeros_short);
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) c64 = _mm_crc32_u64(c64, load64(p));
  c = (uint32_t)c64;
  for (; n; n--) c = _mm_crc32_u8(c, *p++);
  return ~c;
}

int b2_crc32c_sse42_ok(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

#else /* not x86_64 */

int b2_crc32c_sse42_ok(void) { return 0; }

uint32_t b2_crc32c_sse42(uint32_t crc, const void *buf, size_t n) {
  return b2_crc32c_generic(crc, buf, n);
}

#endif
