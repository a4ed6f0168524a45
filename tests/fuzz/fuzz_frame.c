/* fuzz_frame.c - libFuzzer target: the frame parser on arbitrary bytes.
 * Writes the input to a temporary file (in /dev/shm when there is one),
 * opens it as a contiguous frame and walks it (frame_walk.h). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "frame_walk.h"

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!path[0])
    snprintf(path, sizeof path, "%s/b2fs-fuzz-frame.%d",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
  FILE *fp = fopen(path, "wb");
  if (!fp) return 0;
  fwrite(data, 1, size, fp);
  fclose(fp);
  b2_frame *f;
  if (b2_frame_open(path, &f) == 0) {
    fuzz_frame_walk(f);
    b2_frame_close(f);
  }
  return 0;
}
