/*
 * truncprec.c - the two lossy filters that zero low bits of each item to
 * help compression; decoding either is the identity.  prec_bits >= 0 is
 * the number of bits kept, a negative value the number of bits removed
 * (the reference's convention).  Bytes after the last whole item are copied
 * unchanged.
 *   - trunc_prec (id 4): the mantissa of IEEE floats (typesize 4 or 8);
 *   - int_trunc (id 36): the whole item read as a little-endian unsigned
 *     integer (typesize 1, 2, 4 or 8).
 */
#include "b2_codec.h"
#include "b2_error.h"

#include <string.h>

/* Zero the low `zeroed` bits (< 64) of each typesize-byte item. */
static void mask_low_bits(size_t typesize, int zeroed, size_t nbytes, const uint8_t *src,
                          uint8_t *dst) {
  size_t n = nbytes / typesize, body = n * typesize;
  uint64_t mask = ~((UINT64_C(1) << zeroed) - 1), v = 0;
  for (size_t i = 0; i < n; i++) { /* little-endian: the low bytes first */
    memcpy(&v, src + typesize * i, typesize);
    v &= mask;
    memcpy(dst + typesize * i, &v, typesize);
  }
  memcpy(dst + body, src + body, nbytes - body);
}

int b2_truncprec(int prec_bits, size_t typesize, size_t nbytes,
                 const uint8_t *src, uint8_t *dst) {
  int mant;
  if (typesize == 4) mant = 23;
  else if (typesize == 8) mant = 52;
  else return b2_fail(B2_E_UNSUPPORTED, "trunc_prec: typesize %zu is not 4 or 8", typesize);
  int mag = prec_bits < 0 ? -prec_bits : prec_bits;
  if (mag > mant)
    return b2_fail(B2_E_INVAL, "trunc_prec: %d bits is more than the %d-bit mantissa", prec_bits, mant);
  int zeroed = prec_bits >= 0 ? mant - prec_bits : -prec_bits;
  if (zeroed >= mant)
    return b2_fail(B2_E_INVAL, "trunc_prec: cannot remove %d of %d mantissa bits", zeroed, mant);
  mask_low_bits(typesize, zeroed, nbytes, src, dst);
  return 0;
}

int b2_inttrunc(int prec_bits, size_t typesize, size_t nbytes, const uint8_t *src,
                uint8_t *dst) {
  if (typesize != 1 && typesize != 2 && typesize != 4 && typesize != 8)
    return b2_fail(B2_E_UNSUPPORTED, "int_trunc: typesize %zu is not 1, 2, 4 or 8", typesize);
  int width = (int)typesize * 8;
  int zeroed = prec_bits >= 0 ? width - prec_bits : -prec_bits;
  if (zeroed < 0 || zeroed >= width)
    return b2_fail(B2_E_INVAL, "int_trunc: cannot keep %d of %d bits", prec_bits, width);
  mask_low_bits(typesize, zeroed, nbytes, src, dst);
  return 0;
}
