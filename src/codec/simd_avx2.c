/*
 * simd_avx2.c - AVX2 shuffle, unshuffle, bitshuffle and bitunshuffle (the
 * kernels are in simd_tmpl.h; this file supplies the 32-byte operations).
 * Built with -mavx2 on x86-64; without AVX2 at compile time it provides no
 * kernels.  simd.c only uses them on CPUs that support AVX2.
 */
#include "b2_error.h"
#include "codec/codec_internal.h"

#include <stddef.h>
#include <string.h>

#if defined(__AVX2__)
#include <immintrin.h>

#define V __m256i
#define VB 32
#define SFX(name) name##_avx2
#define VLOAD(p) _mm256_loadu_si256((const __m256i *)(const void *)(p))
#define VSTORE(p, v) _mm256_storeu_si256((__m256i *)(void *)(p), (v))
/* Splits work within 128-bit lanes: each lane is then a stream of its own,
 * lane 0 holding the even 16-byte chunks of the block and lane 1 the odd
 * ones, and after the split passes lane 0 of plane m has byte m of element
 * groups 0, 2, 4... (groups of 16/TS elements), lane 1 of groups 1, 3...
 * VFIXUP interleaves the groups back into element order. */
#define VSPLIT(a, b, e, o)                                                  \
  do {                                                                      \
    const __m256i lo_ = _mm256_set1_epi16(0x00ff);                          \
    (e) = _mm256_packus_epi16(_mm256_and_si256((a), lo_),                   \
                              _mm256_and_si256((b), lo_));                  \
    (o) = _mm256_packus_epi16(_mm256_srli_epi16((a), 8),                    \
                              _mm256_srli_epi16((b), 8));                   \
  } while (0)

static inline __m256i fixup_avx2(int ts, __m256i x) {
  switch (ts) {
  case 2: /* groups of 8 bytes: 64-bit words 0, 2, 1, 3 */
    return _mm256_permute4x64_epi64(x, 0xD8);
  case 4: /* groups of 4 bytes */
    return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  case 8: /* groups of 2 bytes: bring halves together, then interleave */
    return _mm256_shuffle_epi8(
        _mm256_permute4x64_epi64(x, 0xD8),
        _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15,
                         0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  default: /* 16: single bytes */
    return _mm256_shuffle_epi8(
        _mm256_permute4x64_epi64(x, 0xD8),
        _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,
                         0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  }
}
#define VFIXUP(TS, x) fixup_avx2((TS), (x))
/* Merges keep memory order: the 64-bit permutes undo the lane split of
 * the unpacks. */
#define VMERGE(e, o, a, b)                                                  \
  do {                                                                      \
    __m256i e_ = _mm256_permute4x64_epi64((e), 0xD8);                       \
    __m256i o_ = _mm256_permute4x64_epi64((o), 0xD8);                       \
    (a) = _mm256_unpacklo_epi8(e_, o_);                                     \
    (b) = _mm256_unpackhi_epi8(e_, o_);                                     \
  } while (0)
#define VMOVEMASK(v) ((unsigned)_mm256_movemask_epi8(v))
#define VSHL16_1(v) _mm256_add_epi8((v), (v))

static inline __m256i bitt_avx2(__m256i x) {
  __m256i t;
  t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 7)),
                       _mm256_set1_epi64x(0x00AA00AA00AA00AALL));
  x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 7)));
  t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 14)),
                       _mm256_set1_epi64x(0x0000CCCC0000CCCCLL));
  x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 14)));
  t = _mm256_and_si256(_mm256_xor_si256(x, _mm256_srli_epi64(x, 28)),
                       _mm256_set1_epi64x(0x00000000F0F0F0F0LL));
  x = _mm256_xor_si256(x, _mm256_xor_si256(t, _mm256_slli_epi64(t, 28)));
  return x;
}
#define VBITT(v) bitt_avx2(v)

/* 8 rows of 32 bytes; per 128-bit lane the same steps as the SSE2 version:
 * q[k] low lane = columns 2k, 2k+1; high lane = columns 16+2k, 17+2k. */
static inline void transpose8_avx2(const __m256i p[8], __m256i q[8]) {
  __m256i a[8], b[8];
  for (int k = 0; k < 4; k++) {
    a[2 * k] = _mm256_unpacklo_epi8(p[2 * k], p[2 * k + 1]);
    a[2 * k + 1] = _mm256_unpackhi_epi8(p[2 * k], p[2 * k + 1]);
  }
  for (int k = 0; k < 2; k++) {
    b[4 * k + 0] = _mm256_unpacklo_epi16(a[4 * k + 0], a[4 * k + 2]);
    b[4 * k + 1] = _mm256_unpackhi_epi16(a[4 * k + 0], a[4 * k + 2]);
    b[4 * k + 2] = _mm256_unpacklo_epi16(a[4 * k + 1], a[4 * k + 3]);
    b[4 * k + 3] = _mm256_unpackhi_epi16(a[4 * k + 1], a[4 * k + 3]);
  }
  for (int k = 0; k < 4; k++) {
    q[2 * k] = _mm256_unpacklo_epi32(b[k], b[4 + k]);
    q[2 * k + 1] = _mm256_unpackhi_epi32(b[k], b[4 + k]);
  }
}
#define VTRANSPOSE8(p, q) transpose8_avx2((p), (q))
#define VSTORE_Q(out, q)                                                    \
  do {                                                                      \
    for (int k_ = 0; k_ < 8; k_++) {                                        \
      _mm_storeu_si128((__m128i *)(void *)((out) + 16 * k_),                \
                       _mm256_castsi256_si128((q)[k_]));                    \
      _mm_storeu_si128((__m128i *)(void *)((out) + 128 + 16 * k_),          \
                       _mm256_extracti128_si256((q)[k_], 1));               \
    }                                                                       \
  } while (0)

#define EBITS 5
#define SPLIT_COST 3
#define MERGE_COST 2

#include "codec/simd_tmpl.h"

static const struct b2_simd_kernels kernels = {
    "avx2", shuffle_avx2, unshuffle_avx2, bitshuffle_avx2,
    bitunshuffle_avx2};

const struct b2_simd_kernels *b2_simd_avx2_kernels(void) { return &kernels; }

#else
const struct b2_simd_kernels *b2_simd_avx2_kernels(void) { return NULL; }
#endif
