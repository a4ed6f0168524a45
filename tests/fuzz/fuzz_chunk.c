/* fuzz_chunk.c - libFuzzer target: the chunk decoder on arbitrary bytes.
 * Parses the header and decodes the whole chunk and partial ranges.  When
 * the whole chunk decodes, every range must decode too and give the same
 * bytes as the whole decode (a mismatch aborts).  Then the whole chunk
 * again with a block geometry (the ZFP codecs, the NDCELL and NDMEAN
 * filters need one): the block as 1, 2 or 3 dimensions chosen from the
 * chunk's own bytes, and a range of it the same way.  Last, the input as a
 * 2-D block of bytes for the NDLZ encoder: what it makes must decode to
 * the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_chunk.h"
#include "b2_codec.h"
#include "b2_error.h"
#include "../unit/spans_read.h"

#define MAX_OUT (8u << 20) /* a 64 MiB chunk of bit-shuffled 165-byte items
                             took the instrumented target over 10 s per input */

/* The range read as b2_frame_read_range does (spans_read.h: only the
 * planned bytes are readable).  A plan that does not move on or reaches
 * outside the chunk is a finding; when the whole chunk decodes (`whole` not
 * NULL), the range must give the same bytes or B2_E_FORMAT (blocks not laid
 * out one after another). */
static void check_spans(const uint8_t *data, size_t size, const b2_chunk_info *in,
                        const uint8_t *whole, size_t off, size_t len, uint8_t *tmp) {
  size_t cb = (size_t)in->cbytes;
  if (cb < 16 || cb > size) return;
  int rc = 0;
  enum spans_outcome o = spans_read(data, cb, off, len, tmp, &rc);
  if (o == SPANS_BAD) abort();
  if (o == SPANS_DECODED && whole && rc != B2_E_FORMAT &&
      (rc != (int)len || memcmp(tmp, whole + off, len) != 0))
    abort(); /* read by blocks, the range differs from the whole decode */
}

static void check_range(const uint8_t *data, size_t size, const uint8_t *whole,
                        size_t off, size_t len, uint8_t *tmp) {
  if (b2_chunk_decode_range(data, size, off, len, tmp, NULL) != (int)len ||
      memcmp(tmp, whole + off, len) != 0)
    abort(); /* the range differs from the whole decode */
}

/* NDLZ round trip of the input as a block of (size / w) rows of w bytes. */
static void ndlz_roundtrip(const uint8_t *data, size_t size) {
  if (size < 16 || size > 65536) return;
  int32_t w = 1 + data[0] % 40, shape[2] = {(int32_t)(size / (size_t)w), w};
  size_t n = (size_t)shape[0] * (size_t)w;
  int meta = data[1] & 1 ? 8 : 4;
  uint8_t *enc = malloc(n), *dec = malloc(n);
  int c = enc && dec ? b2_ndlz_compress(meta, 2, shape, data, n, enc, n) : 0;
  if (c > 0 && (b2_ndlz_decompress(meta, enc, (size_t)c, dec, n) != (int)n ||
                memcmp(dec, data, n) != 0))
    abort(); /* our encoder made a stream that does not give the block back */
  free(enc);
  free(dec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ndlz_roundtrip(data, size);
  b2_chunk_info in;
  if (b2_chunk_parse(data, size, &in) < 0) return 0;
  if (in.nbytes < 0 || (uint32_t)in.nbytes > MAX_OUT) return 0;
  size_t n = (size_t)in.nbytes;
  uint8_t *out = malloc(n ? n : 1), *tmp = malloc(n ? n : 1);
  if (!out || !tmp) goto done;
  if (b2_chunk_decode(data, size, out, n) == (int)n && n > 0) {
    check_range(data, size, out, 0, n, tmp);
    check_range(data, size, out, n - 1, 1, tmp);
    if (n > 2) check_range(data, size, out, n / 3, n / 3 + 1, tmp);
    if (in.blocksize > 0 && (size_t)in.blocksize < n) { /* across a block end */
      check_range(data, size, out, (size_t)in.blocksize - 1, 2, tmp);
      check_spans(data, size, &in, out, (size_t)in.blocksize - 1, 2, tmp);
    }
    check_spans(data, size, &in, out, n / 3, n / 3 < 4096 ? n / 3 + 1 : 4096, tmp);
  } else if (n > 2) {
    b2_chunk_decode_range(data, size, n / 3, n / 3 + 1, out, NULL);
    check_spans(data, size, &in, NULL, n / 3, n / 3 + 1, tmp);
  }
  /* with a geometry: the block's items as one row, or split in 2-3 sides */
  if (in.typesize > 0 && in.blocksize > 0 && in.blocksize % in.typesize == 0) {
    int32_t items = in.blocksize / in.typesize;
    b2_chunk_geom g;
    memset(&g, 0, sizeof g);
    int pick = size > 40 ? data[size - 1] % 3 : 0;
    int32_t a = 1 + (size > 41 ? data[size - 2] % 8 : 0);
    if (pick == 0 || items % a != 0) {
      g.ndim = 1;
      g.blockshape[0] = items;
    } else if (pick == 1 || (items / a) % 2 != 0) {
      g.ndim = 2;
      g.blockshape[0] = a;
      g.blockshape[1] = items / a;
    } else {
      g.ndim = 3;
      g.blockshape[0] = a;
      g.blockshape[1] = 2;
      g.blockshape[2] = items / a / 2;
    }
    if (b2_chunk_decode_par(data, size, out, n, NULL, &g) == (int)n && n > 2 &&
        (b2_chunk_decode_range(data, size, n / 3, n / 3 + 1, tmp, &g) != (int)(n / 3 + 1) ||
         memcmp(tmp, out + n / 3, n / 3 + 1) != 0))
      abort(); /* the range differs from the whole decode */
  }
done:
  free(out);
  free(tmp);
  return 0;
}
