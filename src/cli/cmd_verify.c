/* cmd_verify.c - `b2f verify PATH...`: decode everything, report the first
 * problem of each frame by chunk number and reason. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b2_b2nd.h"
#include "b2_error.h"
#include "b2_frame.h"
#include "cli/cli.h"

/* Verify one frame; 0 if good, else prints the problem and returns 1. */
static int verify_one(const char *path, int quiet) {
  b2_frame *f;
  int rc = b2_frame_open(path, &f);
  if (rc < 0) return b2f_report(path, rc);
  b2_b2nd_attach(f); /* an array's ZFP chunks and cell filters need its block shape */
  const b2_frame_info *in = b2_frame_get_info(f);
  int status = 0;

  rc = b2_frame_check(f); /* header, index, trailer and chunk placement */
  if (rc < 0) {
    status = b2f_report(path, rc);
    goto out;
  }

  const uint8_t *meta;
  size_t metalen;
  if (b2_frame_meta_get(f, "b2nd", &meta, &metalen) == 0) {
    b2_b2nd arr;
    rc = b2_b2nd_parse(meta, metalen, in->typesize, &arr);
    if (rc == 0) {
      rc = b2_b2nd_check(&arr, in->nchunks, in->chunksize);
      b2_b2nd_free(&arr);
    }
    if (rc < 0) {
      status = b2f_report(path, b2_context(rc, "b2nd metalayer"));
      goto out;
    }
  }
  for (int k = 0; k < in->nvlmeta; k++) {
    uint8_t *data;
    size_t len;
    const char *name = b2_frame_vlmeta_name(f, k);
    rc = b2_frame_vlmeta_get(f, name, &data, &len);
    if (rc < 0) {
      status = b2f_report(path, b2_context(rc, "vlmetalayer '%s'", name));
      goto out;
    }
    free(data);
  }

  size_t cap = 0;
  uint8_t *buf = NULL;
  for (int64_t i = 0; i < in->nchunks; i++) {
    int32_t nb = b2_frame_chunk_nbytes(f, i);
    if (nb < 0) {
      status = b2f_report(path, b2_context(nb, "chunk %lld", (long long)i));
      break;
    }
    if ((size_t)nb > cap) {
      free(buf);
      cap = (size_t)nb;
      buf = malloc(cap ? cap : 1);
      if (!buf) {
        status = b2f_report(path, b2_fail(B2_E_NOMEM, "chunk %lld: out of memory", (long long)i));
        break;
      }
    }
    rc = b2_frame_decode_chunk(f, i, buf, cap);
    if (rc < 0) {
      status = b2f_report(path, rc); /* the frame layer names the chunk */
      break;
    }
  }
  free(buf);
  if (!status && !quiet)
    printf("%s: ok (%lld chunks, %lld bytes)\n", path, (long long)in->nchunks,
           (long long)in->nbytes);
out:
  b2_frame_close(f);
  return status;
}

int b2f_verify(int argc, char **argv) {
  int quiet = 0, npaths = 0, status = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
      quiet = 1;
    else if (argv[i][0] == '-' && argv[i][1])
      return b2f_usage_error("verify", "unknown option");
  }
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-' && argv[i][1]) continue;
    npaths++;
    status |= verify_one(argv[i], quiet);
  }
  if (!npaths) return b2f_usage_error("verify", "missing PATH");
  return status;
}
