/*
 * simd_sse2.c - SSE2 shuffle, unshuffle, bitshuffle and bitunshuffle (the
 * kernels are in simd_tmpl.h; this file supplies the 16-byte operations).
 * Without SSE2 at compile time it provides no kernels.
 */
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <stddef.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>

#define V __m128i
#define VB 16
#define SFX(name) name##_sse2
#define VLOAD(p) _mm_loadu_si128((const __m128i *)(const void *)(p))
#define VSTORE(p, v) _mm_storeu_si128((__m128i *)(void *)(p), (v))
#define VSPLIT(a, b, e, o)                                                  \
  do {                                                                      \
    const __m128i lo_ = _mm_set1_epi16(0x00ff);                             \
    (e) = _mm_packus_epi16(_mm_and_si128((a), lo_), _mm_and_si128((b), lo_)); \
    (o) = _mm_packus_epi16(_mm_srli_epi16((a), 8), _mm_srli_epi16((b), 8));   \
  } while (0)
#define VFIXUP(TS, x) (x)
#define VMERGE(e, o, a, b)                                                  \
  do {                                                                      \
    (a) = _mm_unpacklo_epi8((e), (o));                                      \
    (b) = _mm_unpackhi_epi8((e), (o));                                      \
  } while (0)
#define VMOVEMASK(v) ((unsigned)_mm_movemask_epi8(v))
#define VSHL16_1(v) _mm_add_epi8((v), (v))

static inline __m128i bitt_sse2(__m128i x) {
  __m128i t;
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 7)),
                    _mm_set1_epi64x(0x00AA00AA00AA00AALL));
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 7)));
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 14)),
                    _mm_set1_epi64x(0x0000CCCC0000CCCCLL));
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 14)));
  t = _mm_and_si128(_mm_xor_si128(x, _mm_srli_epi64(x, 28)),
                    _mm_set1_epi64x(0x00000000F0F0F0F0LL));
  x = _mm_xor_si128(x, _mm_xor_si128(t, _mm_slli_epi64(t, 28)));
  return x;
}
#define VBITT(v) bitt_sse2(v)

/* 8 rows of 16 bytes -> q[k] = columns 2k and 2k+1 (8 bytes each). */
static inline void transpose8_sse2(const __m128i p[8], __m128i q[8]) {
  __m128i a[8], b[8];
  for (int k = 0; k < 4; k++) {
    a[2 * k] = _mm_unpacklo_epi8(p[2 * k], p[2 * k + 1]);
    a[2 * k + 1] = _mm_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
  }
  /* a[0]: rows 0,1 cols 0-7; a[1]: rows 0,1 cols 8-15; a[2], a[3]: rows 2,3 ... */
  for (int k = 0; k < 2; k++) {
    b[4 * k + 0] = _mm_unpacklo_epi16(a[4 * k + 0], a[4 * k + 2]);
    b[4 * k + 1] = _mm_unpackhi_epi16(a[4 * k + 0], a[4 * k + 2]);
    b[4 * k + 2] = _mm_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
  }
  /* b[0..3]: rows 0-3, cols 0-3, 4-7, 8-11, 12-15; b[4..7]: rows 4-7. */
  for (int k = 0; k < 4; k++) {
    q[2 * k] = _mm_unpacklo_epi32(b[k], b[4 + k]);
    q[2 * k + 1] = _mm_unpackhi_epi32(b[k], b[4 + k]);
  }
}
#define VTRANSPOSE8(p, q) transpose8_sse2((p), (q))
#define VSTORE_Q(out, q)                                                    \
  do {                                                                      \
    for (int k_ = 0; k_ < 8; k_++) VSTORE((out) + 16 * k_, (q)[k_]);        \
  } while (0)

#define EBITS 4
#define SPLIT_COST 3
#define MERGE_COST 1

#include "codec/simd_tmpl.h"

static const struct b2_simd_kernels kernels = {
    "sse2", shuffle_sse2, unshuffle_sse2, bitshuffle_sse2,
    bitunshuffle_sse2};

const struct b2_simd_kernels *b2_simd_sse2_kernels(void) { return &kernels; }

#else
const struct b2_simd_kernels *b2_simd_sse2_kernels(void) { return NULL; }
#endif
