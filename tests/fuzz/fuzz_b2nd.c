/* fuzz_b2nd.c - libFuzzer target: the b2nd metalayer parser and reader.
 * The first byte picks the parser: bits 0-1 = 1, the .npy header parser
 * (see also fuzz_npy.c); 3, a python-blosc2 tensor's __pack_tensor__
 * (the frame's nbytes, times 2, in the next 8 bytes, little-endian), whose .npy
 * header is then written; even, the metalayer with item size
 * 1 + (byte >> 1) % 16.
 * A metalayer that parses gets its .npy header written and is read at its
 * start and end through a reader that checks every block request stays
 * inside a chunk of the geometry; SEEK_DATA/SEEK_HOLE walks over it (odd
 * chunks holes) ask only for its chunks and answer within the array. */
#include <stdint.h>
#include <stdlib.h>

#include "b2_b2nd.h"

/* A geometry's .npy header: sized, then written at that size. */
static void header(const b2_b2nd *a) {
  int n = b2_npy_header(a, NULL, 0);
  if (n > 0 && n < (1 << 20)) {
    char *h = malloc((size_t)n);
    if (h && b2_npy_header(a, h, (size_t)n) != n) abort();
    free(h);
  }
}

static int checked_reader(void *ctx, int64_t chunk, size_t off, size_t len, void *dst) {
  const b2_b2nd *a = ctx;
  if (chunk < 0 || chunk >= a->nchunks || off > (size_t)a->chunk_nbytes ||
      len > (size_t)a->chunk_nbytes - off)
    abort(); /* a request outside the geometry */
  for (size_t i = 0; i < len; i++) ((uint8_t *)dst)[i] = (uint8_t)(off + i);
  return 0;
}

static int checked_hole(void *ctx, int64_t chunk) {
  const b2_b2nd *a = ctx;
  if (chunk < 0 || chunk >= a->nchunks) abort(); /* a chunk outside the geometry */
  return (int)(chunk & 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  if ((data[0] & 3) == 3) {
    if (size < 9) return 0;
    uint64_t u = 0;
    for (int k = 8; k >= 1; k--) u = u << 8 | data[k];
    int64_t nbytes = (int64_t)(u >> 1); /* any count within int64 */
    b2_b2nd a;
    if (b2_tensor_parse(data + 9, size - 9, nbytes, &a) == 0) {
      if ((uint64_t)a.nitems * (uint64_t)a.itemsize != (uint64_t)nbytes) abort(); /* checked against the frame */
      header(&a);
      b2_b2nd_free(&a);
    }
    return 0;
  }
  if (data[0] & 1) {
    size_t hlen;
    char descr[256];
    int fortran, ndim;
    int64_t shape[B2_B2ND_MAXDIM];
    b2_npy_parse(data + 1, size - 1, &hlen, descr, sizeof descr, &fortran, &ndim, shape);
    return 0;
  }
  b2_b2nd a;
  int32_t itemsize = 1 + (data[0] >> 1) % 16;
  if (b2_b2nd_parse(data + 1, size - 1, itemsize, &a) < 0) return 0;
  header(&a);
  b2_b2nd_check(&a, a.nchunks, (int32_t)(a.chunk_nbytes <= INT32_MAX ? a.chunk_nbytes : 0));
  int64_t nb = b2_b2nd_nbytes(&a);
  static uint8_t out[4096];
  if (nb > 0 && a.block_nbytes <= (1 << 20)) {
    size_t len = nb < (int64_t)sizeof out ? (size_t)nb : sizeof out;
    if (b2_b2nd_read(&a, 0, len, out, checked_reader, &a) != (int)len) abort();
    if (b2_b2nd_read(&a, (uint64_t)(nb - (int64_t)len), len, out, checked_reader, &a) != (int)len)
      abort();
  }
  for (int k = 0; k < 4; k++) {
    int64_t off = k < 2 ? 0 : nb / 2;
    int cut;
    int64_t r = b2_b2nd_seek(&a, off, k & 1, checked_hole, &a, 1000, &cut);
    if (r < 0 || (nb > 0 && (r < off || r > nb))) abort();
  }
  b2_b2nd_free(&a);
  return 0;
}
