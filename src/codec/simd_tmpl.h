/*
 * simd_tmpl.h - shuffle and bitshuffle kernels written once over a vector
 * type; shuffle_sse2.c and shuffle_avx2.c include it after defining:
 *
 *   V, VB            the vector type and its width in bytes (16 or 32)
 *   SFX(name)        name with the level's suffix (name##_sse2)
 *   VLOAD(p) VSTORE(p, v)          unaligned load / store
 *   VSPLIT(a, b, e, o)  e = even bytes of a||b, o = odd bytes, in order;
 *                    may work per 128-bit lane, see VFIXUP
 *   VFIXUP(TS, x)    reorders a byte plane made by VSPLIT passes
 *   VMERGE(e, o, a, b)  the inverse: a||b = e0 o0 e1 o1 ...
 *   VMOVEMASK(v)     one bit per byte (its top bit), as an unsigned
 *   VSHL16_1(v)      shift each 16-bit lane left by one
 *   VBITT(v)         8x8 bit transpose in every 64-bit lane
 *   VTRANSPOSE8(p, q)  p[0..7] hold VB bytes of 8 rows; afterwards the
 *                    64-bit lanes of q[0..7], taken in store order (see
 *                    VSTORE_Q), hold the 8 row bytes of column 0, 1, ...
 *   VSTORE_Q(out, q) store q[0..7] so that column g lands at out + 8*g
 *   EBITS            log2(VB)
 *   SPLIT_COST, MERGE_COST  relative cost of a split and a merge pass
 *
 * Byte shuffle: for typesize 2, 4, 8 and 16, blocks of VB elements are
 * loaded as typesize vectors and transposed by even/odd split or
 * interleaving merge passes, which leaves byte plane m in vector m.
 * Other typesizes and the elements past the last whole block use the
 * generic code.
 *
 * Bit shuffle: the block is byte-shuffled into per-thread scratch, then
 * each byte plane's bits are gathered with movemask, 8 bit planes at a
 * time.  Bit unshuffle transposes 8 bit planes into columns of 8 bytes,
 * bit-transposes each 64-bit column, and byte-unshuffles the result.
 */

/* Loops over the vectors of a block must be unrolled so that the arrays
 * live in registers (a rolled loop becomes a memcpy through the stack). */
#if defined(__clang__)
#define UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define UNROLL _Pragma("GCC unroll 16")
#else
#define UNROLL
#endif

static inline int SFX(log2_ts)(size_t ts) {
  switch (ts) {
  case 2: return 1;
  case 4: return 2;
  case 8: return 3;
  case 16: return 4;
  default: return 0;
  }
}

/* Split / merge passes over n vectors: w[k] = even(v[2k], v[2k+1]),
 * w[n/2 + k] = odd(...), and the inverse. */
static inline void SFX(split_pass)(const V *v, V *w, int n) {
  UNROLL for (int k = 0; k < n / 2; k++) VSPLIT(v[2 * k], v[2 * k + 1], w[k], w[n / 2 + k]);
}
static inline void SFX(merge_pass)(const V *w, V *v, int n) {
  UNROLL for (int k = 0; k < n / 2; k++) VMERGE(w[k], w[n / 2 + k], v[2 * k], v[2 * k + 1]);
}

/* One block of VB elements of typesize TS (a power of two, 2^LOG): the
 * byte at index e*TS + b must move to b*VB + e.  Seen as bits of the
 * index, that is a rotation; a split pass rotates the index right by one
 * bit and a merge pass left by one, so shuffle is LOG splits or
 * (EBITS = log2 VB) merges, and unshuffle LOG merges.  PASSES ping-pongs
 * between two arrays; the result is in b after an odd number of passes
 * (the arrays stay in registers as long as no pointer is taken). */
#define PASSES(PASS, N, TS, a, b)                                            \
  do {                                                                       \
    if ((N) >= 1) SFX(PASS)(a, b, TS);                                       \
    if ((N) >= 2) SFX(PASS)(b, a, TS);                                       \
    if ((N) >= 3) SFX(PASS)(a, b, TS);                                       \
    if ((N) >= 4) SFX(PASS)(b, a, TS);                                       \
    if ((N) >= 5) SFX(PASS)(a, b, TS);                                       \
  } while (0)
#define RESULT(N, a, b, k) (((N) & 1) ? (b)[k] : (a)[k])

#define SHUFFLE_BODY(TS, LOG)                                                \
  for (size_t i = 0; i < vec_elems; i += VB) {                               \
    V a[TS], b[TS];                                                          \
    UNROLL for (int k = 0; k < TS; k++) a[k] = VLOAD(src + i * TS + (size_t)k * VB); \
    if (LOG * SPLIT_COST <= EBITS * MERGE_COST) {                            \
      PASSES(split_pass, LOG, TS, a, b);                                     \
      UNROLL for (int k = 0; k < TS; k++)                                    \
        VSTORE(dst + (size_t)k * nelem + i, VFIXUP(TS, RESULT(LOG, a, b, k))); \
    } else {                                                                 \
      PASSES(merge_pass, EBITS, TS, a, b);                                   \
      UNROLL for (int k = 0; k < TS; k++)                                    \
        VSTORE(dst + (size_t)k * nelem + i, RESULT(EBITS, a, b, k));         \
    }                                                                        \
  }

