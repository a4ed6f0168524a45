/* fuzz_npy.c - libFuzzer target: the .npy header parser and the NumPy
 * dtype parser.  An input starting with the .npy magic is parsed as a
 * header, and the descr it yields is sized; any other input is taken as
 * descr text (up to its first NUL) and sized. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"

#define MAXDESCR 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char descr[MAXDESCR + 1];
  if (size >= 6 && !memcmp(data, "\x93NUMPY", 6)) {
    size_t hlen;
    int fortran, ndim;
    int64_t shape[B2_B2ND_MAXDIM];
    if (b2_npy_parse(data, size, &hlen, descr, sizeof descr, &fortran, &ndim,
                     shape) < 0)
      return 0;
    if (hlen > size || ndim < 0 || ndim > B2_B2ND_MAXDIM || !memchr(descr, 0, sizeof descr))
      abort(); /* out of the documented contract */
    b2_npy_descr_itemsize(descr);
    return 0;
  }
  size_t n = size < MAXDESCR ? size : MAXDESCR;
  memcpy(descr, data, n);
  descr[n] = 0;
  b2_npy_descr_itemsize(descr);
  return 0;
}
