/* fuzz_sframe.c - libFuzzer target: sparse frame directories.  The input
 * packs chunks.b2frame and the chunk files (sframe_pack.h); they are
 * written into a temporary directory (in /dev/shm when there is one),
 * which is opened as a frame and walked (frame_walk.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame_walk.h"
#include "sframe_pack.h"

static char dir[64];

static void put_file(const char *name, const uint8_t *data, size_t len) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  unlink(p);
  if (!data) return;
  FILE *fp = fopen(p, "wb");
  if (!fp) return;
  fwrite(data, 1, len, fp);
  fclose(fp);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size) {
  if (!dir[0]) {
    snprintf(dir, sizeof dir, "%s/b2fs-fuzz-sframe.%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
    mkdir(dir, 0700);
  }
  size_t pos = 0;
  const uint8_t *data;
  size_t len;
  if (!b2_sframe_unpack_part(in, size, &pos, &data, &len)) data = NULL, len = 0;
  put_file("chunks.b2frame", data, len);
  for (unsigned k = 0; k < B2_SFRAME_PACK_MAXCHUNKS; k++) {
    char name[32];
    snprintf(name, sizeof name, "%08X.chunk", k);
    if (!b2_sframe_unpack_part(in, size, &pos, &data, &len)) data = NULL, len = 0;
    put_file(name, data, len);
  }
  b2_frame *f;
  if (b2_frame_open(dir, &f) == 0) {
    fuzz_frame_walk(f);
    b2_frame_close(f);
  }
  return 0;
}
