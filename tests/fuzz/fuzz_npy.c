/* fuzz_npy.c - libFuzzer target: the .npy header parser and the NumPy
 * dtype parser.  An input starting with the .npy magic is parsed as a
 * header, and the descr it yields is sized; any other input is taken as
 * descr text (up to its first NUL) and sized, and as a b2nd metalayer's
 * dtype text converted to a descr (b2_dtype_to_npy), which must convert
 * back (b2_dtype_from_npy) to a dtype of the same item size. */
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
  char *npy = NULL, *text = NULL;
  int64_t isz = 0, isz2 = 0;
  if (b2_dtype_to_npy(descr, &npy, &isz) == 0) {
    if (!npy || isz <= 0 || b2_dtype_from_npy(npy, &text, &isz2) != 0 || isz2 != isz)
      abort(); /* a descr we write must read back as the same item size */
  }
  free(npy);
  free(text);
  return 0;
}
