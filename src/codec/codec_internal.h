/* codec_internal.h - declarations shared by the files of the codec layer
 * (not public): the blosclz coder, the per-thread codec state and the
 * SIMD kernel tables chosen at run time. */
#ifndef B2_CODEC_INTERNAL_H
#define B2_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Items of a block of `ndim` sides `shape` (each > 0), when that many
 * `typesize`-byte items fit in `nbytes`: 0 and *items; -1 when a side is not
 * positive or the block would exceed nbytes (shared by the codec and the
 * filters that work on an array's block shape: zfp.c, and ndcell.c, which
 * holds it). */
int b2_block_items(int ndim, const int32_t *shape, size_t typesize, size_t nbytes,
                   int64_t *items);

/* blosclz.c: decode exactly `dstlen` bytes; returns dstlen or B2_E_CODEC.
 * With `want` < dstlen, stop once at least `want` bytes are out and return
 * how many (the rest of the stream unchecked). */
int b2_blosclz_decompress(const uint8_t *src, size_t srclen, uint8_t *dst,
                          size_t dstlen, size_t want);

/* blosclz_enc.c: returns the stream size, 0 when it does not fit in
 * `dstcap` or does not pay off. */
int b2_blosclz_compress(int clevel, const uint8_t *src, size_t srclen,
                        uint8_t *dst, size_t dstcap);

/* Kernels with one signature per filter family.  The generic versions
 * accept any sizes; the SIMD ones handle any size too (they fall back to
 * the generic code for what their vectors do not cover). */
typedef void (*b2_shuffle_fn)(size_t typesize, size_t nbytes,
                              const uint8_t *src, uint8_t *dst);

void b2_shuffle_generic(size_t typesize, size_t nbytes, const uint8_t *src,
                        uint8_t *dst);
void b2_unshuffle_generic(size_t typesize, size_t nbytes, const uint8_t *src,
                          uint8_t *dst);
/* Process elements [first, nelem) of a block of nelem elements. */
void b2_shuffle_generic_tail(size_t typesize, size_t first, size_t nelem,
                             const uint8_t *src, uint8_t *dst);
void b2_unshuffle_generic_tail(size_t typesize, size_t first, size_t nelem,
                               const uint8_t *src, uint8_t *dst);

/* Bit transposes over `nelem` elements (nelem a multiple of 8); the caller
 * copies the elements past the last group of 8 and the trailing bytes.
 * Return 0 or B2_E_NOMEM (the SIMD versions use per-thread scratch). */
typedef int (*b2_bitshuffle_fn)(size_t typesize, size_t nelem,
                                const uint8_t *src, uint8_t *dst);
int b2_bitshuffle_generic(size_t typesize, size_t nelem, const uint8_t *src,
                          uint8_t *dst);
int b2_bitunshuffle_generic(size_t typesize, size_t nelem, const uint8_t *src,
                            uint8_t *dst);
/* Transpose the 8x8 bit matrix held in x, where byte r bit c is entry
 * (r, c): afterwards byte c bit r holds it.  Its own inverse. */
static inline uint64_t b2_transpose8x8(uint64_t x) {
  uint64_t t;
  t = (x ^ (x >> 7)) & UINT64_C(0x00AA00AA00AA00AA);
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & UINT64_C(0x0000CCCC0000CCCC);
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & UINT64_C(0x00000000F0F0F0F0);
  x ^= t ^ (t << 28);
  return x;
}

/* codecs.c: a per-thread scratch buffer of at least n bytes (valid until
 * the next call on the thread), or NULL when out of memory. */
uint8_t *b2_codec_scratch(size_t n);

/* simd.c: the kernels picked once at run time. */
struct b2_simd_kernels {
  const char *name;
  b2_shuffle_fn shuffle, unshuffle;
  b2_bitshuffle_fn bitshuffle, bitunshuffle; /* nelem-based, see above */
};
const struct b2_simd_kernels *b2_simd(void);
/* simd_sse2.c / simd_avx2.c: their kernels, or NULL when the compiler did
 * not target that instruction set. */
const struct b2_simd_kernels *b2_simd_sse2_kernels(void);
const struct b2_simd_kernels *b2_simd_avx2_kernels(void);

#endif /* B2_CODEC_INTERNAL_H */
