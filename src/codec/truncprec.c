/*
 * truncprec.c - the "trunc_prec" filter (id 4): zero low mantissa bits of
 * IEEE floats (typesize 4 or 8) to help compression.  prec_bits >= 0 is the
 * number of mantissa bits kept; a negative value is the number of bits
 * removed (the reference's convention).  Decoding is the identity.
 * Bytes after the last whole element are copied unchanged.
 */
#include "b2_codec.h"
#include "b2_error.h"

#include <string.h>

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
  size_t n = nbytes / typesize, body = n * typesize;
  if (typesize == 4) {
    uint32_t mask = ~((UINT32_C(1) << zeroed) - 1), v;
    for (size_t i = 0; i < n; i++) {
      memcpy(&v, src + 4 * i, 4);
      v &= mask;
      memcpy(dst + 4 * i, &v, 4);
    }
  } else {
    uint64_t mask = ~((UINT64_C(1) << zeroed) - 1), v;
    for (size_t i = 0; i < n; i++) {
      memcpy(&v, src + 8 * i, 8);
      v &= mask;
      memcpy(dst + 8 * i, &v, 8);
    }
  }
  memcpy(dst + body, src + body, nbytes - body);
  return 0;
}
