/* fuzz_frame.c - libFuzzer target: the frame parser on arbitrary bytes.
 * Writes the input to a temporary file, opens it as a contiguous frame,
 * reads its metadata and decodes every chunk. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "b2_frame.h"

#define MAX_CHUNK (64u << 20)

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0]) snprintf(path, sizeof path, "/tmp/b2fs-fuzz-frame.%d", (int)getpid());
  FILE *fp = fopen(path, "wb");
  if (!fp) return 0;
  fwrite(data, 1, size, fp);
  fclose(fp);
  b2_frame *f;
  if (b2_frame_open(path, &f) < 0) return 0;
  const b2_frame_info *in = b2_frame_get_info(f);
  for (int k = 0; k < in->nmeta; k++) {
    const uint8_t *m;
    size_t len;
    b2_frame_meta_get(f, b2_frame_meta_name(f, k), &m, &len);
  }
  for (int k = 0; k < in->nvlmeta; k++) {
    uint8_t *m;
    size_t len;
    if (b2_frame_vlmeta_get(f, b2_frame_vlmeta_name(f, k), &m, &len) == 0) free(m);
  }
  for (int64_t i = 0; i < in->nchunks && i < 64; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    if (nb <= 0 || (uint32_t)nb > MAX_CHUNK) continue;
    uint8_t *buf = malloc((size_t)nb);
    if (!buf) break;
    b2_frame_decode_chunk(f, i, buf, (size_t)nb);
    b2_frame_decode_range(f, i, (size_t)nb / 2, (size_t)nb - (size_t)nb / 2, buf);
    free(buf);
  }
  b2_frame_close(f);
  return 0;
}
