/* frame_walk.h - what the frame fuzz targets do with a frame that opened:
 * read its metalayers, checksum state, b2nd geometry and a tensor's
 * __pack_tensor__, check it, and
 * decode its first chunks whole and in part (the part must equal the same
 * bytes of the whole, else abort).  Shared by fuzz_frame.c and
 * fuzz_sframe.c (a static function: each target is one translation unit). */
#ifndef B2_FUZZ_FRAME_WALK_H
#define B2_FUZZ_FRAME_WALK_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_frame.h"

#define FUZZ_MAX_CHUNK (64u << 20)
#define FUZZ_MAX_CHUNKS 64

static void fuzz_frame_walk(b2_frame *f) {
  const b2_frame_info *in = b2_frame_get_info(f);
  for (int k = 0; k < in->nmeta; k++) {
    const uint8_t *m;
    size_t len;
    const char *name = b2_frame_meta_name(f, k);
    if (b2_frame_meta_get(f, name, &m, &len) != 0) continue;
    b2_b2nd a;
    if (name && !strcmp(name, "b2nd") && in->typesize > 0 &&
        b2_b2nd_parse(m, len, in->typesize, &a) == 0) {
      b2_b2nd_check(&a, in->nchunks, in->chunksize);
      b2_b2nd_free(&a);
    }
  }
  for (int k = 0; k < in->nvlmeta; k++) {
    uint8_t *m;
    size_t len;
    if (b2_frame_vlmeta_get(f, b2_frame_vlmeta_name(f, k), &m, &len) == 0) free(m);
  }
  b2_b2nd t; /* a python-blosc2 tensor's shape and dtype */
  if (b2_tensor_get(f, &t) == 1) b2_b2nd_free(&t);
  b2_frame_csum_info cs;
  b2_frame_checksums(f, &cs);
  b2_frame_check(f);
  for (int64_t i = 0; i < in->nchunks && i < FUZZ_MAX_CHUNKS; i++) {
    b2_frame_chunk_special(f, i);
    b2_frame_chunk_cbytes(f, i);
    b2_frame_chunk_start(f, i);
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    if (nb <= 0 || (uint32_t)nb > FUZZ_MAX_CHUNK) continue;
    uint8_t *buf = malloc((size_t)nb), *part = malloc((size_t)nb);
    size_t off = (size_t)nb / 2, len = (size_t)nb - off;
    if (buf && part && b2_frame_decode_chunk(f, i, buf, (size_t)nb) == nb) {
      /* a chunk that decodes whole decodes in part to the same bytes */
      if (b2_frame_decode_range(f, i, off, len, part) != (int)len ||
          memcmp(part, buf + off, len) != 0)
        abort();
      /* and read block by block (b2_frame_read_range), a short range too */
      size_t m = len < 5000 ? len : 5000;
      if (b2_frame_read_range(f, i, off, len, part) != (int)len ||
          memcmp(part, buf + off, len) != 0 ||
          b2_frame_read_range(f, i, off, m, part) != (int)m || memcmp(part, buf + off, m) != 0)
        abort();
    } else if (buf) {
      b2_frame_decode_range(f, i, off, len, buf);
      b2_frame_read_range(f, i, off, len < 5000 ? len : 5000, buf);
    }
    free(buf);
    free(part);
  }
  if (in->nbytes > 0) b2_frame_chunk_at(f, in->nbytes - 1);
}
#endif
