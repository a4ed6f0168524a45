/* fuzz_chunk.c - libFuzzer target: the chunk decoder on arbitrary bytes.
 * Parses the header, decodes the whole chunk and a partial range. */
#include <stdint.h>
#include <stdlib.h>

#include "b2_chunk.h"

#define MAX_OUT (64u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  b2_chunk_info in;
  if (b2_chunk_parse(data, size, &in) < 0) return 0;
  if (in.nbytes < 0 || (uint32_t)in.nbytes > MAX_OUT) return 0;
  size_t n = (size_t)in.nbytes;
  uint8_t *out = malloc(n ? n : 1);
  if (!out) return 0;
  b2_chunk_decode(data, size, out, n);
  if (n > 2) {
    size_t off = n / 3, len = n / 3 + 1;
    b2_chunk_decode_range(data, size, off, len, out);
  }
  free(out);
  return 0;
}