#define UNSHUFFLE_BODY(TS, LOG)                                              \
  for (size_t i = 0; i < vec_elems; i += VB) {                               \
    V a[TS], b[TS];                                                          \
    UNROLL for (int k = 0; k < TS; k++) a[k] = VLOAD(src + (size_t)k * nelem + i);  \
    PASSES(merge_pass, LOG, TS, a, b);                                       \
    UNROLL for (int k = 0; k < TS; k++)                                      \
      VSTORE(dst + i * TS + (size_t)k * VB, RESULT(LOG, a, b, k));           \
  }

static void SFX(shuffle)(size_t ts, size_t nbytes, const uint8_t *src,
                     uint8_t *dst) {
  size_t nelem = nbytes / ts, body = nelem * ts;
  size_t vec_elems = SFX(log2_ts)(ts) ? nelem - nelem % VB : 0;
  switch (ts) {
  case 2: SHUFFLE_BODY(2, 1) break;
  case 4: SHUFFLE_BODY(4, 2) break;
  case 8: SHUFFLE_BODY(8, 3) break;
  case 16: SHUFFLE_BODY(16, 4) break;
  default: break;
  }
  b2_shuffle_generic_tail(ts, vec_elems, nelem, src, dst);
  memcpy(dst + body, src + body, nbytes - body);
}

static void SFX(unshuffle)(size_t ts, size_t nbytes, const uint8_t *src,
                       uint8_t *dst) {
  size_t nelem = nbytes / ts, body = nelem * ts;
  size_t vec_elems = SFX(log2_ts)(ts) ? nelem - nelem % VB : 0;
  switch (ts) {
  case 2: UNSHUFFLE_BODY(2, 1) break;
  case 4: UNSHUFFLE_BODY(4, 2) break;
  case 8: UNSHUFFLE_BODY(8, 3) break;
  case 16: UNSHUFFLE_BODY(16, 4) break;
  default: break;
  }
  b2_unshuffle_generic_tail(ts, vec_elems, nelem, src, dst);
  memcpy(dst + body, src + body, nbytes - body);
}

#undef SHUFFLE_BODY
#undef UNSHUFFLE_BODY
#undef PASSES
#undef UNROLL
#undef RESULT

/* Bit planes of one byte plane `row` of n bytes (n a multiple of 8) into
 * out (8 planes of n/8 bytes). */
static void SFX(bits_of_row)(const uint8_t *row, size_t n, uint8_t *out) {
  size_t nb = n / 8, i = 0;
  for (; i + VB <= n; i += VB) {
    V x = VLOAD(row + i);
    for (int k = 7; k >= 0; k--) {
      unsigned m = VMOVEMASK(x);
      memcpy(out + (size_t)k * nb + i / 8, &m, VB / 8);
      x = VSHL16_1(x);
    }
  }
  for (; i < n; i += 8) {
    uint64_t x;
    memcpy(&x, row + i, 8);
    x = b2_transpose8x8(x);
    for (unsigned k = 0; k < 8; k++) out[k * nb + i / 8] = (uint8_t)(x >> (8 * k));
  }
}

/* Inverse: 8 bit planes of n/8 bytes into a byte plane of n bytes. */
static void SFX(row_of_bits)(const uint8_t *planes, size_t n, uint8_t *row) {
  size_t nb = n / 8, g = 0;
  for (; g + VB <= nb; g += VB) {
    V p[8], q[8];
    for (int k = 0; k < 8; k++) p[k] = VLOAD(planes + (size_t)k * nb + g);
    VTRANSPOSE8(p, q);
    for (int k = 0; k < 8; k++) q[k] = VBITT(q[k]);
    VSTORE_Q(row + 8 * g, q);
  }
  for (; g < nb; g++) {
    uint64_t x = 0;
    for (unsigned k = 0; k < 8; k++) x |= (uint64_t)planes[k * nb + g] << (8 * k);
    x = b2_transpose8x8(x);
    memcpy(row + 8 * g, &x, 8);
  }
}

static int SFX(bitshuffle)(size_t ts, size_t nelem, const uint8_t *src,
                       uint8_t *dst) {
  const uint8_t *rows = src;
  if (ts > 1) {
    uint8_t *tmp = b2_codec_scratch(nelem * ts);
    if (!tmp) return b2_fail(B2_E_NOMEM, "bitshuffle: no scratch memory");
    SFX(shuffle)(ts, nelem * ts, src, tmp);
    rows = tmp;
  }
  for (size_t j = 0; j < ts; j++) SFX(bits_of_row)(rows + j * nelem, nelem, dst + j * nelem);
  return 0;
}

static int SFX(bitunshuffle)(size_t ts, size_t nelem, const uint8_t *src,
                         uint8_t *dst) {
  uint8_t *rows = dst;
  if (ts > 1) {
    rows = b2_codec_scratch(nelem * ts);
    if (!rows) return b2_fail(B2_E_NOMEM, "bitunshuffle: no scratch memory");
  }
  for (size_t j = 0; j < ts; j++) SFX(row_of_bits)(src + j * nelem, nelem, rows + j * nelem);
  if (ts > 1) SFX(unshuffle)(ts, nelem * ts, rows, dst);
  return 0;
}
